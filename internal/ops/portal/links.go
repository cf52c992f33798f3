// Package portal issues and checks the links that let a tenant's own people
// into the tenant's pages (issue 26 part 3). A link carries a token signed
// with a key derived from secrets.key that names the tenant, the link and
// its expiry; the link's row in portal_links makes it revocable. The pages
// themselves are the console's (package console), scoped by the session.
package portal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/homingdev/homing/internal/lib/clock"
	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/models"
)

// KeyLabel is the label secrets.key's portal subkey is derived with
// (secretbox.Box.Subkey).
const KeyLabel = "homing portal link v1"

// DefaultTTL is how long a link opens the portal when its creator does not
// say; MaxTTL bounds what a creator may ask for.
const (
	DefaultTTL = time.Hour
	MaxTTL     = 24 * time.Hour
)

// Errors callers tell apart with errors.Is. A person opening a link is told
// which one it is: each has a different remedy.
var (
	ErrNoKey    = errors.New(`portal links need secrets.key: generate one with "homing secrets genkey" and set HOMING_SECRETS_KEY`)
	ErrInvalid  = errors.New("this portal link is not valid: it was altered or cut short, or another Homing issued it")
	ErrExpired  = errors.New("this portal link has expired")
	ErrRevoked  = errors.New("this portal link was revoked")
	ErrBadTTL   = errors.New("invalid portal link ttl")
	ErrNotFound = errors.New("portal link not found")
)

// Link is an issued link: the token to put in its URL, and until when it
// opens the portal.
type Link struct {
	ID        string
	Tenant    string
	Token     string
	ExpiresAt time.Time
}

// Links issues, opens and revokes portal links.
type Links struct {
	db    *gorm.DB
	key   []byte
	clock clock.Clock
}

// New builds Links signing with key (secretbox.Box.Subkey(KeyLabel)); a nil
// key issues and opens nothing (ErrNoKey).
func New(db *gorm.DB, key []byte, clk clock.Clock) *Links {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Links{db: db, key: key, clock: clk}
}

func (l *Links) now() time.Time { return l.clock.Now().UTC().Truncate(time.Second) }

// CheckTTL refuses a ttl outside (0, MaxTTL], saying what is allowed; 0
// means DefaultTTL.
func CheckTTL(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return DefaultTTL, nil
	case ttl < time.Minute || ttl > MaxTTL:
		return 0, fmt.Errorf("%w: %s must be between 1m and %s (the default is %s)", ErrBadTTL, ttl, MaxTTL, DefaultTTL)
	}
	return ttl, nil
}

// Create issues a link into tenant's portal for ttl (0: DefaultTTL),
// recorded as made by the token by: revoking by revokes the link (the
// foreign key's cascade, migration 0021). A by without an ID (none made
// the link) is recorded by name only.
func (l *Links) Create(ctx context.Context, tenant string, ttl time.Duration, by token.Token) (Link, error) {
	if l.key == nil {
		return Link{}, ErrNoKey
	}
	ttl, err := CheckTTL(ttl)
	if err != nil {
		return Link{}, err
	}
	now := l.now()
	m := models.PortalLink{ID: uuid.Must(uuid.NewV7()).String(), Tenant: models.TenantOr(tenant),
		CreatedBy: by.Name, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if by.ID != "" {
		m.TokenID = &by.ID
	}
	if err := l.db.WithContext(ctx).Create(&m).Error; err != nil {
		return Link{}, fmt.Errorf("create portal link: %w", err)
	}
	return Link{ID: m.ID, Tenant: m.Tenant, Token: l.sign(m.Tenant, m.ID, m.ExpiresAt), ExpiresAt: m.ExpiresAt}, nil
}

// sign is the link's token: v1.<tenant>.<id>.<expiry, unix>.<mac>. Tenant
// names and ids hold no '.', so the fields split back unambiguously.
func (l *Links) sign(tenant, id string, expires time.Time) string {
	body := "v1." + tenant + "." + id + "." + strconv.FormatInt(expires.Unix(), 10)
	return body + "." + l.mac(body)
}

func (l *Links) mac(body string) string {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Open checks a link's token: its signature, its expiry, and that it was
// not revoked. It answers the link (without its token) or ErrInvalid,
// ErrExpired or ErrRevoked. Sessions a link started are checked again with
// Open at every request, so revoking a link ends them too. With ErrExpired
// and ErrRevoked it answers the link as well: Homing signed it, so its
// tenant is known, and the page that says it ended may be the tenant's
// (framed by its portal_origins, in its theme); it opens nothing.
func (l *Links) Open(ctx context.Context, tok string) (Link, error) {
	if l.key == nil {
		return Link{}, ErrNoKey
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != "v1" {
		return Link{}, ErrInvalid
	}
	body := strings.Join(parts[:4], ".")
	if !hmac.Equal([]byte(parts[4]), []byte(l.mac(body))) {
		return Link{}, ErrInvalid
	}
	exp, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return Link{}, ErrInvalid
	}
	link := Link{ID: parts[2], Tenant: parts[1], ExpiresAt: time.Unix(exp, 0).UTC()}
	if !l.clock.Now().Before(link.ExpiresAt) {
		return link, fmt.Errorf("%w at %s", ErrExpired, link.ExpiresAt.Format(time.RFC3339))
	}
	var m models.PortalLink
	err = l.db.WithContext(ctx).Where("id = ? AND tenant = ?", link.ID, link.Tenant).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return link, ErrRevoked // signed by us, so it existed: its tenant or row was deleted
	}
	if err != nil {
		return Link{}, fmt.Errorf("read portal link: %w", err)
	}
	if m.RevokedAt != nil {
		return link, fmt.Errorf("%w at %s", ErrRevoked, m.RevokedAt.UTC().Format(time.RFC3339))
	}
	return link, nil
}

// Revoke revokes tenant's link id: it opens nothing more, and the sessions
// it started end. Another tenant's link is ErrNotFound.
func (l *Links) Revoke(ctx context.Context, tenant, id string) error {
	now := l.now()
	res := l.db.WithContext(ctx).Model(&models.PortalLink{}).
		Where("id = ? AND tenant = ?", id, models.TenantOr(tenant)).
		Update("revoked_at", gorm.Expr("COALESCE(revoked_at, ?)", now))
	if res.Error != nil {
		return fmt.Errorf("revoke portal link %q: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return nil
}

// Issued is a live link as its tenant's admins see it: never its token,
// which is the credential.
type Issued struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// CreatedBy is the name of the token that made it.
	CreatedBy string `json:"created_by"`
}

// List is tenant's live links (neither expired nor revoked), oldest first.
func (l *Links) List(ctx context.Context, tenant string) ([]Issued, error) {
	var rows []models.PortalLink
	// Served by portal_links_tenant; a tenant has few live links (each
	// lives at most MaxTTL).
	if err := l.db.WithContext(ctx).Where("tenant = ? AND revoked_at IS NULL AND expires_at > ?", models.TenantOr(tenant), l.now()).
		Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list portal links: %w", err)
	}
	out := make([]Issued, len(rows))
	for i, m := range rows {
		out[i] = Issued{ID: m.ID, Tenant: m.Tenant, CreatedAt: m.CreatedAt.UTC(), ExpiresAt: m.ExpiresAt.UTC(), CreatedBy: m.CreatedBy}
	}
	return out, nil
}

// RevokeAll revokes every live link of tenant, ending their sessions, and
// says how many it revoked.
func (l *Links) RevokeAll(ctx context.Context, tenant string) (int64, error) {
	now := l.now()
	// Served by portal_links_tenant.
	res := l.db.WithContext(ctx).Model(&models.PortalLink{}).
		Where("tenant = ? AND revoked_at IS NULL AND expires_at > ?", models.TenantOr(tenant), now).
		Update("revoked_at", now)
	if res.Error != nil {
		return 0, fmt.Errorf("revoke the portal links of tenant %q: %w", tenant, res.Error)
	}
	return res.RowsAffected, nil
}
