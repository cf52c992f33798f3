package event_test

import (
	"testing"

	"github.com/homingdev/homing/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
