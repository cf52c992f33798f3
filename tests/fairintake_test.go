package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/testing/testenv"
)

// heldPublish is a POST /v1/events on a connection of its own whose
// declared body is sent only in part: serve holds it, charged its declared
// length, until the rest comes or serve answers without it.
type heldPublish struct {
	conn   net.Conn
	answer chan heldAnswer
}

type heldAnswer struct {
	status int
	body   string
	err    error
}

// openHeldPublish starts a publish with tok declaring length bytes of body,
// of which it sends first.
func openHeldPublish(t *testing.T, base, tok string, length int, first string) *heldPublish {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h := &heldPublish{conn: conn, answer: make(chan heldAnswer, 1)}
	if _, err := fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: homing\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		tok, length, first); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			h.answer <- heldAnswer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		h.answer <- heldAnswer{status: resp.StatusCode, body: string(b)}
	}()
	return h
}

// TestOneTenantCannotStarveAnothersIntake runs `homing serve` with an
// in-flight budget of four full bodies. Tenant A's publish token opens four
// publishes that declare a full body and send a few bytes of it: before
// issue 35, they held the whole budget, shared by every tenant and charged
// before authentication, and every other tenant's publishes were answered
// 503 for as long as they trickled. Now a tenant holds at most its share
// (api.tenant_inflight_share, a quarter): one of A's is held, the other
// three are answered 429 tenant_share_full at once, and tenant B's
// publishes are accepted while A's held body is still open.
func TestOneTenantCannotStarveAnothersIntake(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: builds the binaries and runs them against PostgreSQL and Redis")
	}
	const maxBody = 64 << 10
	s := newSystem(t)
	s.env = withEnv(s.env, "HOMING_API_ADDR", "127.0.0.1:0")
	s.env = withEnv(s.env, "HOMING_DELIVERY_MAX_PAYLOAD_BYTES", fmt.Sprint(maxBody))
	s.env = withEnv(s.env, "HOMING_API_MAX_BODY_BYTES", fmt.Sprint(maxBody))
	// Four bodies of api.max_body_bytes, charged 24 × their length.
	s.env = withEnv(s.env, "HOMING_API_MAX_INFLIGHT_BYTES", fmt.Sprint(4*maxBody*24))
	op := s.startAPI(t)
	tokens := map[string]string{}
	for _, name := range []string{"tenant-a", "tenant-b"} {
		op.expect(t, http.StatusCreated, "POST", "/v1/tenants", `{"name": "`+name+`"}`)
		var tok map[string]any
		s.ok(t, &tok, "homing", "token", "create", "--name", name+"-publish", "--tenant", name, "--json")
		tokens[name] = tok["token"].(string)
	}
	b := op.withToken(tokens["tenant-b"])
	event := func(id string) string {
		return fmt.Sprintf(`{"id": %q, "doc_type": "Sales Order", "doc_name": "SO-1", "event": "on_submit", "doc": {"name": "SO-1"}}`, id)
	}

	var held []*heldPublish
	for i := range 4 {
		held = append(held, openHeldPublish(t, op.base, tokens["tenant-a"], maxBody, event(fmt.Sprintf("a-%d", i))[:10]))
	}
	// Three are answered, the events this test waits for; one is held.
	answered := map[int]heldAnswer{}
	testenv.Eventually(t, "three of tenant A's four held publishes answered", func() bool {
		for i, h := range held {
			select {
			case a := <-h.answer:
				answered[i] = a
			default:
			}
		}
		return len(answered) == 3
	})
	still := -1
	for i := range held {
		if _, ok := answered[i]; !ok {
			still = i
		}
	}
	for i, a := range answered {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(a.body), &e)
		if a.err != nil || a.status != http.StatusTooManyRequests || e.Error.Code != "tenant_share_full" || !strings.Contains(e.Error.Message, "api.tenant_inflight_share") {
			t.Errorf("tenant A's held publish %d: %d %s (error %v), want 429 tenant_share_full naming api.tenant_inflight_share", i, a.status, a.body, a.err)
		}
	}

	for i := range 10 {
		b.expect(t, http.StatusAccepted, "POST", "/v1/events", event(fmt.Sprintf("b-%d", i)))
	}

	// A's one held publish was open all along: it completes now.
	select {
	case a := <-held[still].answer:
		t.Fatalf("tenant A's held publish was answered before its body ended: %d %s (%v)", a.status, a.body, a.err)
	default:
	}
	rest := event(fmt.Sprintf("a-%d", still))[10:]
	if _, err := io.WriteString(held[still].conn, rest+strings.Repeat(" ", maxBody-len(event(fmt.Sprintf("a-%d", still))))); err != nil {
		t.Fatal(err)
	}
	if a := <-held[still].answer; a.err != nil || a.status != http.StatusAccepted {
		t.Errorf("tenant A's held publish, its body ended: %d %s (%v), want 202", a.status, a.body, a.err)
	}
}
