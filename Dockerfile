# syntax=docker/dockerfile:1
#
# One image for every Homing command: the entrypoint is the homing admin CLI,
# so the container's arguments pick the process ("worker", "scheduler",
# "serve", "migrate", "monitor --addr :8080", "webhook list", ...). The
# standalone worker, scheduler and enqueue binaries are in /usr/local/bin as
# well.
#
#   docker build -t ghcr.io/homingdev/homing .
#   docker run --rm ghcr.io/homingdev/homing secrets genkey

# The builder runs on the build machine's platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64)
# needs no emulation. TARGETOS/TARGETARCH are empty outside BuildKit, which
# makes go build for the builder's own platform.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
# The same command as `make release` (deploy/deploy_test.go keeps the two
# identical): static, no cgo, reproducible paths, no symbol tables.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/ ./cmd/...

# distroless/static has CA certificates (receivers are https) and tzdata, and
# neither a shell nor a package manager.
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="homing" \
      org.opencontainers.image.description="Webhook delivery on asynq and PostgreSQL" \
      org.opencontainers.image.source="https://github.com/homingdev/homing"
COPY --from=build /out/ /usr/local/bin/
# Numeric, so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 65532:65532
WORKDIR /home/nonroot
# 9464: the worker's /metrics, /healthz and /readyz (metrics.addr).
# 8088: homing serve, the HTTP API, with its own /healthz and /readyz (api.addr).
# Both default to 127.0.0.1, the container's own loopback: a container whose
# port is published or probed sets HOMING_METRICS_ADDR=0.0.0.0:9464 and
# HOMING_API_ADDR=0.0.0.0:8088 (deploy/compose.yaml, deploy/k8s/configmap.yaml).
# 8080: homing monitor (asynqmon) when started with --addr :8080.
EXPOSE 9464 8088 8080
# The worker and scheduler stop gracefully on SIGTERM: in-flight attempts get
# worker.shutdown_timeout to finish, the rest stay queued in Redis. serve
# gives requests in flight the same timeout.
STOPSIGNAL SIGTERM
ENTRYPOINT ["homing"]
CMD ["--help"]
