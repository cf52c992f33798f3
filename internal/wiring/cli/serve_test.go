package cli_test

import (
	"fmt"
	"net"
	"testing"
)

func TestServeUsageAndStartErrors(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	s.fails(2, []string{"serve", "now"}, `unexpected argument "now"`, "homing serve --help")

	// A taken port is reported at start, naming the key to change.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	busy := newSite(t, fmt.Sprintf("api:\n  addr: %q\n", l.Addr().String()))
	busy.ok("migrate")
	r := busy.homing("serve")
	checkError(t, r, 1, "homing: ", "api.addr", l.Addr().String(), "HOMING_API_ADDR")

	bad := newSite(t, "api:\n  addr: \"8088\"\n")
	r = bad.homing("serve")
	checkError(t, r, 1, "homing: ", `api.addr: "8088" is not host:port`)
}
