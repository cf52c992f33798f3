package portal_test

import (
	"testing"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// TestMain drops this binary's template database when the tests end.
func TestMain(m *testing.M) { testenv.Main(m) }
