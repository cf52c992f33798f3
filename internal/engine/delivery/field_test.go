package delivery

import (
	"errors"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/delivery/send"
)

func TestParseField(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in      string
		want    Field
		wantErr string
	}{
		{in: "customer_name=customer", want: Field{Fieldname: "customer_name", Key: "customer"}},
		{in: "grand_total", want: Field{Fieldname: "grand_total", Key: "grand_total"}},
		{in: " name = id ", want: Field{Fieldname: "name", Key: "id"}},
		{in: "a=b=c", want: Field{Fieldname: "a", Key: "b=c"}},
		{in: "", wantErr: `field "": fieldname is empty`},
		{in: "=key", wantErr: `field "=key": fieldname is empty`},
		{in: "  =key", wantErr: `fieldname is empty`},
		{in: "name=", wantErr: `field "name=": key after "=" is empty`},
		{in: "name= ", wantErr: `key after "=" is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseField(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, send.ErrUnbuildable) || !strings.HasPrefix(err.Error(), tt.wantErr) && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseField(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseField(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseField(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			back, err := ParseField(got.String())
			if err != nil || back != got {
				t.Errorf("ParseField(%q.String()) = %+v, %v", got, back, err)
			}
		})
	}
}
