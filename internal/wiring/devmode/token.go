package devmode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/homingdev/homing/internal/ops/token"
)

// TokenFile is the console's admin token's file name in the state
// directory, beside KeyFile.
const TokenFile = "dev-admin.token"

// TokenName is the console's admin token's name in the database (homing
// token list shows it).
const TokenName = "dev-console"

// AdminToken is the operator admin token a local run (make run, homing dev)
// prints for its console and API, kept in dir/TokenFile (0600): the one
// kept there while the database still knows it, else a new one.
//
// Kept rather than made afresh at each run, so a restart leaves the
// console signed in and a shell's $TOKEN valid; and never more than one
// per database, so runs do not pile tokens up: a new one replaces the token
// named TokenName, which the file no longer holds (the database keeps only
// a token's hash, so a lost one cannot be shown again). The file is no more
// secret than the dev secrets.key beside it, and the API it opens listens
// on loopback.
func AdminToken(ctx context.Context, dir string, tokens *token.Service) (string, error) {
	path := filepath.Join(dir, TokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		plain := strings.TrimSpace(string(b))
		tok, err := tokens.Authenticate(ctx, plain)
		if err == nil && tok.Name == TokenName && tok.Scope == token.ScopeAdmin && tok.Operator {
			return plain, nil
		}
		if err != nil && !errors.Is(err, token.ErrUnknown) {
			return "", fmt.Errorf("check the console's admin token: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read the console's admin token (delete %s to make a new one): %w", path, err)
	}
	if err := tokens.Revoke(ctx, TokenName); err != nil && !errors.Is(err, token.ErrNotFound) {
		return "", fmt.Errorf("replace the console's admin token: %w", err)
	}
	_, plain, err := tokens.Create(ctx, TokenName, token.ScopeAdmin, "")
	if err != nil {
		return "", fmt.Errorf("make the console's admin token: %w", err)
	}
	if err := writeFile(dir, TokenFile, plain); err != nil {
		return "", fmt.Errorf("keep the console's admin token: %w", err)
	}
	return plain, nil
}

// writeFile replaces dir/name with text, mode 0600: written aside and
// renamed into place, so no run reads it half written.
func writeFile(dir, name, text string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".*") // 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(text + "\n")
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
