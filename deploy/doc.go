// Package deploy holds no code: its directory carries the files that run
// Homing (compose.yaml, k8s/, systemd/) and its tests keep them, the
// Dockerfile and the Makefile's release build in step with the code, so a
// renamed config key or command breaks the build instead of a deployment.
package deploy
