package tenant

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/homingdev/homing/models"
)

// Theme is how a tenant's portal presents itself to the tenant's people
// (issue 38): a SaaS's customers see its product, not its vendor. Every
// field is optional; empty is the portal's default.
type Theme struct {
	// ProductName replaces "Homing" in the portal's title and header.
	ProductName string `json:"product_name"`
	// LogoURL is an image the header shows; its origin is the only other
	// one the portal's CSP lets images come from.
	LogoURL string `json:"logo_url"`
	// AccentColor, #rrggbb in lower case, colours the portal's header.
	AccentColor string `json:"accent_color"`
	// SupportURL is where the header's Support link goes.
	SupportURL string `json:"support_url"`
}

// FieldError is an ErrInvalid that names the setting at fault, so that the
// API can say which field to fix.
type FieldError struct {
	Field string
	msg   string
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalidField(field, format string, args ...any) error {
	return &FieldError{Field: field, msg: fmt.Sprintf(format, args...)}
}

// Limits of a theme's values, the same in the migration's CHECKs (0028).
const (
	MaxProductName = 60
	MaxThemeURL    = 2048
)

// ThemeOf is the theme of tenant row m.
func ThemeOf(m models.Tenant) Theme {
	return Theme{ProductName: m.ProductName, LogoURL: m.LogoURL, AccentColor: m.AccentColor, SupportURL: m.SupportURL}
}

// applyTheme checks and sets the theme fields p gives.
func applyTheme(m *models.Tenant, p Patch) error {
	if p.ProductName != nil {
		v, err := checkProductName(*p.ProductName)
		if err != nil {
			return err
		}
		m.ProductName = v
	}
	if p.LogoURL != nil {
		v, err := checkThemeURL("logo_url", *p.LogoURL)
		if err != nil {
			return err
		}
		m.LogoURL = v
	}
	if p.AccentColor != nil {
		v, err := checkAccentColor(*p.AccentColor)
		if err != nil {
			return err
		}
		m.AccentColor = v
	}
	if p.SupportURL != nil {
		v, err := checkThemeURL("support_url", *p.SupportURL)
		if err != nil {
			return err
		}
		m.SupportURL = v
	}
	return nil
}

func checkProductName(v string) (string, error) {
	v = strings.TrimSpace(v)
	if utf8.RuneCountInString(v) > MaxProductName || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", invalidField("product_name", "product_name %q must be at most %d printable characters (empty shows Homing)", v, MaxProductName)
	}
	return v, nil
}

func checkAccentColor(v string) (string, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return v, nil
	}
	ok := len(v) == 7 && v[0] == '#'
	for i := 1; ok && i < len(v); i++ {
		ok = strings.IndexByte("0123456789abcdef", v[i]) >= 0
	}
	if !ok {
		return "", invalidField("accent_color", "accent_color %q is not a colour #rrggbb, such as #0a7d5a (empty: the default)", v)
	}
	return v, nil
}

// checkThemeURL accepts an absolute https URL, or http on a loopback host
// (a SaaS trying its portal on its own machine), of at most MaxThemeURL
// bytes, with no user info: what a customer's browser may be sent to, or
// load an image from, on the SaaS's behalf. Empty unsets it.
func checkThemeURL(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return v, nil
	}
	bad := func(why string) (string, error) {
		return "", invalidField(field, "%s %q %s", field, v, why)
	}
	if len(v) > MaxThemeURL {
		return bad(fmt.Sprintf("is longer than %d bytes", MaxThemeURL))
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.Opaque != "" || strings.ContainsAny(v, " \t\r\n\"'<>;,\\") {
		return bad("is not an absolute URL such as https://example.com/logo.svg")
	}
	if strings.IndexFunc(u.Host, func(r rune) bool {
		return !(r < utf8.RuneSelf && (r == '.' || r == '-' || r == ':' || r == '[' || r == ']' || unicode.IsLetter(r) || unicode.IsDigit(r)))
	}) >= 0 {
		return bad("has a host that is not a name or an IP address")
	}
	if u.User != nil {
		return bad("carries a user name or password; give the URL without them")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		return bad("must be https (http only on a loopback address, for trying it locally)")
	}
	return v, nil
}

// loopback says whether host is this machine: localhost or a loopback IP.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ImageOrigin is the origin (scheme://host[:port]) the portal's CSP lets
// the tenant's logo come from, or "" when it has none. The URL was checked
// when it was set (checkThemeURL); it is checked again here, because the
// value goes into a header.
func (t Theme) ImageOrigin() string {
	if _, err := checkThemeURL("logo_url", t.LogoURL); err != nil || t.LogoURL == "" {
		return ""
	}
	u, err := url.Parse(t.LogoURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
