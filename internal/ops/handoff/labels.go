package handoff

import (
	"sync"

	"github.com/homingdev/homing/models"
)

// Other is the tenant and webhook label value of everything past the
// bounds of Labels (metrics.OtherWebhooks is the same).
const Other = "other"

// The bounds a Labels has unless its process's configuration says
// otherwise (metrics.max_tenant_labels, metrics.max_webhook_labels and
// metrics.max_webhook_labels_per_tenant have these defaults): what a
// publisher's process using package transition hands off under.
const (
	DefaultMaxTenantLabels           = 100
	DefaultMaxWebhookLabels          = 100
	DefaultMaxWebhookLabelsPerTenant = 25
)

// Labels bounds the tenant and webhook label values of the delivery and
// attempt counters, so that neither a site with thousands of webhooks nor
// a tenant renaming its webhooks over and over can multiply the series (in
// a worker's registry) or the fields (of the handoff hashes in Redis):
//   - the first maxTenants tenants seen keep their name, later ones are
//     Other, and so are their webhooks;
//   - the first maxWebhooks webhooks seen keep their name, later ones are
//     Other;
//   - a tenant other than the default one takes at most perTenant of those
//     webhook slots (0: no cap of its own), so one tenant's renames fill
//     its own share, not every tenant's (issue 35, finding 10). The
//     default tenant is the operator's own: bounded by maxWebhooks only,
//     as an install without tenants always was.
//
// A name keeps its label for the life of the process, so a series never
// changes meaning. It is safe for concurrent use.
type Labels struct {
	maxTenants, maxWebhooks, perTenant int

	mu       sync.Mutex
	tenants  map[string]int             // webhook slots taken, per labelled tenant
	webhooks map[string]map[string]bool // labelled webhooks, per tenant
	hooks    int                        // webhook slots taken in all
}

// NewLabels bounds labels to maxTenants tenants and maxWebhooks webhooks,
// at most perTenant of them of one tenant other than the default (0: no
// cap of its own).
func NewLabels(maxTenants, maxWebhooks, perTenant int) *Labels {
	return &Labels{maxTenants: maxTenants, maxWebhooks: maxWebhooks, perTenant: perTenant,
		tenants: map[string]int{}, webhooks: map[string]map[string]bool{}}
}

// Of is the tenant and webhook label values of tenant's webhook (an empty
// tenant is the default one). Other passes through without taking a slot:
// a count handed off under Other by one process stays Other in another.
func (l *Labels) Of(tenant, webhook string) (string, string) {
	tenant = models.TenantOr(tenant)
	if tenant == Other {
		return Other, Other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	taken, ok := l.tenants[tenant]
	if !ok {
		if len(l.tenants) >= l.maxTenants {
			return Other, Other
		}
		l.tenants[tenant] = 0
		l.webhooks[tenant] = map[string]bool{}
	}
	if webhook == Other || l.webhooks[tenant][webhook] {
		return tenant, webhook
	}
	if l.hooks >= l.maxWebhooks || (l.perTenant > 0 && tenant != models.DefaultTenant && taken >= l.perTenant) {
		return tenant, Other
	}
	l.webhooks[tenant][webhook] = true
	l.tenants[tenant] = taken + 1
	l.hooks++
	return tenant, webhook
}
