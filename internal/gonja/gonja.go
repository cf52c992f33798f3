package gonja

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"path"

	"github.com/homingdev/homing/internal/gonja/builtins"
	"github.com/homingdev/homing/internal/gonja/config"
	"github.com/homingdev/homing/internal/gonja/exec"
	"github.com/homingdev/homing/internal/gonja/loaders"
	"github.com/homingdev/homing/internal/gonja/logging"
)

var (
	DefaultLoader      = loaders.MustNewFileSystemLoader("")
	DefaultConfig      = config.New()
	DefaultContext     = exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	DefaultEnvironment = &exec.Environment{
		Context:           DefaultContext,
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
)

// homing: the engine logs to log/slog (was logrus): SetLoggerOutput writes
// text records to out at the level SetLoggerLevel sets (Info until then, as
// logrus's default), and io.Discard turns logging off.
var loggerLevel = new(slog.LevelVar)

func SetLoggerOutput(out io.Writer) {
	if out == io.Discard {
		logging.SetLogger(nil)
		return
	}
	logging.SetLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: loggerLevel})))
}

func SetLoggerLevel(level slog.Level) {
	loggerLevel.Set(level)
}

func FromString(source string) (*exec.Template, error) {
	return FromBytes([]byte(source))
}

func FromBytes(source []byte) (*exec.Template, error) {
	rootID := fmt.Sprintf("root-%s", string(sha256.New().Sum(source)))

	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	shiftedLoader, err := loaders.NewShiftedLoader(rootID, bytes.NewReader(source), loader)
	if err != nil {
		return nil, err
	}

	return exec.NewTemplate(rootID, DefaultConfig, shiftedLoader, DefaultEnvironment)
}

func FromFile(filepath string) (*exec.Template, error) {
	loader, err := loaders.NewFileSystemLoader(path.Dir(filepath))
	if err != nil {
		return nil, err
	}

	return exec.NewTemplate(path.Base(filepath), DefaultConfig, loader, DefaultEnvironment)
}
