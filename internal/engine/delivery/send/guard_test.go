package send

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestGuardRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	g := NewGuard(nil)
	refused := []string{
		"127.0.0.1:80", "127.1.2.3:8080", "[::1]:443", "10.0.0.5:80", "172.16.3.4:80", "192.168.1.1:80",
		"169.254.169.254:80", "100.64.0.1:80", "224.0.0.1:80", "0.0.0.0:80", "[::]:80",
		"[fd00::1]:80", "[fe80::1]:80", "[::ffff:127.0.0.1]:80", "[::ffff:10.0.0.1]:80", "[ff02::1]:80",
	}
	for _, addr := range refused {
		network := "tcp4"
		if addr[0] == '[' {
			network = "tcp6"
		}
		if err := g.Control(network, addr, nil); !errors.Is(err, ErrForbiddenTarget) {
			t.Errorf("%s: got %v, want ErrForbiddenTarget", addr, err)
		}
	}
	for _, addr := range []string{"93.184.216.34:443", "8.8.8.8:8080"} {
		if err := g.Control("tcp4", addr, nil); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	open := NewGuard([]netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8")})
	if err := open.Control("tcp4", "10.1.2.3:80", nil); err != nil {
		t.Errorf("allowed network refused: %v", err)
	}
	if err := open.Control("tcp6", "[fd00::1]:80", nil); err != nil {
		t.Errorf("allowed v6 network refused: %v", err)
	}
	if err := open.Control("tcp4", "10.2.0.1:80", nil); !errors.Is(err, ErrForbiddenTarget) {
		t.Errorf("outside the exception: %v", err)
	}
}

func TestGuardChecksNamesAfterResolution(t *testing.T) {
	t.Parallel()
	g := NewGuard(nil)
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "169.254.169.254"} {
		if err := g.CheckHost(context.Background(), host); !errors.Is(err, ErrForbiddenTarget) {
			t.Errorf("%s: %v, want refused", host, err)
		}
	}
}

// A refusal names the variables that lift it, as the operator sets them.
func TestGuardRefusalSaysWhatToSet(t *testing.T) {
	t.Parallel()
	g := NewGuard(nil)
	for _, err := range []error{g.Control("tcp4", "127.0.0.1:80", nil), g.CheckHost(context.Background(), "10.0.0.1")} {
		for _, want := range []string{"HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true", "HOMING_DELIVERY_ALLOWED_NETWORKS"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %v does not name %s", err, want)
			}
		}
	}
}

func TestSenderWithGuardNeverReachesLoopback(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	guarded := NewSender(SenderConfig{DialControl: NewGuard(nil).Control})
	defer guarded.Close()
	res := guarded.Send(context.Background(), Request{Method: "POST", URL: srv.URL, Header: http.Header{}, Body: []byte("{}")})
	if res.Class != ClassInvalid || !errors.Is(res.Err, ErrForbiddenTarget) || hits.Load() != 0 {
		t.Fatalf("guarded send to loopback: class %s err %v hits %d", res.Class, res.Err, hits.Load())
	}
	allowed := NewSender(SenderConfig{DialControl: NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Control})
	defer allowed.Close()
	if res := allowed.Send(context.Background(), Request{Method: "POST", URL: srv.URL, Header: http.Header{}, Body: []byte("{}")}); !res.OK() || hits.Load() != 1 {
		t.Fatalf("allowed send: %+v hits %d", res, hits.Load())
	}
}
