package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
)

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printer writes formatted output and keeps the first error, so a printing
// function checks once at the end.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n, err := p.w.Write(b)
	if err != nil {
		p.err = fmt.Errorf("write output: %w", err)
	}
	return n, p.err
}

func (p *printer) printf(format string, args ...any) { _, _ = fmt.Fprintf(p, format, args...) }

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
