package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/wiring/app"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/preflight"
	"github.com/homingdev/homing/models"
)

func newStatsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Deliveries by status and webhook, the Failed backlog and recent success rates",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				st, err := inspect.ComputeStats(cmd.Context(), a.DB, a.Clock.Now())
				if err != nil {
					return err
				}
				// Whether deliveries can be signed is the workers' matter,
				// not this shell's: judged by what they report.
				in := preflightInputs(a, nil)
				in.WorkerSecrets = true
				problems := preflight.Run(cmd.Context(), in)
				if asJSON {
					if problems == nil {
						problems = []preflight.Problem{}
					}
					return writeJSON(e.stdout, struct {
						inspect.Stats
						Problems []preflight.Problem `json:"problems"`
					}{st, problems})
				}
				for _, p := range problems {
					fmt.Fprintf(e.stdout, "WARNING %s\n", p)
				}
				for _, n := range st.NotSent {
					fmt.Fprintf(e.stdout, "STUCK %d deliveries of webhook %s: %s\n", n.Count, n.Webhook, n.Cause)
				}
				if len(problems) > 0 || len(st.NotSent) > 0 {
					fmt.Fprintln(e.stdout)
				}
				fmt.Fprintf(e.stdout, "Delivered %d   Failed %d   Exhausted %d\n", st.ByStatus["Delivered"], st.ByStatus["Failed"], st.ByStatus["Exhausted"])
				fmt.Fprintf(e.stdout, "Failed backlog %d, due now %d, oldest overdue next_retry %s\n", st.FailedBacklog, st.DueNow, timeOrDash(st.OldestOverdue))
				fmt.Fprintf(e.stdout, "Outbox: %d events not yet fanned out, oldest published %s\n\n", st.OutboxPending, timeOrDash(st.OutboxOldest))
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "WEBHOOK\tDELIVERED\tFAILED\tEXHAUSTED\tATTEMPTS 1H\tSUCCESS 1H\tHEALTH")
				for _, w := range st.Webhooks {
					rate := "-"
					if w.SuccessRateLastHour != nil {
						rate = fmt.Sprintf("%.1f%%", *w.SuccessRateLastHour*100)
					}
					health := w.Health
					switch w.Health {
					case models.HealthDegraded:
						health = "degraded since " + timeOrDash(w.FailingSince)
					case models.HealthFailing:
						health = fmt.Sprintf("failing since %s, %d held back", timeOrDash(w.FailingSince), w.HeldBack)
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", w.Webhook, w.Delivered, w.Failed, w.Exhausted, w.AttemptsLastHour, rate, health)
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the statistics as JSON")
	return cmd
}
