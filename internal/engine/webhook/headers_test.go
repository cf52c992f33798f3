package webhook

import (
	"strings"
	"testing"

	"github.com/homingdev/homing/models"
)

func TestCheckNumericHost(t *testing.T) {
	t.Parallel()

	for host, ok := range map[string]bool{
		"2130706433": false, "0x7f000001": false, "127.1": false, "0177.0.0.1": false, "localhost.": false,
		"127.0.0.1": true, "example.com": true, "::1": true, "10.0.0.1": true, "1.example": true,
	} {
		err := checkNumericHost(host)
		if (err == nil) != ok {
			t.Errorf("checkNumericHost(%q) = %v, want ok=%v", host, err, ok)
		}
	}
}

func TestHeadersAreCheckedAndMasked(t *testing.T) {
	t.Parallel()

	s := &Service{}
	w := models.Webhook{}
	dup := []string{"X-Key: a", "x-key: b"}
	if err := s.applyHeaders(&w, Input{Headers: &dup}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("case-duplicate headers: %v", err)
	}
	auth := []string{"Authorization: Bearer x"}
	if err := s.applyHeaders(&w, Input{Headers: &auth}); err == nil || !strings.Contains(err.Error(), "secrets.key") {
		t.Errorf("a credential header without secrets.key: %v", err)
	}
	masked := MaskedHeaders(map[string]string{"Authorization": "Bearer x", "X-Token": sealedPrefix + "abc", "X-Plain": "p"})
	if masked["Authorization"] != "****" || masked["X-Token"] != "****" || masked["X-Plain"] != "p" {
		t.Errorf("MaskedHeaders = %v", masked)
	}
}
