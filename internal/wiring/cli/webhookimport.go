package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/engine/webhook"
)

// newWebhookImportCmd is `homing webhook import frappe FILE`.
func newWebhookImportCmd(e *env) *cobra.Command {
	var secretsFile string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "import frappe FILE [--secrets FILE] [--dry-run] [--json]",
		Short: "Import a Frappe site's webhooks (bench export-fixtures or GET /api/resource/Webhook output)",
		Long: `Import a Frappe site's Webhook records so that they send what Frappe sent: compat frappe,
Python conditions, redirects followed (10). FILE is the JSON of bench export-fixtures (a list of
Webhook records with webhook_headers and webhook_data) or of GET /api/resource/Webhook ({"data": [...]}),
or - for stdin. Frappe does not export secrets: give them with --secrets FILE (a JSON object of
webhook name to secret); a webhook with enable_security and no secret is imported disabled.
A webhook whose name exists is replaced by the imported definition (reported "updated").`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || args[0] != "frappe" {
				return usagef("usage: homing webhook import frappe FILE (only Frappe's export can be imported)")
			}
			return nil
		},
		RunE: run(func(cmd *cobra.Command, args []string) error {
			data, err := readArgFile(cmd.InOrStdin(), args[1])
			if err != nil {
				return err
			}
			hooks, secrets, err := webhook.ParseFrappeExport(data)
			if err != nil {
				return usagef("%s: %v", args[1], err)
			}
			if secretsFile != "" {
				b, err := os.ReadFile(secretsFile)
				if err != nil {
					return usagef("--secrets: %v", err)
				}
				if err := json.Unmarshal(b, &secrets); err != nil {
					return usagef("--secrets %s: want a JSON object of webhook name to secret: %v", secretsFile, err)
				}
			}
			svc, a, err := e.webhooks(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = a.Close() }()
			results, err := svc.ImportFrappe(cmd.Context(), e.tenant, hooks, secrets, dryRun)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, map[string]any{"dry_run": dryRun, "webhooks": results})
			}
			printImport(e.stdout, results, dryRun)
			return nil
		}),
	}
	cmd.Flags().StringVar(&secretsFile, "secrets", "", "a JSON file of webhook name to secret (Frappe does not export secrets)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be imported, storing nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func readArgFile(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return b, nil
}

func printImport(w io.Writer, results []webhook.ImportResult, dryRun bool) {
	prefix := ""
	if dryRun {
		prefix = "would be "
	}
	for _, r := range results {
		status := strings.ReplaceAll(r.Status, "_", " ")
		state := ""
		if r.Status != webhook.ImportNotImported && !r.Enabled {
			state = ", disabled"
		}
		fmt.Fprintf(w, "%s: %s%s%s\n", r.Name, prefix, status, state)
		for _, a := range r.Adapted {
			fmt.Fprintf(w, "  adapted: %s\n", a)
		}
		for _, n := range r.NeedsHuman {
			fmt.Fprintf(w, "  needs a human: %s\n", n)
		}
	}
}
