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
type hookCache struct {
	mu      sync.Mutex
	version int64
	byKey   map[matchKey][]models.Webhook
}

// hookCacheKeys bounds the cache; past it the cache starts over.
const hookCacheKeys = 4096

func newHookCache() *hookCache {
	return &hookCache{byKey: make(map[matchKey][]models.Webhook)}
}

// get returns the webhooks cached for k and the version they were read at.
func (c *hookCache) get(k matchKey) ([]models.Webhook, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hooks, ok := c.byKey[k]
	return hooks, c.version, ok
}

// put caches hooks, read at version, for k. An answer older than what the
// cache holds is dropped; a newer one replaces everything.
func (c *hookCache) put(k matchKey, hooks []models.Webhook, version int64) {
	if len(hooks) == 0 || version == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case version < c.version:
		return
	case version > c.version || len(c.byKey) >= hookCacheKeys:
		clear(c.byKey)
		c.version = version
	}
	c.byKey[k] = hooks
}

// saw records that webhooks_version reads version now: anything cached at
// an older one is dropped.
func (c *hookCache) saw(version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version > c.version {
		clear(c.byKey)
		c.version = version
	}
}
