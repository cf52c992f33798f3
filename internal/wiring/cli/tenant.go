package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/wiring/app"
)

func newTenantCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Create, list, change and delete tenants (sites or customers served apart)",
		Long: "A tenant's webhooks, events, deliveries and tokens are apart from every other's.\n" +
			"Every install has the tenant default; other commands act in it unless --tenant names another.",
	}
	group(cmd)
	cmd.AddCommand(newTenantCreateCmd(e), newTenantListCmd(e), newTenantShowCmd(e), newTenantUpdateCmd(e),
		newTenantDisableCmd(e), newTenantDeleteCmd(e))
	return cmd
}

// tenants is the tenant service every command (and the API) uses: its
// delete empties Redis of the tenant's queued events too.
func tenants(a *app.App) *tenant.Service {
	s := tenant.New(a.DB, a.Clock, a.Log)
	if in := a.Inspector(); in != nil {
		s.SetEventTasks(event.QueuedTasks{Inspector: in})
	}
	return s
}

// tenantSettings are the flags of create and update that set a tenant's
// settings; only those given change.
type tenantSettings struct {
	origins, queues   []string
	maxWebhooks, rate int
	actionRate        int
	enable, disable   bool
	portalAdvanced    bool
	eventTypes        []string
	// theme: the portal's product name, logo, accent colour and support
	// link (tenant.Theme); "" unsets one.
	productName, logoURL, accentColor, supportURL string
}

func (s *tenantSettings) flags(cmd *cobra.Command, withEnable bool) {
	cmd.Flags().StringSliceVar(&s.origins, "portal-origin", nil, "`ORIGIN` the tenant's portal may be embedded in (repeatable)")
	cmd.Flags().IntVar(&s.maxWebhooks, "max-webhooks", 0, "at most `N` webhooks (0: no limit)")
	cmd.Flags().IntVar(&s.rate, "publish-rate", 0, "at most `N` events a second (0: no limit)")
	cmd.Flags().StringSliceVar(&s.queues, "queues", nil, "the `QUEUES` (comma-separated) besides default its webhooks may use; the tenant's own admins and portal users choose from these only (--queues '' leaves default only)")
	cmd.Flags().IntVar(&s.actionRate, "action-rate", 0, "at most `N` resends, retries, recovers and test sends a second through serve (0: no limit)")
	cmd.Flags().BoolVar(&s.portalAdvanced, "portal-advanced", false, "show the operator's webhook settings (queue, compatibility, condition language, URL template, redirects, signature scheme) in the tenant's portal (--portal-advanced=false hides them again; hidden, the portal keeps their values)")
	cmd.Flags().StringArrayVar(&s.eventTypes, "event-type", nil, "a `Doctype:event` pair the tenant publishes, offered in its portal's event list besides those its deliveries record (repeatable; replaces the list; --event-type '' empties it)")
	cmd.Flags().StringVar(&s.productName, "product-name", "", "the `NAME` the tenant's portal shows instead of Homing (at most 60 characters; '' unsets it)")
	cmd.Flags().StringVar(&s.logoURL, "logo-url", "", "an https `URL` of the logo the portal's header shows (http only on loopback; '' unsets it)")
	cmd.Flags().StringVar(&s.accentColor, "accent-color", "", "the portal header's `COLOUR`, #rrggbb ('' unsets it)")
	cmd.Flags().StringVar(&s.supportURL, "support-url", "", "an https `URL` the portal links to as Support (http only on loopback; '' unsets it)")
	if withEnable {
		cmd.Flags().BoolVar(&s.enable, "enable", false, "accept the tenant's events again, and send what it kept while disabled")
		cmd.Flags().BoolVar(&s.disable, "disable", false, "refuse the tenant's events and send nothing of it; what it accepted is kept, held")
	}
}

func (s *tenantSettings) patch(cmd *cobra.Command) (tenant.Patch, error) {
	var p tenant.Patch
	if s.enable && s.disable {
		return p, usagef("--enable and --disable cannot both be given")
	}
	if s.enable || s.disable {
		on := s.enable
		p.Enabled = &on
	}
	if cmd.Flags().Changed("portal-origin") {
		p.PortalOrigins = &s.origins
	}
	if cmd.Flags().Changed("max-webhooks") {
		p.MaxWebhooks = &s.maxWebhooks
	}
	if cmd.Flags().Changed("publish-rate") {
		p.PublishRate = &s.rate
	}
	if cmd.Flags().Changed("queues") {
		q := s.queues
		if q == nil {
			q = []string{}
		}
		p.Queues = &q

	}
	if cmd.Flags().Changed("action-rate") {
		p.ActionRate = &s.actionRate
	}
	if cmd.Flags().Changed("portal-advanced") {
		p.PortalAdvanced = &s.portalAdvanced
	}
	if cmd.Flags().Changed("event-type") {
		types := append([]string{}, s.eventTypes...)
		p.EventTypes = &types
	}
	for _, f := range []struct {
		flag  string
		value *string
		set   **string
	}{{"product-name", &s.productName, &p.ProductName}, {"logo-url", &s.logoURL, &p.LogoURL},
		{"accent-color", &s.accentColor, &p.AccentColor}, {"support-url", &s.supportURL, &p.SupportURL}} {
		if cmd.Flags().Changed(f.flag) {
			*f.set = f.value
		}
	}
	return p, nil
}

func printTenant(e *env, t tenant.Tenant, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, t)
	}
	p := &printer{w: e.stdout}
	p.printf("name:           %s\nenabled:        %v\nportal_origins: %s\nmax_webhooks:   %d\npublish_rate:   %d\naction_rate:    %d\nqueues:         %s\n",
		t.Name, t.Enabled, strings.Join(t.PortalOrigins, ", "), t.MaxWebhooks, t.PublishRate, t.ActionRate, strings.Join(append([]string{"default"}, t.Queues...), ", "))
	p.printf("portal_advanced: %v\nevent_types:    %s\n", t.PortalAdvanced, strings.Join(t.EventTypes, ", "))
	p.printf("product_name:   %s\nlogo_url:       %s\naccent_color:   %s\nsupport_url:    %s\n", t.ProductName, t.LogoURL, t.AccentColor, t.SupportURL)
	p.printf("created_at:     %s\nupdated_at:     %s\n", t.CreatedAt.UTC().Format(time.RFC3339), t.UpdatedAt.UTC().Format(time.RFC3339))
	return p.err
}

func newTenantCreateCmd(e *env) *cobra.Command {
	var (
		s      tenantSettings
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant",
		Args:  argNames("tenant NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			p, err := s.patch(cmd)
			if err != nil {
				return err
			}
			return e.withApp(cmd.Context(), func(a *app.App) error {
				t, err := tenants(a).Create(cmd.Context(), pos[0], p)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, t)
				}
				_, err = fmt.Fprintf(e.stdout, "tenant %q created; make its tokens with homing token create --tenant %s\n", t.Name, t.Name)
				return err
			})
		}),
	}
	s.flags(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")
	return cmd
}

func newTenantListCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tenants",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				list, err := tenants(a).List(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, list)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tENABLED\tMAX WEBHOOKS\tPUBLISH RATE\tCREATED")
				for _, t := range list {
					fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\n", t.Name, t.Enabled, t.MaxWebhooks, t.PublishRate, t.CreatedAt.UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenants as a JSON array")
	return cmd
}

func newTenantShowCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a tenant",
		Args:  argNames("tenant NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				t, err := tenants(a).Get(cmd.Context(), pos[0])
				if err != nil {
					return err
				}
				return printTenant(e, t, asJSON)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")
	return cmd
}

func newTenantUpdateCmd(e *env) *cobra.Command {
	var (
		s      tenantSettings
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "update NAME",
		Short: "Change a tenant's settings, or enable or disable it",
		Args:  argNames("tenant NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			p, err := s.patch(cmd)
			if err != nil {
				return err
			}
			return e.withApp(cmd.Context(), func(a *app.App) error {
				t, err := tenants(a).Update(cmd.Context(), pos[0], p)
				if err != nil {
					return err
				}
				return printTenant(e, t, asJSON)
			})
		}),
	}
	s.flags(cmd, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")
	return cmd
}

func newTenantDisableCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "disable NAME",
		Short: "Disable a tenant: its events are refused and nothing of it is sent; what it accepted is kept until it is enabled again",
		Args:  argNames("tenant NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				off := false
				t, err := tenants(a).Update(cmd.Context(), pos[0], tenant.Patch{Enabled: &off})
				if err != nil {
					return err
				}
				return printTenant(e, t, asJSON)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tenant as JSON")
	return cmd
}

func newTenantDeleteCmd(e *env) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NAME [--force]",
		Short: "Delete a tenant and everything of it; refused while it has webhooks or deliveries unless --force",
		Args:  argNames("tenant NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				if err := tenants(a).Delete(cmd.Context(), pos[0], force, webhookService(a)); err != nil {
					return err
				}
				_, err := fmt.Fprintf(e.stdout, "tenant %q deleted\n", pos[0])
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the tenant's webhooks (as homing webhook delete does) and deliveries with it")
	return cmd
}
