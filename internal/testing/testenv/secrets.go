package testenv

import (
	"testing"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

// SecretBox is a box under a fresh key, for tests that seal and open
// webhook secrets.
func SecretBox(t testing.TB) *secretbox.Box {
	t.Helper()
	key, err := secretbox.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}
