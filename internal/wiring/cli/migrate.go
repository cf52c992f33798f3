package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/intake/store"
)

func newMigrateCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations this version of Homing needs",
		Args:  argNames(),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			cfg, err := e.config()
			if err != nil {
				return err
			}
			db, err := store.Open(cfg.Database.URL)
			if err != nil {
				return err
			}
			defer func() { _ = store.Close(db) }()
			versions, err := store.Migrate(cmd.Context(), db)
			if err != nil {
				return fmt.Errorf("migrate database: %w", err)
			}
			p := &printer{w: e.stdout}
			if len(versions) == 0 {
				p.printf("database is up to date\n")
			}
			for _, v := range versions {
				p.printf("applied migration %d\n", v)
			}
			return p.err
		}),
	}
}
