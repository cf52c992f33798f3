package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/homingdev/homing/internal/engine/signing"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/models"
)

// generateSecret is what a bare --secret stands for. It can never be a
// secret itself: ParseSecret refuses anything shorter than 16 bytes.
const generateSecret = "generate"

func newWebhookCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Create, change and inspect webhooks",
	}
	group(cmd)
	cmd.AddCommand(
		newWebhookCreateCmd(e),
		newWebhookUpdateCmd(e),
		newWebhookEnableCmd(e, true),
		newWebhookEnableCmd(e, false),
		newWebhookDeleteCmd(e),
		newWebhookListCmd(e),
		newWebhookShowCmd(e),
		newWebhookRotateCmd(e),
		newWebhookPreviewCmd(e),
		newWebhookTestCmd(e),
		newWebhookImportCmd(e),
	)
	return cmd
}

// webhookFlags are the flags create and update share.
type webhookFlags struct {
	name, doctype, event, url    string
	method, structure, template  string
	condition, secret, signature string
	queue                        string
	// secretFile is --secret-file: the secret read from a file, so that it
	// reaches neither the shell history nor ps.
	secretFile            string
	fields, headers       []string
	secretHeaders         []string
	sampleDoc             string
	maxRetries, rateLimit int
	followRedirects       int
	urlTemplate           string
	compat                string
	conditionLanguage     string
	ordering              string
	description           string
	timeout               time.Duration
	disabled, json        bool
}

func (f *webhookFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "webhook `NAME` (unique)")
	fs.StringVar(&f.doctype, "doctype", "", "document type to listen to, e.g. \"Sales Order\"")
	fs.StringVar(&f.event, "event", "", "document event: "+strings.Join(models.DocEvents, ", ")+
		"; for --doctype \""+models.OpsDocType+"\" (Homing's operational events): "+strings.Join(models.OpsEvents, ", "))
	fs.StringVar(&f.url, "url", "", "http(s) `URL` to deliver to")
	fs.StringVar(&f.method, "method", "", "HTTP method: "+strings.Join(webhook.Methods, ", ")+" (default POST)")
	fs.StringVar(&f.structure, "structure", "", "request body structure: json or form (default json)")
	fs.StringVar(&f.template, "template", "", "Jinja body `TEMPLATE`, or @FILE to read it from a file")
	fs.StringArrayVar(&f.fields, "field", nil, "document field to send, as `fieldname=key` (repeatable, in order)")
	fs.StringArrayVar(&f.headers, "header", nil, "custom request header, as `'K: V'` (repeatable; replaces the headers; Authorization, Proxy-Authorization, Cookie and X-Api-Key are kept sealed)")
	fs.StringArrayVar(&f.secretHeaders, "secret-header", nil, "request header kept sealed and shown as ****, as `'K: V'` (repeatable)")
	fs.StringVar(&f.sampleDoc, "sample-doc", "", "`JSON` document (or @FILE) to render the template and evaluate the condition against before saving")
	fs.StringVar(&f.condition, "condition", "", "`EXPR` on doc that must hold, e.g. 'doc.status == \"Paid\"'")
	fs.StringVar(&f.secret, "secret", "", "signing `SECRET`; given without a value, a new one is generated and printed once")
	fs.Lookup("secret").NoOptDefVal = generateSecret
	fs.StringVar(&f.secretFile, "secret-file", "", "read the signing secret from `PATH` (--secret - reads it from stdin); a trailing newline is dropped")
	fs.StringVar(&f.signature, "signature", "", "signature headers: both, standard, frappe or none (default both)")
	fs.IntVar(&f.maxRetries, "max-retries", 0, "retries after the first attempt (default retry.default_max_retries)")
	fs.DurationVar(&f.timeout, "timeout", 0, "timeout of one attempt, e.g. 5s (default delivery.timeout)")
	fs.StringVar(&f.queue, "queue", "", "asynq queue the deliveries run on (default \"default\")")
	fs.StringVar(&f.urlTemplate, "url-template", "", "a Jinja URL rendered with the document per event, e.g. 'https://x/api/{{ doc.name }}' (Frappe's dynamic URL); the host is checked by the SSRF guard when sent")
	fs.StringVar(&f.compat, "compat", "", `"frappe" sends what Frappe sends: json.dumps of the fields or the rendered template ({} when neither), the Content-Type only from --header, templates read as Frappe's Jinja; "" (the default) is Homing's own`)
	fs.StringVar(&f.conditionLanguage, "condition-language", "expr", `how --condition is read: "expr" (the default) or "python" (Frappe's conditions: True/False/None, and/or/not, in, x if c else y, doc.get(k, d), startswith/endswith/lower/upper/strip, len/int/float/str, nowdate/now/getdate/add_days/date_diff, with Python's semantics; anything else is refused)`)
	fs.StringVar(&f.ordering, "ordering", "none", `"document" sends each document's deliveries in the order their events were accepted, each once the one before it is Delivered or Exhausted (a failing delivery holds its own document's later ones only; needs PostgreSQL); "none" (the default) sends them as they come`)
	fs.StringVar(&f.description, "description", "", "the webhook in its owner's words (at most 500 characters), shown in the console and the portal")
	fs.IntVar(&f.followRedirects, "follow-redirects", 0, "how many redirects an attempt follows, every hop checked by the SSRF guard (303 turns into GET); 0, the default, makes a 3xx a failure")
	fs.IntVar(&f.rateLimit, "rate-limit", 0, "most requests a second to this webhook, across every worker; 0 is unlimited (the default)")
	fs.BoolVar(&f.disabled, "disabled", false, "keep the webhook disabled")
	fs.BoolVar(&f.json, "json", false, "print the webhook as JSON")
}

// input turns the flags actually given into a webhook.Input; the secret is
// handled by the caller. Reading --template @FILE can fail.
func (f *webhookFlags) input(fs *pflag.FlagSet) (webhook.Input, error) {
	var in webhook.Input
	str := func(flag string, v *string) *string {
		if fs.Changed(flag) {
			return v
		}
		return nil
	}
	in.Name = str("name", &f.name)
	in.DocType = str("doctype", &f.doctype)
	in.Event = str("event", &f.event)
	in.URL = str("url", &f.url)
	in.URLTemplate = str("url-template", &f.urlTemplate)
	in.Compat = str("compat", &f.compat)
	in.ConditionLanguage = str("condition-language", &f.conditionLanguage)
	in.Description = str("description", &f.description)
	in.Ordering = str("ordering", &f.ordering)
	in.Method = str("method", &f.method)
	in.Structure = str("structure", &f.structure)
	in.Condition = str("condition", &f.condition)
	in.Signature = str("signature", &f.signature)
	in.Queue = str("queue", &f.queue)
	if fs.Changed("template") {
		t, err := readTemplate(f.template)
		if err != nil {
			return in, err
		}
		in.Template = &t
	}
	if fs.Changed("field") {
		in.Fields = listFlag(f.fields)
	}
	if fs.Changed("header") {
		in.Headers = listFlag(f.headers)
	}
	if fs.Changed("secret-header") {
		in.SecretHeaders = &f.secretHeaders
	}
	if fs.Changed("sample-doc") {
		doc, err := readDocArg("--sample-doc", f.sampleDoc)
		if err != nil {
			return in, err
		}
		in.SampleDoc = doc
	}
	if fs.Changed("max-retries") {
		in.MaxRetries = &f.maxRetries
	}
	if fs.Changed("timeout") {
		in.Timeout = &f.timeout
	}
	if fs.Changed("rate-limit") {
		in.RateLimit = &f.rateLimit
	}
	if fs.Changed("follow-redirects") {
		in.FollowRedirects = &f.followRedirects
	}
	if fs.Changed("disabled") {
		enabled := !f.disabled
		in.Enabled = &enabled
	}
	return in, nil
}

// listFlag is the value of a repeatable flag: the values given, which
// replace the whole list; a single empty value (--field "") empties it.
func listFlag(values []string) *[]string {
	if len(values) == 1 && values[0] == "" {
		return &[]string{}
	}
	return &values
}

// readTemplate returns the template text, reading @FILE exactly as stored.
// docFlag is the document --doc gives (inline or @FILE), or an empty one
// when it is not set: preview's and test's sample.
func docFlag(cmd *cobra.Command, v string) (map[string]any, error) {
	if !cmd.Flags().Changed("doc") {
		return map[string]any{}, nil
	}
	return readDocArg("--doc", v)
}

// readDocArg reads a JSON object given inline or as @FILE, as the worker
// reads a published document (event.DecodeDoc): 3 stays an int and 1500.0
// a float, so that a preview or a sample renders what a delivery would.
func readDocArg(flag, v string) (map[string]any, error) {
	raw := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s @%s: %w", flag, path, err)
		}
		raw = b
	}
	doc, err := event.DecodeDoc(raw)
	if err != nil {
		return nil, usagef("%s: not a JSON object (give {\"name\": \"SO-1\"} or @file.json): %v", flag, err)
	}
	return doc, nil
}

func readTemplate(v string) (string, error) {
	path, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--template @%s: %w", path, err)
	}
	return string(b), nil
}

// takeBareSecret finds the value of a bare "--secret VALUE". pflag reads
// "--secret" alone as the generate sentinel (its NoOptDefVal) and leaves
// VALUE among the positional arguments; when there is one argument more than
// the command takes (maxArgs) and it is the one that followed --secret in the
// command line, it is the secret. It returns the secret to use ("" with
// generate false means none was given), whether to generate one, and the
// positional arguments left.
func takeBareSecret(e *env, fs *pflag.FlagSet, value string, pos []string, maxArgs int) (secret string, given, generate bool, rest []string) {
	if !fs.Changed("secret") {
		return "", false, false, pos
	}
	if value != generateSecret {
		return value, true, false, pos
	}
	if len(pos) == maxArgs+1 {
		if next, ok := afterBareSecret(e.args); ok {
			if i := slices.Index(pos, next); i >= 0 {
				return next, true, false, slices.Delete(slices.Clone(pos), i, i+1)
			}
		}
	}
	return "", true, true, pos
}

// afterBareSecret returns the argument after the last bare --secret.
func afterBareSecret(raw []string) (string, bool) {
	if i := slices.Index(raw, "--"); i >= 0 {
		raw = raw[:i]
	}
	for i := len(raw) - 2; i >= 0; i-- {
		if raw[i] == "--secret" {
			return raw[i+1], true
		}
	}
	return "", false
}

// newSecret generates a webhook secret.
func newSecret() (string, error) {
	s, err := signing.GenerateSecret()
	if err != nil {
		return "", err
	}
	return string(s), nil
}

// webhooks opens the database and the webhook service on it; the caller
// closes the App.
func (e *env) webhooks(ctx context.Context) (*webhook.Service, *app.App, error) {
	cfg, err := e.config()
	if err != nil {
		return nil, nil, err
	}
	a, err := e.openApp(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return webhookService(a), a, nil
}

// webhookService is the webhook service every command (and the API) uses:
// defaults from retry.default_max_retries and delivery.timeout, and the
// SSRF guard unless private networks are allowed, and the process's sender
// for test sends. The deliveries it
// exhausts are told to the dispatcher, which counts them in the process's
// metrics when it has them (a worker's, as in homing dev), and otherwise
// hands them off through Redis to the next scrape of any worker's
// (package handoff).
func webhookService(a *app.App) *webhook.Service {
	svc := webhook.New(a.DB, a.Box, a.Clock, webhook.Defaults{
		MaxRetries: a.Config.Retry.DefaultMaxRetries,
		Timeout:    a.Config.Delivery.Timeout,
		Guard:      app.Guard(a.Config.Delivery),
		// Templates are tried at creation under the workers' limits.
		MaxPayloadBytes:    a.Config.Delivery.MaxPayloadBytes,
		RenderTimeLimit:    a.Config.Delivery.TemplateTimeLimit,
		ConditionTimeLimit: a.Config.Delivery.ConditionTimeLimit,
		UserAgent:          app.UserAgent(),
	}, a.Log)
	svc.SetObserver(a.Dispatcher)
	// Test sends go through the workers' sender, budgeted in Redis.
	if a.Limiter != nil {
		svc.SetSender(a.Sender, a.Limiter)
	} else {
		svc.SetSender(a.Sender, nil)
	}
	return svc
}

// webhookError puts the webhook's name in front of a validation error, as in
// `webhook "orders": url: "ftp://x" is not http(s)`.
func webhookError(name string, err error) error {
	if errors.Is(err, webhook.ErrInvalid) {
		detail := strings.TrimPrefix(err.Error(), webhook.ErrInvalid.Error()+": ")
		if name == "" {
			return &messageError{msg: "webhook: " + detail, err: err}
		}
		return &messageError{msg: fmt.Sprintf("webhook %q: %s", name, detail), err: err}
	}
	return err
}

// shownView is a webhook as printed by create, update and rotate-secret.
type shownView = webhook.ShownView

func newWebhookCreateCmd(e *env) *cobra.Command {
	var f webhookFlags
	cmd := &cobra.Command{
		Use:   "create --name N --doctype D --event E (--url U | --url-template T) [flags]",
		Short: "Create a webhook",
		// A bare "--secret VALUE" leaves VALUE here; see takeBareSecret.
		Args:    cobra.ArbitraryArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return requireCreateFlags(cmd.Flags()) },
	}
	f.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		secret, given, generate, rest := takeBareSecret(e, cmd.Flags(), f.secret, pos, 0)
		if err := argNames()(cmd, rest); err != nil {
			return err
		}
		return failure(e.createWebhook(cmd, &f, secret, given, generate))
	}
	return cmd
}

// requireCreateFlags is cobra's required-flags check with one flag pair in
// it: a webhook needs --url or, for a URL made from each document,
// --url-template, as the API needs url or url_template.
func requireCreateFlags(fs *pflag.FlagSet) error {
	var missing []string
	for _, name := range []string{"name", "doctype", "event"} {
		if !fs.Changed(name) {
			missing = append(missing, strconv.Quote(name))
		}
	}
	if !fs.Changed("url") && !fs.Changed("url-template") {
		missing = append(missing, `"url" (or "url-template")`)
	}
	if len(missing) > 0 {
		return usagef("required flag(s) %s not set", strings.Join(missing, ", "))
	}
	return nil
}

func (e *env) createWebhook(cmd *cobra.Command, f *webhookFlags, secret string, given, generate bool) error {
	return e.saveWebhook(cmd, f, f.name, secret, given, generate, "created", func(svc *webhook.Service, in webhook.Input) (models.Webhook, error) {
		return svc.Create(cmd.Context(), e.tenant, in)
	})
}

// saveWebhook is create and update's common path: read the flags, make the
// secret asked for, save through the webhook service with save, and print the
// result (with a generated secret, this once). name is what an error names.
func (e *env) saveWebhook(cmd *cobra.Command, f *webhookFlags, name, secret string, given, generate bool, verb string,
	save func(*webhook.Service, webhook.Input) (models.Webhook, error)) error {
	in, err := f.input(cmd.Flags())
	if err != nil {
		return err
	}
	if secret, given, err = e.secretFromFile(f, secret, given); err != nil {
		return err
	}
	if generate {
		if secret, err = newSecret(); err != nil {
			return err
		}
	}
	if given {
		in.Secret = &secret
	}
	svc, a, err := e.webhooks(cmd.Context())
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	w, err := save(svc, in)
	if err != nil {
		return webhookError(name, err)
	}
	shown := shownView{View: webhook.ViewOf(w)}
	if generate {
		shown.Secret = secret
	}
	if in.Queue != nil {
		e.warnUnservedQueue(a, w)
	}
	return printWebhook(e.stdout, shown, f.json, verb)
}

func newWebhookUpdateCmd(e *env) *cobra.Command {
	var f webhookFlags
	cmd := &cobra.Command{
		Use:   "update NAME [flags]",
		Short: "Change the given fields of a webhook",
		Long:  "update changes only the fields whose flags are given; --name renames the webhook.\n--secret '' removes the secret. --field and --header replace the whole list;\n--field '' and --header '' empty it.",
		Args:  cobra.ArbitraryArgs,
	}
	f.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		secret, given, generate, rest := takeBareSecret(e, cmd.Flags(), f.secret, pos, 1)
		if err := argNames("webhook NAME")(cmd, rest); err != nil {
			return err
		}
		if !changesSomething(cmd.Flags()) {
			return usagef("nothing to update: give the flags of the fields to change, e.g. webhook update %s --url URL", rest[0])
		}
		return failure(e.updateWebhook(cmd, rest[0], &f, secret, given, generate))
	}
	return cmd
}

// changesSomething reports whether an update's flags name a field to
// change: --json and --sample-doc alone change nothing, and an update that
// changes nothing would print "updated" for doing nothing.
func changesSomething(fs *pflag.FlagSet) bool {
	changes := false
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "json", "sample-doc", "config":
		default:
			changes = true
		}
	})
	return changes
}

func (e *env) updateWebhook(cmd *cobra.Command, name string, f *webhookFlags, secret string, given, generate bool) error {
	return e.saveWebhook(cmd, f, name, secret, given, generate, "updated", func(svc *webhook.Service, in webhook.Input) (models.Webhook, error) {
		return svc.Update(cmd.Context(), e.tenant, name, in)
	})
}

func newWebhookEnableCmd(e *env, enabled bool) *cobra.Command {
	verb, short := "enable", "Enable a webhook"
	if !enabled {
		verb, short = "disable", "Disable a webhook; its pending retries become Exhausted at once"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  argNames("webhook NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			if _, err := svc.SetEnabled(cmd.Context(), e.tenant, pos[0], enabled, ""); err != nil {
				return webhookError(pos[0], err)
			}
			_, err = fmt.Fprintf(e.stdout, "webhook %q %sd\n", pos[0], verb)
			return err
		}),
	}
}

func newWebhookDeleteCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a webhook; its deliveries stay for inspection",
		Args:  argNames("webhook NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			if err := svc.Delete(cmd.Context(), e.tenant, pos[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "webhook %q deleted\n", pos[0])
			return err
		}),
	}
}

func newWebhookListCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List webhooks",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			ws, err := svc.List(cmd.Context(), e.tenant)
			if err != nil {
				return err
			}
			views := make([]webhook.View, len(ws))
			for i, w := range ws {
				views[i] = webhook.ViewOf(w)
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			return printWebhookTable(e.stdout, views)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the webhooks as a JSON array")
	return cmd
}

func newWebhookShowCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a webhook (never its secret)",
		Args:  argNames("webhook NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			w, err := svc.Get(cmd.Context(), e.tenant, pos[0])
			if err != nil {
				return err
			}
			v := webhook.ViewOf(w)
			h, err := svc.Health(cmd.Context(), w)
			if err != nil {
				return err
			}
			v.Health = &h
			return printWebhook(e.stdout, shownView{View: v}, asJSON, "")
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the webhook as JSON")
	return cmd
}

func newWebhookRotateCmd(e *env) *cobra.Command {
	var (
		secret string
		grace  time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "rotate-secret NAME",
		Short: "Replace a webhook's secret, keeping the old one valid for --grace",
		Long: "rotate-secret makes a new secret current; receivers holding the old one keep verifying\n" +
			"the Standard Webhooks signature during the grace period. Without --secret a new secret\n" +
			"is generated and printed once.",
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().StringVar(&secret, "secret", "", "the new `SECRET` (default: generate one and print it once)")
	cmd.Flags().Lookup("secret").NoOptDefVal = generateSecret
	cmd.Flags().DurationVar(&grace, "grace", webhook.DefaultRotationGrace, "how long the old secret stays valid (at most 168h)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the webhook as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		s, given, generate, rest := takeBareSecret(e, cmd.Flags(), secret, pos, 1)
		if err := argNames("webhook NAME")(cmd, rest); err != nil {
			return err
		}
		return failure(func() error {
			if !given || generate {
				var err error
				if s, err = newSecret(); err != nil {
					return err
				}
				generate = true
			}
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			w, err := svc.RotateSecret(cmd.Context(), e.tenant, rest[0], s, grace)
			if err != nil {
				return webhookError(rest[0], err)
			}
			shown := shownView{View: webhook.ViewOf(w)}
			if generate {
				shown.Secret = s
			}
			return printWebhook(e.stdout, shown, asJSON, "secret rotated")
		}())
	}
	return cmd
}

// printWebhook prints v as JSON, or as a short summary after what was done
// ("created"; "" for show, which prints every field).
func printWebhook(w io.Writer, v shownView, asJSON bool, done string) error {
	if asJSON {
		return writeJSON(w, v)
	}
	p := &printer{w: w}
	if done != "" {
		p.printf("webhook %q %s: %s of %q -> %s %s%s\n", v.Name, done, v.Event, v.DocType, v.Method, v.URL, disabledNote(v.View))
	} else {
		printWebhookDetail(p, v.View)
	}
	if v.Secret != "" {
		p.printf("secret: %s\n", v.Secret)
	}
	return p.err
}

func printWebhookDetail(p *printer, v webhook.View) {
	tw := tabwriter.NewWriter(p, 0, 4, 2, ' ', 0)
	row := func(k, val string) { fmt.Fprintf(tw, "%s:\t%s\n", k, val) }
	row("name", v.Name)
	row("doctype", v.DocType)
	row("event", v.Event)
	row("enabled", yesNo(v.Enabled)+disabledNote(v))
	row("url", v.Method+" "+v.URL)
	row("structure", v.Structure)
	if v.Template != "" {
		row("template", oneLine(v.Template))
	}
	if len(v.Fields) > 0 {
		row("fields", strings.Join(v.Fields, ", "))
	}
	for _, k := range sortedKeys(v.Headers) {
		row("header", k+": "+v.Headers[k])
	}
	if v.Condition != "" {
		row("condition", v.Condition)
	}
	if v.Description != "" {
		row("description", oneLine(v.Description))
	}
	if v.HasSecret {
		row("secret", "set (signature: "+v.Signature+")")
	} else {
		row("secret", "none (requests are not signed)")
	}
	row("max retries", fmt.Sprint(v.MaxRetries))
	row("timeout", v.Timeout)
	row("queue", v.Queue)
	if v.ConditionLanguage == "python" {
		row("condition language", v.ConditionLanguage)
	}
	if v.Ordering == models.OrderingDocument {
		row("ordering", "by document: each document's deliveries in acceptance order")
	}
	if v.Compat != "" {
		row("compat", v.Compat)
	}
	if v.URLTemplate != "" {
		row("url template", v.URLTemplate)
	}
	if v.FollowRedirects > 0 {
		row("redirects", fmt.Sprintf("followed, up to %d", v.FollowRedirects))
	}
	if v.RateLimit > 0 {
		row("rate limit", fmt.Sprintf("%d/s", v.RateLimit))
	} else {
		row("rate limit", "none")
	}
	if h := v.Health; h != nil {
		row("health", healthLine(*h))
	}
	row("created", v.CreatedAt.Format(time.RFC3339))
	row("updated", v.UpdatedAt.Format(time.RFC3339))
	_ = tw.Flush()
}

func printWebhookTable(w io.Writer, views []webhook.View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDOCTYPE\tEVENT\tENABLED\tURL")
	for _, v := range views {
		enabled := "yes"
		if !v.Enabled {
			enabled = "NO (disabled)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %s\n", v.Name, v.DocType, v.Event, enabled, v.Method, v.URL)
	}
	return tw.Flush()
}

func disabledNote(v webhook.View) string {
	switch {
	case v.Enabled:
		return ""
	case v.DisabledReason != "":
		return " (DISABLED: " + v.DisabledReason + ")"
	default:
		return " (DISABLED)"
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// healthLine says in one line how a webhook's endpoint is doing.
func healthLine(h webhook.Health) string {
	switch h.State {
	case webhook.HealthFailing:
		probe := "no probe yet"
		if h.LastProbeAt != nil {
			probe = "last probe " + h.LastProbeAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("failing since %s (%s), %s, %s held back until a probe succeeds",
			timeOrDash(h.FailingSince), counted(int64(h.Failures), "failure", "failures"), probe, counted(h.HeldBack, "due retry", "due retries"))
	case webhook.HealthDegraded:
		return fmt.Sprintf("degraded since %s (%s since the last success; failing at %d)", timeOrDash(h.FailingSince), counted(int64(h.Failures), "failure", "failures"), models.FailingAfter)
	}
	return "healthy"
}

func newWebhookPreviewCmd(e *env) *cobra.Command {
	var (
		doc    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "preview NAME --doc JSON|@FILE",
		Short: "Show what a webhook would send for a document, without sending it",
		Args:  argNames("webhook NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			sample, err := docFlag(cmd, doc)
			if err != nil {
				return err
			}
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			p, err := svc.Preview(cmd.Context(), e.tenant, pos[0], sample)
			if err != nil {
				return err
			}
			// Not sendable is a failure (exit status 1), already told.
			var notSendable error
			if p.Error != "" {
				notSendable = &exitError{code: exitFailure, err: fmt.Errorf("webhook %q: not sendable: %s", pos[0], p.Error), silent: true}
			}
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(p); err != nil {
					return err
				}
				return notSendable
			}
			switch {
			case p.Error != "":
				fmt.Fprintf(e.stdout, "condition: %v\nnot sendable: %s\n", p.Matched, p.Error)
				return notSendable
			case !p.Matched:
				fmt.Fprintln(e.stdout, "condition: false (nothing would be sent)")
			default:
				fmt.Fprintf(e.stdout, "condition: true\n%s %s\n", p.Method, p.URL)
				for _, k := range sortedKeys(p.Headers) {
					fmt.Fprintf(e.stdout, "%s: %s\n", k, p.Headers[k])
				}
				fmt.Fprintf(e.stdout, "\n%s\n", p.Body)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&doc, "doc", "", "the document as a JSON object, or @FILE")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the preview as JSON")
	return cmd
}

func newWebhookTestCmd(e *env) *cobra.Command {
	var (
		doc    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "test NAME [--doc JSON|@FILE]",
		Short: "Send what a webhook would send for a document to its receiver once, now, and show the answer",
		Long: "test renders the webhook for the document as preview does and sends the request once, now,\n" +
			"through the workers' sender (SSRF guard, signed with the live secrets under a test_ webhook-id).\n" +
			"It is no event: no delivery row is written and nothing is retried. One test a second per webhook.\n" +
			"Exits 1 unless the receiver answered 2xx.",
		Args: argNames("webhook NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			sample, err := docFlag(cmd, doc)
			if err != nil {
				return err
			}
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			res, err := svc.TestSend(cmd.Context(), e.tenant, pos[0], sample)
			if err != nil {
				return err
			}
			var failed error
			if !res.OK {
				why := res.Error
				if why == "" {
					why = fmt.Sprintf("receiver answered %d", res.StatusCode)
				}
				failed = &exitError{code: exitFailure, err: fmt.Errorf("webhook %q: test send: %s", pos[0], why), silent: true}
			}
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
				return failed
			}
			if !res.Sent {
				fmt.Fprintf(e.stdout, "not sent: %s\n", strings.TrimPrefix(res.Error, "not sent: "))
				return failed
			}
			fmt.Fprintf(e.stdout, "%s %s\nreceiver answered %d (%s) in %s\n", res.Method, res.URL, res.StatusCode, res.Class, res.Duration)
			if res.Error != "" && res.StatusCode == 0 {
				fmt.Fprintf(e.stdout, "error: %s\n", res.Error)
			}
			if res.Response != "" {
				fmt.Fprintf(e.stdout, "\n%s\n", res.Response)
			}
			return failed
		}),
	}
	cmd.Flags().StringVar(&doc, "doc", "", "the document as a JSON object, or @FILE")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// counted says n things as a person writes it: "1 failure", "2 failures".
func counted(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
