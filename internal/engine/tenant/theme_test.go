package tenant_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/testing/testenv"
	"github.com/homingdev/homing/models"
)

// The theme's rule lives in Go (each value checked with a message saying
// what to fix) and in the migration's CHECKs (0028): the database refuses
// what the service would never write. A value the service accepts, as it
// stores it, the database accepts; a colour or a length the service
// refuses, the database refuses too.
func TestThemeRuleInSQLMatchesGo(t *testing.T) {
	t.Parallel()
	for name, open := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			svc := tenant.New(db, nil, nil)
			ctx := context.Background()
			if _, err := svc.Create(ctx, "acme", tenant.Patch{}); err != nil {
				t.Fatal(err)
			}
			str := func(s string) *string { return &s }
			for _, c := range []struct {
				column string
				value  string
				patch  tenant.Patch
			}{
				{"accent_color", "#0a7d5a", tenant.Patch{AccentColor: str("#0a7d5a")}},
				{"accent_color", "", tenant.Patch{AccentColor: str("")}},
				{"accent_color", "#0A7D5A", tenant.Patch{AccentColor: str("#0A7D5A")}}, // stored lower case
				{"accent_color", "#0a7d5", tenant.Patch{AccentColor: str("#0a7d5")}},
				{"accent_color", "#0a7d5g", tenant.Patch{AccentColor: str("#0a7d5g")}},
				{"accent_color", "0a7d5a1", tenant.Patch{AccentColor: str("0a7d5a1")}},
				{"product_name", strings.Repeat("é", tenant.MaxProductName), tenant.Patch{ProductName: str(strings.Repeat("é", tenant.MaxProductName))}},
				{"product_name", strings.Repeat("é", tenant.MaxProductName+1), tenant.Patch{ProductName: str(strings.Repeat("é", tenant.MaxProductName+1))}},
				{"logo_url", "https://a.example/" + strings.Repeat("l", tenant.MaxThemeURL-18), tenant.Patch{LogoURL: str("https://a.example/" + strings.Repeat("l", tenant.MaxThemeURL-18))}},
				{"logo_url", "https://a.example/" + strings.Repeat("l", tenant.MaxThemeURL-17), tenant.Patch{LogoURL: str("https://a.example/" + strings.Repeat("l", tenant.MaxThemeURL-17))}},
				{"support_url", "https://a.example/" + strings.Repeat("s", tenant.MaxThemeURL-17), tenant.Patch{SupportURL: str("https://a.example/" + strings.Repeat("s", tenant.MaxThemeURL-17))}},
			} {
				_, goErr := svc.Update(ctx, "acme", c.patch)
				if goErr != nil && !errors.Is(goErr, tenant.ErrInvalid) {
					t.Fatalf("%s %q: %v", c.column, c.value, goErr)
				}
				sqlErr := db.Model(&models.Tenant{}).Where("name = ?", "acme").Update(c.column, c.value).Error
				stored := c.value
				if c.column == "accent_color" {
					stored = strings.ToLower(c.value)
				}
				storedErr := db.Model(&models.Tenant{}).Where("name = ?", "acme").Update(c.column, stored).Error
				if (goErr == nil) != (storedErr == nil) {
					t.Errorf("%s %q: the service says %v, the database says %v to it as stored (%q)", c.column, c.value, goErr, storedErr, stored)
				}
				if goErr != nil && sqlErr == nil {
					t.Errorf("%s %q: the service refuses it (%v), the database takes it", c.column, c.value, goErr)
				}
			}
		})
	}
}
