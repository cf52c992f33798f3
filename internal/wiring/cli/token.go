package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/ops/token"
	"github.com/homingdev/homing/internal/wiring/app"
)

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke bearer tokens of the HTTP API (homing serve)",
	}
	group(cmd)
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func tokens(a *app.App) *token.Service { return token.New(a.DB, a.Clock, a.Log) }

func newTokenCreateCmd(e *env) *cobra.Command {
	var (
		name, scope string
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "create --name N [--scope publish|admin] [--tenant T] [--json]",
		Short: "Create a token and print it, once",
		Long: "create issues a bearer token for the HTTP API and prints it once: only its hash is kept.\n" +
			"A publish token may only POST /v1/events; an admin token may use every endpoint.\n" +
			"With --tenant T the token sees and acts in tenant T only; without it, it is an operator token:\n" +
			"it acts in the default tenant, or in the one a request names (Homing-Tenant), and may manage tenants.",
		Args: argNames(),
		PreRunE: func(*cobra.Command, []string) error {
			for _, s := range token.Scopes {
				if strings.EqualFold(scope, s) {
					scope = s
					return nil
				}
			}
			return usagef("--scope %q is not one of %s", scope, strings.Join(token.Scopes, ", "))
		},
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				// Only --tenant given here makes a tenant token:
				// HOMING_TENANT never turns an operator's token into one.
				ten := ""
				if f := cmd.Flag("tenant"); f != nil && f.Changed {
					ten = e.tenant
				}
				tok, plain, err := tokens(a).Create(cmd.Context(), name, scope, ten)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, struct {
						token.Token
						Plain string `json:"token"`
					}{tok, plain})
				}
				p := &printer{w: e.stdout}
				if tok.Operator {
					p.printf("token %q created (scope %s, operator); it is shown only now:\n%s\n", tok.Name, tok.Scope, plain)
				} else {
					p.printf("token %q created (scope %s, tenant %s); it is shown only now:\n%s\n", tok.Name, tok.Scope, tok.Tenant, plain)
				}
				return p.err
			})
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "token `NAME` (unique), e.g. the producer using it")
	cmd.Flags().StringVar(&scope, "scope", token.ScopePublish, "`SCOPE`: publish (POST /v1/events only) or admin (everything)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"name", "scope", "tenant", "operator", "created_at", "last_used_at", "token"}`)
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newTokenListCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never the tokens themselves)",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				list, err := tokens(a).List(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, list)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSCOPE\tTENANT\tCREATED\tLAST USED")
				for _, t := range list {
					ten := t.Tenant
					if t.Operator {
						ten = "(operator)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Scope, ten, t.CreatedAt.Format(time.RFC3339), timeOrDash(t.LastUsedAt))
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tokens as a JSON array")
	return cmd
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token: requests carrying it are refused from now on",
		Args:  argNames("token NAME"),
		RunE: run(func(cmd *cobra.Command, pos []string) error {
			return e.withApp(cmd.Context(), func(a *app.App) error {
				if err := tokens(a).Revoke(cmd.Context(), pos[0]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(e.stdout, "token %q revoked\n", pos[0])
				return err
			})
		}),
	}
}
