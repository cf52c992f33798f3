package tenant

import (
	"sync"
	"time"

	"github.com/homingdev/homing/models"
)

// seenTTL is how long Lookup believes a tenant it read.
const seenTTL = time.Second

// seen remembers the tenants Lookup read, by name, for seenTTL.
type seen struct {
	mu     sync.Mutex
	byName map[string]seenTenant
}

type seenTenant struct {
	t  models.Tenant
	at time.Time
}

func (c *seen) get(name string, now time.Time) (models.Tenant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byName[name]
	if !ok || now.Sub(e.at) >= seenTTL || now.Before(e.at) {
		return models.Tenant{}, false
	}
	return e.t, true
}

func (c *seen) put(t models.Tenant, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil || len(c.byName) >= 4096 {
		c.byName = make(map[string]seenTenant)
	}
	c.byName[t.Name] = seenTenant{t, now}
}

func (c *seen) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byName)
}
