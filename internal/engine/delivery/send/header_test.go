package send

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in        string
		wantName  string
		wantValue string
		wantErr   string
	}{
		{in: "X-Api-Key: secret", wantName: "X-Api-Key", wantValue: "secret"},
		{in: "  Authorization :  Bearer a:b  ", wantName: "Authorization", wantValue: "Bearer a:b"},
		{in: "X-Empty:", wantName: "X-Empty", wantValue: ""},
		{in: "Content-Type: application/vnd.api+json", wantErr: `Content-Type is set by Homing on every request and would replace this value; remove it`},
		{in: "webhook-signature: x", wantErr: `webhook-signature is set by Homing`},
		{in: "X-Frappe-Webhook-Signature: x", wantErr: `X-Frappe-Webhook-Signature is set by Homing`},
		{in: "X-Tab: a\tb", wantName: "X-Tab", wantValue: "a\tb"},
		{in: "no colon", wantErr: `header "no colon": expected "Name: Value"`},
		{in: ": value", wantErr: `header ": value": name is empty`},
		{in: "Bad Name: v", wantErr: `header "Bad Name: v": name contains ' '`},
		{in: "X(y): v", wantErr: `name contains '('`},
		{in: "X-A: v\r\nX-Injected: 1", wantErr: `header "X-A: v\r\nX-Injected: 1": line breaks are not allowed`},
		{in: "X-A: v\nX-B: 1", wantErr: "line breaks are not allowed"},
		{in: "X-A\r: v", wantErr: "line breaks are not allowed"},
		{in: "X-A: v\x00", wantErr: `value contains the control character '\x00'`},
		{in: "Host: x", wantErr: `header "Host: x": Host cannot be overridden`},
		{in: "host: x", wantErr: `Host cannot be overridden`},
		{in: "Content-Length: 1", wantErr: `Content-Length cannot be overridden`},
		{in: "transfer-encoding: chunked", wantErr: `Transfer-Encoding cannot be overridden`},
		{in: "CONNECTION: close", wantErr: `Connection cannot be overridden`},
		{in: "Keep-Alive: 1", wantErr: `Keep-Alive cannot be overridden`},
		{in: "Upgrade: h2c", wantErr: `Upgrade cannot be overridden`},
		{in: "te: trailers", wantErr: `TE cannot be overridden`},
		{in: "Trailer: X", wantErr: `Trailer cannot be overridden`},
		{in: "Proxy-Connection: keep-alive", wantErr: `Proxy-Connection cannot be overridden`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			name, value, err := ParseHeader(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseHeader(%q) = %q, %q; want error %q", tt.in, name, value, tt.wantErr)
				}
				if !errors.Is(err, ErrUnbuildable) {
					t.Errorf("error %v does not wrap ErrUnbuildable", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error =\n%s\nwant it to contain\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHeader(%q): %v", tt.in, err)
			}
			if name != tt.wantName || value != tt.wantValue {
				t.Errorf("ParseHeader(%q) = %q, %q; want %q, %q", tt.in, name, value, tt.wantName, tt.wantValue)
			}
		})
	}
}
