package storage

import (
	"sync"

	"github.com/homingdev/homing/models"
)

// hookCache keeps, per doctype and event, the enabled webhooks fan-out last
// read on PostgreSQL, with the webhooks_version they were read at. It spares
// most events the SELECT of their webhooks, and never serves a stale one:
// the fan-out INSERT of rows planned from the cache writes them only while
// webhooks_version still reads the cached version (runInsert), and a
// mismatch empties the cache and plans the event again from a fresh read.
// So an event is delivered under the webhook definitions current when its
// rows were written, which is fresher than reading them before, as
// uncached fan-out does.
//
// Only non-empty answers are cached: an event no webhook takes writes no
// row, so nothing would check that the answer is still true.
//
// The key is (tenant, doctype, event), so a fleet of tenants needs a key per
// tenant and hook: the cache is bounded by the webhooks it holds
// (hookCacheWebhooks), not by keys, and a full cache evicts arbitrary keys
// (Go's map order) to make room instead of starting over. Starting over at
// 4,096 keys made 10,000 tenants publishing in turn miss on every event: a
// webhooks SELECT per event, 1.2 × the CPU per delivery of one tenant
// (docs/performance.md, Tenants; BenchmarkHookCacheFleet).
type hookCache struct {
	mu      sync.Mutex
	version int64
	byKey   map[matchKey][]models.Webhook
	// held is the number of webhooks byKey holds, at most max.
	held, max int
}

// hookCacheWebhooks bounds the webhooks the cache holds: 10,000 tenants of
// 3 webhooks fit, which took the worker's RSS from 56 to 109 MiB in the
// tenants bench (about 1.7 KiB per webhook with the GC's headroom).
const hookCacheWebhooks = 32768

func newHookCache() *hookCache {
	return &hookCache{byKey: make(map[matchKey][]models.Webhook), max: hookCacheWebhooks}
}

// get returns the webhooks cached for k and the version they were read at.
func (c *hookCache) get(k matchKey) ([]models.Webhook, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hooks, ok := c.byKey[k]
	return hooks, c.version, ok
}

// put caches hooks, read at version, for k. An answer older than what the
// cache holds is dropped; a newer one replaces everything. When the cache
// is full, arbitrary keys make room; a key with more webhooks than the
// whole bound is not cached.
func (c *hookCache) put(k matchKey, hooks []models.Webhook, version int64) {
	if len(hooks) == 0 || version == 0 || len(hooks) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case version < c.version:
		return
	case version > c.version:
		c.reset(version)
	}
	c.held -= len(c.byKey[k])
	delete(c.byKey, k)
	for old, hs := range c.byKey {
		if c.held+len(hooks) <= c.max {
			break
		}
		delete(c.byKey, old)
		c.held -= len(hs)
	}
	c.byKey[k] = hooks
	c.held += len(hooks)
}

// reset empties the cache at version.
func (c *hookCache) reset(version int64) {
	clear(c.byKey)
	c.held, c.version = 0, version
}

// saw records that webhooks_version reads version now: anything cached at
// an older one is dropped.
func (c *hookCache) saw(version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version > c.version {
		c.reset(version)
	}
}
