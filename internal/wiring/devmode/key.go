package devmode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

// KeyFile is the dev secrets.key's file name in the state directory.
const KeyFile = "dev-secrets.key"

// StateDir is where dev mode keeps what it must find again on its next
// run: $XDG_STATE_HOME/homing, or ~/.local/state/homing when XDG_STATE_HOME
// is unset or relative (the XDG base directory specification). environ
// holds the variables ("K=V"); without HOME there, the process's home
// directory is used.
func StateDir(environ []string) (string, error) {
	lookup := func(name string) string {
		v := ""
		for _, kv := range environ {
			if k, val, ok := strings.Cut(kv, "="); ok && k == name {
				v = val
			}
		}
		return v
	}
	if x := lookup("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "homing"), nil
	}
	home := lookup("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find a directory for the dev secrets.key: %w (set XDG_STATE_HOME, or HOMING_SECRETS_KEY)", err)
		}
	}
	return filepath.Join(home, ".local", "state", "homing"), nil
}

// Key is the dev instance's secrets.key, kept in dir/KeyFile (0600): made on
// the first run, read on every later one, so the secrets a dev database
// holds stay openable across restarts. Two dev runs starting at once agree
// on one key.
func Key(dir string) (string, error) {
	path := filepath.Join(dir, KeyFile)
	if key, err := readKey(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make a directory for the dev secrets.key: %w", err)
	}
	key, err := secretbox.GenerateKey()
	if err != nil {
		return "", err
	}
	// Written aside and linked into place, so no run ever reads a half
	// written key, and a second run that lost the race reads the winner's.
	tmp, err := os.CreateTemp(dir, KeyFile+".*") // 0600
	if err != nil {
		return "", fmt.Errorf("write the dev secrets.key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(key + "\n")
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return "", fmt.Errorf("write the dev secrets.key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readKey(path)
	} else if err != nil {
		return "", fmt.Errorf("write the dev secrets.key %s: %w", path, err)
	}
	return key, nil
}

func readKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if _, err := secretbox.New(key); err != nil {
		return "", fmt.Errorf("dev secrets.key %s: %w (delete the file to make a new one; secrets sealed with it are then lost)", path, err)
	}
	return key, nil
}
