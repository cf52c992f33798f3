package send

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

// ErrForbiddenTarget marks a receiver address Homing refuses to reach:
// loopback, private (RFC 1918, RFC 4193), link-local, CGNAT, multicast,
// unspecified and cloud metadata addresses, in IPv4, IPv6 and IPv4-mapped
// forms, unless delivery.allowed_networks opens an exception.
var ErrForbiddenTarget = errors.New("receiver address is not allowed")

// Guard refuses forbidden addresses at dial time, after DNS resolution, so a
// name that resolves (or is rebound) to an internal address cannot slip
// through.
type Guard struct {
	g *ssrf.Guardian
}

// NewGuard builds a Guard; allowed prefixes are exceptions to the deny list.
func NewGuard(allowed []netip.Prefix) *Guard {
	var v4, v6 []netip.Prefix
	for _, p := range allowed {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return &Guard{g: ssrf.New(ssrf.WithAnyPort(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))}
}

// guardHint is how a refusal says what to set, by the names an operator
// sets them with.
const guardHint = "private, loopback and link-local addresses are refused: set HOMING_DELIVERY_ALLOW_PRIVATE_NETWORKS=true " +
	"(delivery.allow_private_networks) to allow them all, or list the network in HOMING_DELIVERY_ALLOWED_NETWORKS " +
	"(delivery.allowed_networks, e.g. 10.0.0.0/8)"

// Control is a net.Dialer Control function (SenderConfig.DialControl).
func (g *Guard) Control(network, address string, c syscall.RawConn) error {
	if err := g.g.Safe(network, address, c); err != nil {
		return fmt.Errorf("%w: %v (%s)", ErrForbiddenTarget, err, guardHint)
	}
	return nil
}

// CheckHost resolves host and refuses it if any of its addresses is
// forbidden, so a webhook pointing at an internal address is refused when it
// is created, not only when it is sent.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			// An unresolvable name is not refused here: DNS may be
			// private to the workers. Dial time checks it again.
			return nil
		}
		addrs = ips
	}
	for _, a := range addrs {
		if err := g.g.SafeAddr(a.Unmap()); err != nil {
			return fmt.Errorf("%w: %s resolves to %s (%s)", ErrForbiddenTarget, host, a, guardHint)
		}
	}
	return nil
}
