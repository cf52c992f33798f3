package storage

import (
	"fmt"
	"testing"

	"github.com/homingdev/homing/models"
)

// fleetKey is tenant i's one (doctype, event) key.
func fleetKey(i int) matchKey { return matchKey{fmt.Sprintf("t%05d", i), "Sales Order", "on_submit"} }

// threeHooks is a key's three webhooks.
func threeHooks(i int) []models.Webhook {
	return []models.Webhook{{ID: fmt.Sprint(i, "a")}, {ID: fmt.Sprint(i, "b")}, {ID: fmt.Sprint(i, "c")}}
}

// A fleet of 10,000 tenants publishing in turn finds every tenant's
// webhooks cached on its second event: the cache is bounded by the webhooks
// it holds, which the fleet's 30,000 fit, not by 4,096 keys past which it
// started over (and missed on every event of such a fleet).
func TestHookCacheHoldsAFleet(t *testing.T) {
	c := newHookCache()
	const tenants = 10000
	for i := range tenants {
		c.put(fleetKey(i), threeHooks(i), 7)
	}
	for i := range tenants {
		hooks, version, ok := c.get(fleetKey(i))
		if !ok || len(hooks) != 3 || version != 7 {
			t.Fatalf("tenant %d: cached %v (%d webhooks, version %d), want its 3 webhooks at version 7", i, ok, len(hooks), version)
		}
	}
	if c.held != 3*tenants {
		t.Fatalf("held %d webhooks, want %d", c.held, 3*tenants)
	}
}

// Past its bound the cache makes room by evicting keys, keeps the rest and
// the newest answer, and never holds more webhooks than the bound; a newer
// version starts over, an older answer and a key larger than the bound are
// not cached.
func TestHookCacheBound(t *testing.T) {
	c := newHookCache()
	c.max = 30
	for i := range 25 {
		c.put(fleetKey(i), threeHooks(i), 1)
		if c.held > c.max {
			t.Fatalf("after key %d: held %d webhooks, bound %d", i, c.held, c.max)
		}
		if _, _, ok := c.get(fleetKey(i)); !ok {
			t.Fatalf("key %d was not cached", i)
		}
	}
	if len(c.byKey) != 10 || c.held != 30 {
		t.Fatalf("%d keys holding %d webhooks, want 10 holding 30 (full, not started over)", len(c.byKey), c.held)
	}
	// Replacing a key does not count its old webhooks twice.
	c.put(fleetKey(24), threeHooks(24)[:1], 1)
	if c.held != 28 {
		t.Fatalf("held %d after replacing a key's 3 webhooks with 1, want 28", c.held)
	}
	c.put(fleetKey(99), threeHooks(99), 0) // no version: not cached
	c.put(fleetKey(98), make([]models.Webhook, 31), 1)
	for _, k := range []int{99, 98} {
		if _, _, ok := c.get(fleetKey(k)); ok {
			t.Errorf("key %d was cached", k)
		}
	}
	c.put(fleetKey(50), threeHooks(50), 2)
	if len(c.byKey) != 1 || c.held != 3 || c.version != 2 {
		t.Fatalf("after a newer version: %d keys, %d webhooks, version %d; want 1, 3, 2", len(c.byKey), c.held, c.version)
	}
	c.put(fleetKey(51), threeHooks(51), 1)
	if _, _, ok := c.get(fleetKey(51)); ok {
		t.Fatal("an answer older than the cache was cached")
	}
}

// BenchmarkHookCacheFleet is fan-out's cache use for 10,000 tenants of 3
// webhooks publishing in turn: a get per event and a put on each miss.
// hits/op is the share of events served from the cache (1 once the fleet
// is cached; 0 with the old bound of 4,096 keys, which started over).
func BenchmarkHookCacheFleet(b *testing.B) {
	c := newHookCache()
	const tenants = 10000
	hooks := make([][]models.Webhook, tenants)
	keys := make([]matchKey, tenants)
	for i := range tenants {
		hooks[i], keys[i] = threeHooks(i), fleetKey(i)
	}
	i, hits := 0, 0
	for b.Loop() {
		k := i % tenants
		if _, _, ok := c.get(keys[k]); ok {
			hits++
		} else {
			c.put(keys[k], hooks[k], 1)
		}
		i++
	}
	b.ReportMetric(float64(hits)/float64(i), "hits/op")
}
