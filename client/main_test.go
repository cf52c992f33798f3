package client_test

import (
	"testing"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestMain drops this binary's template database and stops its Redis.
func TestMain(m *testing.M) { testenv.Main(m) }
