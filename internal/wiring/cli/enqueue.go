package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/client"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/wiring/app"
	"github.com/homingdev/homing/models"
	"github.com/homingdev/homing/transition"
)

type enqueueFlags struct {
	doctype, event, doc, docName, eventID string
	json                                  bool
}

func newEnqueueCmd(e *env) *cobra.Command {
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue --doctype D --event E --doc JSON|@FILE|- [flags]",
		Short: "Publish a document event to Homing",
		Long: "enqueue publishes one document event and prints its event ID. Ordinary events are\n" +
			"queued in Redis for the worker. workflow_transition events are delivered now, once per\n" +
			"matching webhook; if any delivery fails, each failed webhook is named on stderr and the\n" +
			"exit status is 1.",
		Args: argNames(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := e.readDoc(f.doc)
			if err != nil {
				return err
			}
			return failure(e.enqueue(cmd, &f, doc))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.doctype, "doctype", "", "document type, e.g. \"Sales Order\"")
	fs.StringVar(&f.event, "event", "", "document event: "+strings.Join(models.DocEvents, ", "))
	fs.StringVar(&f.doc, "doc", "", "the document as a JSON object, @FILE to read it from a file, or - for stdin")
	fs.StringVar(&f.docName, "doc-name", "", "the document's `NAME`, e.g. SO-0001 (default: the document's name field)")
	fs.StringVar(&f.eventID, "event-id", "", "idempotency key of the event (default: a new UUIDv7)")
	fs.BoolVar(&f.json, "json", false, `print {"event_id": ...} instead of the bare ID`)
	for _, name := range []string{"doctype", "event", "doc"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// readDoc reads --doc. A document that is not a JSON object is bad usage; a
// file that cannot be read is a failure.
func (e *env) readDoc(v string) (map[string]any, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case v == "-":
		if b, err = io.ReadAll(e.stdin); err != nil {
			return nil, failure(fmt.Errorf("--doc -: read stdin: %w", err))
		}
	case strings.HasPrefix(v, "@"):
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, failure(fmt.Errorf("--doc %s: %w", v, err))
		}
	default:
		b = []byte(v)
	}
	if !utf8.Valid(b) {
		return nil, usagef("--doc: the document is not valid UTF-8; convert it to UTF-8 (e.g. with iconv)")
	}
	if event.JSONHasNUL(b) {
		return nil, usagef("--doc: the document contains a NUL character (\\u0000), which cannot be stored; remove it")
	}
	doc, err := event.DecodeDoc(b)
	if err != nil {
		return nil, usagef("--doc: %v", err)
	}
	return doc, nil
}

func (e *env) enqueue(cmd *cobra.Command, f *enqueueFlags, doc map[string]any) error {
	cfg, err := e.config()
	if err != nil {
		return err
	}
	log, err := e.quietLogger(cfg)
	if err != nil {
		return err
	}
	routeRedisLogs(log, slog.LevelDebug)
	cc := app.ClientConfig(cfg)
	cc.Logger = log
	if f.event == models.EventWorkflowTransition {
		// Only a transition needs the engine and the database; ordinary
		// events need only Redis, and must not open (or create) a database
		// the worker will read instead.
		tc := transition.FromConfig(cfg)
		tc.Logger = log
		tr, err := transition.New(tc)
		if err != nil {
			return err
		}
		defer func() { _ = tr.Close() }()
		cc.Transitions = tr
	}
	c, err := client.New(cc)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ten := e.tenantFlag
	if ten == "" {
		ten = os.Getenv("HOMING_TENANT")
	}
	if ten != "" && !event.ValidTenant(ten) {
		return usagef("--tenant %q is not a tenant name (a-z, 0-9, '-' and '_', starting with a letter or digit)", ten)
	}
	id, err := c.Publish(ctx, client.Event{Tenant: ten, ID: f.eventID, DocType: f.doctype, DocName: f.docName, Event: f.event, Doc: doc})
	var serr *client.SyncError
	if err != nil && !errors.As(err, &serr) {
		return redisUnreachable(cfg.Redis, err)
	}
	if id == "" && serr != nil {
		id = serr.EventID
	}
	if f.json {
		err = writeJSON(e.stdout, struct {
			EventID string `json:"event_id"`
		}{id})
	} else {
		_, err = fmt.Fprintln(e.stdout, id)
	}
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if serr == nil {
		return nil
	}
	for _, fl := range serr.Failures {
		msg := oneLine(fl.Error)
		if msg == "" {
			msg = "not delivered"
		}
		fmt.Fprintf(e.stderr, "webhook %q: %s (see homing delivery show %s)\n", fl.Webhook, msg, fl.DeliveryID)
	}
	return &exitError{code: exitFailure, err: serr, silent: true}
}
