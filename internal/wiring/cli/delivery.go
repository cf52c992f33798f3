package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/wiring/app"

	"github.com/homingdev/homing/internal/ops/inspect"
)

func newDeliveryCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delivery",
		Short: "Inspect deliveries: what was sent, and what happened on each attempt",
	}
	group(cmd)
	cmd.AddCommand(newDeliveryListCmd(e), newDeliveryShowCmd(e), newDeliveryRetryCmd(e), newDeliveryRecoverCmd(e), newDeliveryResendCmd(e))
	return cmd
}

func newDeliveryListCmd(e *env) *cobra.Command {
	var (
		f            inspect.Filter
		asJSON       bool
		since, until string
		sinceT       instant
		untilT       instant
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List deliveries, newest first",
		Args:  argNames(),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if sinceT, err = parseInstant("--since", since); err != nil {
				return err
			}
			if untilT, err = parseInstant("--until", until); err != nil {
				return err
			}
			if f.DocName != "" && f.DocType == "" {
				return usagef("--doc-name %q needs --doc-type too: a document name is unique only within its doctype", f.DocName)
			}
			if cmd.Flags().Changed("status") {
				s, ok := canonicalStatus(f.Status)
				if !ok {
					return usagef("--status %q is not one of %s", f.Status, strings.Join(inspect.Statuses, ", "))
				}
				f.Status = s
			}
			if f.Limit < 1 {
				return usagef("--limit %d must be at least 1", f.Limit)
			}
			return nil
		},
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				now := a.Clock.Now()
				f.Since, f.Until = sinceT.at(now), untilT.at(now)
				if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
					return usagef("--until %s is not after --since %s", f.Until.Format(time.RFC3339), f.Since.Format(time.RFC3339))
				}
				ds, err := inspect.List(cmd.Context(), a.DB, e.tenant, f)
				if err != nil {
					return err
				}
				if len(ds) == 0 && f.Webhook != "" {
					known, err := inspect.WebhookKnown(cmd.Context(), a.DB, e.tenant, f.Webhook)
					if err != nil {
						return err
					}
					if !known {
						return fmt.Errorf("no webhook named %q exists and none ever delivered (homing webhook list shows them)", f.Webhook)
					}
				}
				if ds == nil {
					ds = []inspect.Delivery{}
				}
				if asJSON {
					return writeJSON(e.stdout, ds)
				}
				return printDeliveryTable(e.stdout, ds)
			})
		}),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Status, "status", "", "only deliveries in `STATUS`: "+strings.Join(inspect.Statuses, ", "))
	fs.StringVar(&f.Webhook, "webhook", "", "only deliveries of webhook `NAME`")
	fs.StringVar(&f.EventID, "event-id", "", "only deliveries of event `ID`")
	fs.StringVar(&f.DocType, "doc-type", "", "only deliveries of documents of `DOCTYPE`")
	fs.StringVar(&f.DocName, "doc-name", "", "only deliveries of document `NAME` (with --doc-type)")
	fs.StringVar(&since, "since", "", "only deliveries created at or after `WHEN`: an RFC 3339 time, or a duration ago such as 24h")
	fs.StringVar(&until, "until", "", "only deliveries created before `WHEN`: an RFC 3339 time, or a duration ago such as 1h")
	fs.IntVar(&f.Limit, "limit", 50, "at most `N` deliveries")
	fs.BoolVar(&asJSON, "json", false, "print the deliveries as a JSON array")
	return cmd
}

// instant is a time given on the command line: absolute, or a duration
// before the moment the command runs. The zero instant is no time.
type instant struct {
	abs time.Time
	ago time.Duration
	set bool
}

// parseInstant reads flag's value: an RFC 3339 time or a Go duration that
// means "this long ago".
func parseInstant(flag, v string) (instant, error) {
	if v == "" {
		return instant{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return instant{abs: t.UTC(), set: true}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return instant{}, usagef("%s %q is neither an RFC 3339 time (2026-12-03T15:04:05Z) nor a duration ago (24h, 90m)", flag, v)
	}
	return instant{ago: d, set: true}, nil
}

// at is the instant's time when the command runs at now.
func (i instant) at(now time.Time) time.Time {
	switch {
	case !i.set:
		return time.Time{}
	case i.abs.IsZero():
		return now.Add(-i.ago).UTC()
	}
	return i.abs
}

// canonicalStatus accepts a status in any letter case.
func canonicalStatus(s string) (string, bool) {
	for _, st := range inspect.Statuses {
		if strings.EqualFold(s, st) {
			return st, true
		}
	}
	return "", false
}

func newDeliveryShowCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a delivery: its frozen request and the history of its attempts",
		Args:  argNames("delivery ID"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				d, err := inspect.Show(cmd.Context(), a.DB, e.tenant, pos[0])
				if err != nil {
					return err
				}
				if d.History == nil {
					d.History = []inspect.Attempt{}
				}
				if asJSON {
					return writeJSON(e.stdout, d)
				}
				return printDelivery(e.stdout, d, a.Clock.Now())
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the delivery as JSON")
	return cmd
}

func printDeliveryTable(w io.Writer, ds []inspect.Delivery) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tATTEMPTS\tWEBHOOK\tDOCUMENT\tEVENT\tNEXT RETRY\tLAST")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			d.ID, d.Status, d.AttemptsText(), d.Webhook, document(d), d.DocEvent,
			timeOrDash(d.NextRetry), last(d))
	}
	return tw.Flush()
}

// responseShown is how much of the last response body the text form of
// delivery show prints (--json has all that was kept).
const responseShown = 300

// printDelivery prints d as text; times are UTC with their distance from now
// beside them.
func printDelivery(w io.Writer, d inspect.Detail, now time.Time) error {
	p := &printer{w: w}
	tw := tabwriter.NewWriter(p, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	when := func(t time.Time) string { return t.Format(time.RFC3339) + " (" + relative(t, now) + ")" }
	row("id", d.ID)
	row("webhook", d.Webhook)
	row("event", fmt.Sprintf("%s of %s (event id %s)", d.DocEvent, document(d.Delivery), d.EventID))
	status := d.Status
	if d.NextRetry != nil {
		status += " (next retry " + when(*d.NextRetry) + ")"
	}
	row("status", status)
	row("attempts", d.AttemptsText())
	switch {
	case d.WaitsFor != "":
		row("held", "behind delivery "+d.WaitsFor+", the one before it of this document (the webhook is ordered by document)")
	case d.WaitsForEvent != "":
		row("held", "behind event "+d.WaitsForEvent+" of this document, accepted before it and not fanned out yet")
	}
	row("request", d.Method+" "+d.URL)
	for _, k := range sortedKeys(d.Headers) {
		row("header", k+": "+d.Headers[k])
	}
	for _, k := range sortedKeys(d.SentSignature) {
		row("signed with", k+": "+d.SentSignature[k])
	}
	row("payload", oneLine(d.Payload))
	if d.LastStatusCode != nil {
		row("last status", fmt.Sprint(*d.LastStatusCode))
	}
	if d.LastError != "" {
		row("last error", oneLine(d.LastError))
	}
	if d.LastResponse != "" {
		row("last response", truncate(oneLine(d.LastResponse), responseShown))
	}
	row("created", when(d.CreatedAt))
	row("updated", when(d.UpdatedAt))
	_ = tw.Flush()

	p.printf("\n")
	tw = tabwriter.NewWriter(p, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tAT\tSTATUS\tDURATION\tURL\tERROR")
	for _, h := range d.History {
		code := "-"
		if h.StatusCode != nil {
			code = fmt.Sprint(*h.StatusCode)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%dms\t%s %s\t%s\n", h.Attempt, when(h.At), code, h.DurationMS, h.Method, h.URL, oneLine(h.Error))
	}
	if len(d.History) == 0 {
		fmt.Fprintln(tw, "(no attempt yet)")
	}
	_ = tw.Flush()
	return p.err
}

// truncate cuts s to at most n bytes, on a rune boundary, and says how much
// was left out.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes; --json has it all)", s[:cut], len(s)-cut)
}

// relative says how far t is from now the way an operator reads it: "in
// 4m", "3m ago", "2h5m ago", "3d4h ago"; "now" within a second.
func relative(t, now time.Time) string {
	d := t.Sub(now)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	ahead := d > 0
	if !ahead {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		s = fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		s = fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
	if ahead {
		return "in " + s
	}
	return s + " ago"
}

func document(d inspect.Delivery) string {
	if d.DocName == "" {
		return d.DocType
	}
	return d.DocType + " " + d.DocName
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func last(d inspect.Delivery) string {
	var parts []string
	if d.LastStatusCode != nil {
		parts = append(parts, fmt.Sprint(*d.LastStatusCode))
	}
	if d.LastError != "" {
		parts = append(parts, oneLine(d.LastError))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
