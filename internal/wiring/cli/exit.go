package cli

import (
	"errors"
	"fmt"
	"strings"
)

// Exit statuses of every Homing command.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitError carries the exit status of an error. Errors cobra and pflag
// return while reading the command line carry none and count as bad usage;
// errors from running a command are marked as failures by run.
type exitError struct {
	code int
	err  error
	// silent means the command already told the user what went wrong.
	silent bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef reports a command line that cannot be right, whatever the state of
// the system: exit status 2.
func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failure marks err as a runtime failure (exit status 1) unless it already
// carries a status.
func failure(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitFailure, err: err}
}

// exitCode maps an error returned by a command tree to an exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUsage
}

// messageError replaces err's text while keeping it for errors.Is.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

// oneLine folds a multi-line error message into the single line the
// command-line contract promises on stderr.
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
