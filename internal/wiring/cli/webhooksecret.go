package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/models"
)

// maxSecretFileBytes bounds what --secret-file and --secret - read.
const maxSecretFileBytes = 64 << 10

// secretFromFile applies --secret-file PATH and --secret - (stdin): the
// secret is read there instead of from the command line, where it would
// land in the shell history and in ps. One trailing newline is dropped.
func (e *env) secretFromFile(f *webhookFlags, secret string, given bool) (string, bool, error) {
	if f.secretFile != "" {
		if given {
			return "", false, usagef("give --secret or --secret-file, not both")
		}
		b, err := readLimited(f.secretFile, func() (io.ReadCloser, error) { return os.Open(f.secretFile) })
		if err != nil {
			return "", false, fmt.Errorf("--secret-file %s: %w", f.secretFile, err)
		}
		return b, true, nil
	}
	if given && secret == "-" {
		b, err := readLimited("stdin", func() (io.ReadCloser, error) { return io.NopCloser(e.stdin), nil })
		if err != nil {
			return "", false, fmt.Errorf("--secret -: %w", err)
		}
		return b, true, nil
	}
	return secret, given, nil
}

func readLimited(what string, open func() (io.ReadCloser, error)) (string, error) {
	r, err := open()
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(io.LimitReader(r, maxSecretFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFileBytes {
		return "", fmt.Errorf("%s holds more than %d bytes; it should hold only the secret", what, maxSecretFileBytes)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", errors.New("empty: it should hold the secret (to remove a webhook's secret, use --secret '')")
	}
	return s, nil
}

// warnUnservedQueue warns on stderr when no running worker serves w's
// queue: its deliveries would wait until one does. Redis being away is
// not this command's concern.
func (e *env) warnUnservedQueue(a *app.App, w models.Webhook) {
	served, _, err := preflight.ServedQueues(a.Redis)
	if err != nil || served[w.Queue] {
		return
	}
	p := preflight.UnservedQueue(w.Queue, []string{w.Name}, served)
	fmt.Fprintf(e.stderr, "warning: %s\n", p.Message)
}
