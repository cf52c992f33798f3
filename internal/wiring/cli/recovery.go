package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/wiring/app"

	"github.com/homingdev/homing/internal/lib/logging"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/recovery"
	"github.com/homingdev/homing/models"
)

func newDeliveryRetryCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID",
		Short: "Make an Exhausted (or Failed) delivery due now with its attempt budget renewed",
		Args:  argNames("delivery ID"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				if err := recovery.New(a.DB, a.Clock, a.Config.Delivery.MaxPayloadBytes).Retry(cmd.Context(), e.tenant, pos[0]); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "delivery %s is due now; the next sweep sends it\n", pos[0])
				return nil
			})
		}),
	}
}

func newDeliveryResendCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resend ID",
		Short: "Send a delivery's frozen payload again as a new delivery linked to it",
		Args:  argNames("delivery ID"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				id, err := recovery.New(a.DB, a.Clock, a.Config.Delivery.MaxPayloadBytes).Resend(cmd.Context(), e.tenant, pos[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, map[string]string{"id": id, "resent_from": pos[0]})
				}
				fmt.Fprintf(e.stdout, "%s\n", id)
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"id": …, "resent_from": …}`)
	return cmd
}

func newDeliveryRecoverCmd(e *env) *cobra.Command {
	var (
		f      recovery.Filter
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "recover --webhook NAME --since 24h [--status Failed|Exhausted] [--dry-run]",
		Short: "Requeue every matching delivery, in batches, through the sweeper",
		Args:  argNames(),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if f.Webhook == "" {
				return usagef("--webhook is required")
			}
			if f.Since <= 0 {
				return usagef("--since must be a positive duration such as 24h")
			}
			if f.Status == "" {
				return nil
			}
			s, ok := canonicalStatus(f.Status)
			if !ok || s == models.StatusDelivered {
				return usagef("--status %q must be Exhausted or Failed", f.Status)
			}
			f.Status = s
			return nil
		},
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				known, err := inspect.WebhookKnown(cmd.Context(), a.DB, e.tenant, f.Webhook)
				if err != nil {
					return err
				}
				if !known {
					return fmt.Errorf("no webhook named %q exists and none ever delivered: nothing to recover (homing webhook list shows them)", f.Webhook)
				}
				// On a terminal a bar and count redrawn in place; otherwise
				// (a pipe, a log) only the summary line below.
				var progress func(done, total int64)
				if logging.IsTerminal(e.stderr) {
					progress = progressBar(e.stderr)
				}
				n, err := recovery.New(a.DB, a.Clock, a.Config.Delivery.MaxPayloadBytes).Recover(cmd.Context(), e.tenant, f, dryRun, progress)
				if progress != nil {
					fmt.Fprintln(e.stderr)
				}
				if err != nil {
					return err
				}
				// The summary names what was matched, so "0" reads as "none
				// of these", not as "did nothing".
				scope := fmt.Sprintf("of webhook %q (%s, created in the last %s)", f.Webhook, strings.Join(f.Statuses(), " or "), f.Since)
				if dryRun {
					fmt.Fprintf(e.stdout, "would requeue %s deliveries %s\n", thousands(n), scope)
					return nil
				}
				fmt.Fprintf(e.stdout, "requeued %s deliveries %s\n", thousands(n), scope)
				return nil
			})
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Webhook, "webhook", "", "webhook `NAME` whose deliveries to recover (required)")
	fs.DurationVar(&f.Since, "since", 24*time.Hour, "only deliveries created within this `DURATION`")
	fs.StringVar(&f.Status, "status", "", "only deliveries with this `STATUS`, Failed or Exhausted (default both: during an outage the deliveries waiting for a retry are Failed)")
	fs.BoolVar(&dryRun, "dry-run", false, "count what would be requeued, change nothing")
	return cmd
}

// progressBar draws done of total on one line of w, redrawn in place (\r)
// at each call: "[#########.....] 1,500/4,000".
func progressBar(w io.Writer) func(done, total int64) {
	return func(done, total int64) {
		const width = 30
		filled := int(min(done, total) * width / max(total, 1))
		fmt.Fprintf(w, "\r[%s%s] %s/%s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), thousands(done), thousands(total))
	}
}

// thousands formats n with comma separators: 12034 → "12,034".
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
