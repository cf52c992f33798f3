package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/homingdev/homing/internal/ops/token"
)

// realm is the WWW-Authenticate realm of every 401 and 403.
const realm = `Bearer realm="homing"`

// authenticate checks the request's bearer token and that its scope allows
// an endpoint that needs need. Missing and malformed headers and unknown
// tokens are 401 with WWW-Authenticate (RFC 6750); a valid token of too
// narrow a scope is 403.
func (s *Server) authenticate(r *http.Request, need string) (token.Token, error) {
	h := r.Header.Get("Authorization")
	unauthorized := func(challenge, format string, args ...any) error {
		return &authError{err: errorf(http.StatusUnauthorized, CodeUnauthorized, "", format, args...), challenge: challenge}
	}
	if h == "" {
		return token.Token{}, unauthorized(realm, "missing Authorization header: send \"Authorization: Bearer <token>\" (homing token create makes a token)")
	}
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return token.Token{}, unauthorized(realm+`, error="invalid_request"`, "the Authorization header must be \"Bearer <token>\"")
	}
	tok, err := s.cfg.Tokens.Authenticate(r.Context(), cred)
	if errors.Is(err, token.ErrUnknown) {
		return token.Token{}, unauthorized(realm+`, error="invalid_token"`, "the bearer token is not valid: it was revoked, or this Homing never issued it (see homing token list)")
	}
	if err != nil {
		return token.Token{}, err
	}
	if !token.Allows(tok.Scope, need) {
		return token.Token{}, &authError{
			err:       errorf(http.StatusForbidden, CodeForbidden, "", "token %q has scope %s; %s %s needs a token with scope %s", tok.Name, tok.Scope, r.Method, r.URL.Path, need),
			challenge: fmt.Sprintf(`%s, error="insufficient_scope", scope=%q`, realm, need),
		}
	}
	return tok, nil
}

// authError is a refusal that carries its WWW-Authenticate challenge.
type authError struct {
	err       *Error
	challenge string
}

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// setChallenge adds the WWW-Authenticate header of an authentication error.
func setChallenge(w http.ResponseWriter, err error) {
	var ae *authError
	if errors.As(err, &ae) {
		w.Header().Set("WWW-Authenticate", ae.challenge)
	}
}

type tokenKey struct{}

func withToken(ctx context.Context, t token.Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// tokenOf is the token that authenticated the request (zero when none).
func tokenOf(ctx context.Context) token.Token {
	t, _ := ctx.Value(tokenKey{}).(token.Token)
	return t
}

// tokenName is the name of the token that authenticated the request, for
// logs ("" when none).
func tokenName(ctx context.Context) string {
	t, _ := ctx.Value(tokenKey{}).(token.Token)
	return t.Name
}
