package send

import (
	"strings"
)

// reservedHeaders are the headers the HTTP client owns: letting a webhook
// set them would break framing or the connection, or send the request to
// a different virtual host than the URL names. The value is how error
// messages spell them.
var reservedHeaders = map[string]string{
	"host":              "Host",
	"content-length":    "Content-Length",
	"transfer-encoding": "Transfer-Encoding",
	"connection":        "Connection",
	"keep-alive":        "Keep-Alive",
	"upgrade":           "Upgrade",
	"te":                "TE",
	"trailer":           "Trailer",
	"proxy-connection":  "Proxy-Connection",
	// Homing sets these on every request; a webhook's own value would be
	// silently replaced.
	"content-type":               "Content-Type",
	"webhook-id":                 "webhook-id",
	"webhook-timestamp":          "webhook-timestamp",
	"webhook-signature":          "webhook-signature",
	"x-frappe-webhook-signature": "X-Frappe-Webhook-Signature",
}

// setByHoming are the reserved headers Homing itself writes.
var setByHoming = map[string]bool{"content-type": true, "webhook-id": true, "webhook-timestamp": true, "webhook-signature": true, "x-frappe-webhook-signature": true}

// secretByDefault are the headers that carry credentials: their values are
// sealed at rest and masked in every view even when not marked secret.
var secretByDefault = map[string]bool{"authorization": true, "proxy-authorization": true, "cookie": true, "x-api-key": true}

// SecretByDefault reports whether a header named name carries a credential
// whatever the webhook says.
func SecretByDefault(name string) bool { return secretByDefault[strings.ToLower(name)] }

// Masked is how a secret header's value is shown.
const Masked = "****"

// ParseHeader parses a webhook's "Name: Value" header line. It refuses
// anything that could smuggle a second header or body (CR, LF and other
// control characters), names that are not HTTP tokens, and the headers
// the client must own.
func ParseHeader(s string) (name, value string, err error) {
	return parseHeader(s, false)
}

// ParseFrappeHeader is ParseHeader for a compat frappe webhook, whose
// Content-Type comes only from its header rows (Frappe's
// get_webhook_headers), so a Content-Type row is allowed.
func ParseFrappeHeader(s string) (name, value string, err error) {
	return parseHeader(s, true)
}

func parseHeader(s string, contentType bool) (name, value string, err error) {
	if strings.ContainsAny(s, "\r\n") {
		return "", "", Unbuildable("header %q: line breaks are not allowed", s)
	}
	rawName, rawValue, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", Unbuildable("header %q: expected \"Name: Value\"", s)
	}
	name, value = strings.TrimSpace(rawName), strings.Trim(rawValue, " \t")
	if name == "" {
		return "", "", Unbuildable("header %q: name is empty", s)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return "", "", Unbuildable("header %q: name contains %q, which is not allowed in a header name", s, name[i])
		}
	}
	if spelled, reserved := reservedHeaders[strings.ToLower(name)]; reserved && !(contentType && strings.EqualFold(name, "Content-Type")) {
		if setByHoming[strings.ToLower(name)] {
			return "", "", Unbuildable("header %q: %s is set by Homing on every request and would replace this value; remove it", s, spelled)
		}
		return "", "", Unbuildable("header %q: %s cannot be overridden", s, spelled)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "", "", Unbuildable("header %q: value contains the control character %q", s, c)
		}
	}
	return name, value, nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110
// section 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	default:
		return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
	}
}
