package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/homingdev/homing/internal/engine/secretbox"
)

func newSecretsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the key that encrypts webhook secrets at rest",
	}
	group(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:   "genkey",
		Short: "Print a new secrets.key (set it in the config file or as HOMING_SECRETS_KEY)",
		// No configuration is read: the key is what goes into it.
		Args: argNames(),
		RunE: run(func(*cobra.Command, []string) error {
			key, err := secretbox.GenerateKey()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(e.stdout, key)
			return err
		}),
	})
	return cmd
}
