package console

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// accentPath serves the stylesheet of one accent colour:
// /portal/theme/0a7d5a.css sets the portal's colours from #0a7d5a. A page
// links the one of its tenant's theme. A stylesheet of its own origin is
// what keeps the CSP strict: an inline style (a <style> element, a style
// attribute) would need 'unsafe-inline'. The colour is the whole input, so
// the answer needs no session and may be cached.
const accentPath = PortalPrefix + "theme/"

// accentCSS answers GET /portal/theme/{rrggbb}.css with the colours of
// the page's header: the accent as its background, and black or white
// text, whichever contrasts more with it. Every text of the header (its
// links and the quieter "portal of tenant" line too) takes that colour:
// the better of black and white is at least 4.58:1 on any accent, WCAG
// AA, and a translucent one would fall under it on a mid-tone accent.
func accentCSS(w http.ResponseWriter, r *http.Request) {
	hex, ok := strings.CutSuffix(r.PathValue("file"), ".css")
	rgb, err := strconv.ParseUint(hex, 16, 32)
	if !ok || len(hex) != 6 || err != nil || strings.ToLower(hex) != hex {
		http.NotFound(w, r)
		return
	}
	text := "#ffffff"
	if onBlack(uint8(rgb>>16), uint8(rgb>>8), uint8(rgb)) {
		text = "#111111"
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = fmt.Fprintf(w, ":root { --accent: #%s; --accent-text: %s; --accent-link: %s; --accent-muted: %s; }\n", hex, text, text, text)
}

// onBlack says whether black text reads better than white on the colour
// r, g, b: WCAG's contrast ratio of each against its relative luminance.
func onBlack(r, g, b uint8) bool {
	lin := func(c uint8) float64 {
		v := float64(c) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	l := 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
	return (l+0.05)/0.05 > 1.05/(l+0.05)
}
