//go:build race

package tests

// raceBuild makes the end-to-end binaries race-checked too when the tests
// run with -race.
const raceBuild = true
