// Package token issues and checks the bearer tokens of Homing's HTTP API.
// A token is "hmg_" followed by 32 random bytes in base64url; only its
// SHA-256 is stored, so the database holds nothing that authenticates. A
// high-entropy token needs no slow hash: there is nothing to guess.
//
// Scopes are deliberately two: publish may only publish events (what a
// producer such as a Frappe site needs), admin may do everything.
package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/models"
)

// Scopes a token may have.
const (
	ScopePublish = "publish"
	ScopeAdmin   = "admin"
)

// Scopes lists the scopes, narrowest first.
var Scopes = []string{ScopePublish, ScopeAdmin}

// Prefix starts every token, so a leaked one is recognisable (and secret
// scanners can look for it).
const Prefix = "hmg_"

// MaxNameLength bounds a token's name.
const MaxNameLength = 140

// touchEvery is how stale last_used_at may get: a token used constantly
// costs one write a minute, not one per request.
const touchEvery = time.Minute

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound = errors.New("token not found")
	ErrExists   = errors.New("token already exists")
	ErrInvalid  = errors.New("invalid token request")
	// ErrUnknown is an Authorization token that is not (or no longer) one
	// Homing issued.
	ErrUnknown = errors.New("unknown token")
)

// FieldError is an ErrInvalid that names the request's field at fault
// (name, scope or tenant), so that the API can say which one to fix.
type FieldError struct {
	Field string
	msg   string
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, msg: fmt.Sprintf(format, args...)}
}

// Token is a token as `homing token list --json` shows it: never the token
// itself.
type Token struct {
	// ID is the token's row, which what the token made may name (a portal
	// link, revoked with it); never shown.
	ID    string `json:"-"`
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Tenant is the tenant the token acts in. An Operator token (made
	// without --tenant) acts in Tenant, which is always the default
	// tenant, or in any tenant its request names (Homing-Tenant), and may
	// manage tenants; any other acts in Tenant only.
	Tenant     string     `json:"tenant"`
	Operator   bool       `json:"operator"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func viewOf(m models.APIToken) Token {
	t := Token{ID: m.ID, Name: m.Name, Scope: m.Scope, Tenant: models.TenantOr(m.Tenant), Operator: m.Operator, CreatedAt: m.CreatedAt.UTC()}
	if m.LastUsedAt != nil {
		u := m.LastUsedAt.UTC()
		t.LastUsedAt = &u
	}
	return t
}

// Allows reports whether a token of scope may use an endpoint that needs
// need.
func Allows(scope, need string) bool {
	return scope == ScopeAdmin || scope == need
}

// Service creates, lists, revokes and checks tokens.
type Service struct {
	db      *gorm.DB
	clock   clock.Clock
	log     *slog.Logger
	checked checked
}

// New builds a Service.
func New(db *gorm.DB, clk clock.Clock, log *slog.Logger) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: db, clock: clk, log: log}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// Hash is what the database keeps of a token: its SHA-256, in hex.
func Hash(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// generate makes a new token.
func generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Create issues a token named name with scope ("" means publish) and returns
// it with the plain token, which is not kept and cannot be shown again. A
// token with a tenant acts in that tenant only; without one ("") it is an
// operator token.
func (s *Service) Create(ctx context.Context, name, scope, tenant string) (Token, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > MaxNameLength || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Token{}, "", invalid("name", "name %q must be 1 to %d printable characters", name, MaxNameLength)
	}
	if scope == "" {
		scope = ScopePublish
	}
	if !slices.Contains(Scopes, scope) {
		return Token{}, "", invalid("scope", "scope %q is not one of %s", scope, strings.Join(Scopes, ", "))
	}
	row := models.APIToken{
		ID: uuid.Must(uuid.NewV7()).String(), Name: name, Scope: scope,
		Tenant: models.DefaultTenant, Operator: true, CreatedAt: s.now(),
	}
	if tenant != "" {
		var n int64
		if err := s.db.WithContext(ctx).Model(&models.Tenant{}).Where("name = ?", tenant).Count(&n).Error; err != nil {
			return Token{}, "", fmt.Errorf("read tenant %q: %w", tenant, err)
		}
		if n == 0 {
			return Token{}, "", invalid("tenant", "tenant %q does not exist (see homing tenant list)", tenant)
		}
		row.Tenant, row.Operator = tenant, false
	}
	plain, err := generate()
	if err != nil {
		return Token{}, "", err
	}
	row.TokenHash = Hash(plain)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return Token{}, "", fmt.Errorf("%w: %q (choose another name, or revoke it first with homing token revoke)", ErrExists, name)
		}
		return Token{}, "", fmt.Errorf("create token %q: %w", name, err)
	}
	s.log.Info("api token created", "token", name, "scope", scope, "tenant", row.Tenant, "operator", row.Operator)
	return viewOf(row), plain, nil
}

// List returns every token, by name: what an operator sees.
func (s *Service) List(ctx context.Context) ([]Token, error) {
	return s.list(ctx, s.db.WithContext(ctx))
}

// ListOf returns the tokens of tenant, by name: what the tenant's own
// admins see and manage. An operator token is never one of them, though it
// acts in the default tenant.
func (s *Service) ListOf(ctx context.Context, tenant string) ([]Token, error) {
	return s.list(ctx, s.db.WithContext(ctx).Where("tenant = ? AND NOT operator", tenant))
}

func (s *Service) list(_ context.Context, q *gorm.DB) ([]Token, error) {
	var rows []models.APIToken
	if err := q.Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = viewOf(r)
	}
	return out, nil
}

// Revoke deletes token name; requests carrying it are refused from then on.
func (s *Service) Revoke(ctx context.Context, name string) error {
	return s.revoke(ctx, s.db.WithContext(ctx).Where("name = ?", name), name)
}

// RevokeOf deletes token name if it is one of tenant's (ListOf); any other
// token, an operator's included, is ErrNotFound, as if it did not exist.
func (s *Service) RevokeOf(ctx context.Context, tenant, name string) error {
	return s.revoke(ctx, s.db.WithContext(ctx).Where("name = ? AND tenant = ? AND NOT operator", name, tenant), name)
}

func (s *Service) revoke(_ context.Context, q *gorm.DB, name string) error {
	res := q.Delete(&models.APIToken{})
	if res.Error != nil {
		return fmt.Errorf("revoke token %q: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %q (see homing token list)", ErrNotFound, name)
	}
	s.checked.forget()
	s.log.Info("api token revoked", "token", name)
	return nil
}

// Authenticate returns the token plain stands for, or ErrUnknown. It
// records when the token was last used, at most once a minute. A token it
// found is believed for checkedTTL without another lookup, so a revocation
// made by another process takes up to that long to refuse it here.
func (s *Service) Authenticate(ctx context.Context, plain string) (Token, error) {
	if !strings.HasPrefix(plain, Prefix) {
		return Token{}, ErrUnknown
	}
	hash := Hash(plain)
	now := s.now()
	if tok, ok := s.checked.get(hash, now); ok {
		return tok, nil
	}
	var row models.APIToken
	// Served by the unique index on token_hash.
	err := s.db.WithContext(ctx).Where("token_hash = ?", hash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Token{}, ErrUnknown
	}
	if err != nil {
		return Token{}, fmt.Errorf("read token: %w", err)
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) >= touchEvery {
		// Best effort: a failed bookkeeping write must not refuse the request.
		if err := s.db.WithContext(ctx).Model(&models.APIToken{}).Where("id = ?", row.ID).
			Update("last_used_at", now).Error; err != nil {
			s.log.Warn("record token use", "token", row.Name, "error", err.Error())
		} else {
			row.LastUsedAt = &now
		}
	}
	tok := viewOf(row)
	s.checked.put(hash, tok, now)
	return tok, nil
}

// Forget drops every token Authenticate remembers, for a caller that
// deleted tokens other than through Revoke (a tenant's delete revokes its
// tokens): they are refused here at once, and within checkedTTL by other
// processes, as a revoked one is.
func (s *Service) Forget() { s.checked.forget() }
