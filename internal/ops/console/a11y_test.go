package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/homingdev/homing/internal/ops/token"
)

// unlabelled lists the form controls of page that no label names: every
// <input> (but hidden ones and buttons), <select> and <textarea> must be
// named by a <label for> its id, or sit inside a <label>. Besides, an id
// is used once (a label names the first of a duplicated id), and every
// <label for> names a control that exists.
func unlabelled(page string) []string {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return []string{"the page does not parse: " + err.Error()}
	}
	var problems []string
	ids := map[string]int{}
	labelFor := map[string]bool{}
	type control struct {
		desc, id string
		inLabel  bool
	}
	var controls []control
	var walk func(n *html.Node, inLabel bool)
	walk = func(n *html.Node, inLabel bool) {
		if n.Type == html.ElementNode {
			if id := attr(n, "id"); id != "" {
				ids[id]++
			}
			switch n.Data {
			case "label":
				if f := attr(n, "for"); f != "" {
					labelFor[f] = true
				}
				inLabel = true
			case "input":
				if t := strings.ToLower(attr(n, "type")); t == "hidden" || t == "submit" || t == "button" || t == "reset" || t == "image" {
					break
				}
				fallthrough
			case "select", "textarea":
				controls = append(controls, control{fmt.Sprintf("<%s name=%q id=%q>", n.Data, attr(n, "name"), attr(n, "id")), attr(n, "id"), inLabel})
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inLabel)
		}
	}
	walk(doc, false)
	for _, c := range controls {
		if !c.inLabel && (c.id == "" || !labelFor[c.id]) {
			problems = append(problems, c.desc+" has no label")
		}
	}
	for id, n := range ids {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("id %q is used %d times", id, n))
		}
	}
	for f := range labelFor {
		if ids[f] == 0 {
			problems = append(problems, fmt.Sprintf("<label for=%q> names nothing", f))
		}
	}
	slices.Sort(problems)
	return problems
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// checkLabels fails t for each of unlabelled's problems of an HTML answer:
// site.do runs it on every page any test of this package renders.
func checkLabels(t testing.TB, what string, res *http.Response, body string) {
	t.Helper()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		return
	}
	for _, p := range unlabelled(body) {
		t.Errorf("%s: %s", what, p)
	}
}

// The label check finds what it looks for: a control without a label, a
// label naming nothing, an id used twice; and takes both ways of naming.
func TestUnlabelledFindsControlsWithoutALabel(t *testing.T) {
	t.Parallel()
	for page, want := range map[string]string{
		`<label for="a">A</label><input id="a" name="a"><label>B <select name="b"></select></label><input type="hidden" name="csrf"><button>Go</button>`: "[]",
		`<input name="q">`:                                 `[<input name="q" id=""> has no label]`,
		`<label for="x">X</label><textarea id="y">`:        `[<label for="x"> names nothing <textarea name="" id="y"> has no label]`,
		`<label for="a">A</label><input id="a"><p id="a">`: `[id "a" is used 2 times]`,
		`<input type="checkbox" id="c"><span>C</span>`:     `[<input name="" id="c"> has no label]`,
	} {
		if got := fmt.Sprint(unlabelled(page)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", page, got, want)
		}
	}
}

// Every page of the console and of the portal, each kind once, is built
// for a keyboard and a screen reader: each control labelled (checkLabels,
// in site.do), a skip link first that leads to <main id="main">, a
// <header> with a labelled main <nav> whose link to the page's section is
// aria-current, one <h1>, and tables with a caption and scoped headers.
func TestEveryPageIsAccessible(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.withAcme()
	op := s.login(s.admin)
	link, err := s.links.Create(context.Background(), "acme", 0, token.Token{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ck := s.open(link.Token)
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")
	for _, side := range []struct {
		base, hook, delivery string
		cookie               *http.Cookie
	}{{"/console/", "orders", "d-1", op}, {"/portal/", "acme-orders", "a-1", ck}} {
		csrf := s.csrf(side.cookie, side.base+"webhooks/"+side.hook)
		for _, p := range []struct {
			method, path string
			form         url.Values
			current      string // the nav link marked, and how
		}{
			{"GET", "", nil, `nav-overview" aria-current="page"`},
			{"GET", "deliveries", nil, `nav-deliveries" aria-current="page"`},
			{"GET", "deliveries?status=Failed&since=" + since, nil, `nav-deliveries" aria-current="page"`},
			{"GET", "deliveries?since=yesterday", nil, `nav-deliveries" aria-current="page"`},
			{"GET", "deliveries/" + side.delivery, nil, `nav-deliveries" aria-current="true"`},
			{"GET", "webhooks", nil, `nav-webhooks" aria-current="page"`},
			{"GET", "webhooks/" + side.hook, nil, `nav-webhooks" aria-current="true"`},
			{"GET", "webhooks/" + side.hook + "/edit", nil, `nav-webhooks" aria-current="true"`},
			{"GET", "new-webhook", nil, `nav-webhooks" aria-current="true"`},
			{"GET", "webhooks/" + side.hook + "/secret", nil, `nav-webhooks" aria-current="true"`},
			{"POST", "webhooks/" + side.hook + "/preview", url.Values{"csrf": {csrf}, "doc": {`{"name": "SO-1"}`}}, `nav-webhooks" aria-current="true"`},
			{"POST", "webhooks/" + side.hook + "/recover", url.Values{"csrf": {csrf}, "since": {since}, "status": {""}, "step": {"count"}}, `nav-webhooks" aria-current="true"`},
			{"POST", "webhooks", url.Values{"csrf": {csrf}, "name": {""}}, `nav-webhooks" aria-current="true"`},
			{"GET", "deliveries/no-such", nil, ""},
		} {
			what := p.method + " " + side.base + p.path
			_, body := s.do(p.method, side.base+p.path, p.form, side.cookie, nil)
			for _, problem := range landmarks(body) {
				t.Errorf("%s: %s", what, problem)
			}
			if p.current != "" && !strings.Contains(body, p.current) {
				t.Errorf("%s does not mark its nav link: %s", what, p.current)
			}
			if n := strings.Count(body, "aria-current="); p.current != "" && n != 1 || p.current == "" && n != 0 {
				t.Errorf("%s marks %d nav links as current", what, n)
			}
		}
	}
	res, body := s.do("GET", "/console/login", nil, nil, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<label for="token">`) {
		t.Errorf("the login form's token has no label: %s", body)
	}
	for _, problem := range landmarks(body) {
		t.Errorf("GET /console/login: %s", problem)
	}
}

// landmarks lists what page lacks of the layout every page shares.
func landmarks(page string) []string {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	count := map[string]int{}
	var firstLink *html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			count[n.Data]++
			switch n.Data {
			case "a":
				if firstLink == nil {
					firstLink = n
				}
			case "nav":
				if attr(n, "aria-label") == "" {
					problems = append(problems, "a <nav> without aria-label")
				}
			case "main":
				if attr(n, "id") != "main" {
					problems = append(problems, `<main> is not id="main"`)
				}
			case "table":
				if !hasChild(n, "caption") {
					problems = append(problems, fmt.Sprintf("table %q has no caption", attr(n, "id")))
				}
			case "th":
				if attr(n, "scope") == "" {
					problems = append(problems, "a <th> without scope")
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if firstLink == nil || attr(firstLink, "href") != "#main" || attr(firstLink, "class") != "skip-link" {
		problems = append(problems, "the first link is not the skip link to #main")
	}
	for _, el := range []string{"header", "main", "nav", "h1"} {
		if count[el] != 1 {
			problems = append(problems, fmt.Sprintf("%d <%s>, want 1", count[el], el))
		}
	}
	return problems
}

func hasChild(n *html.Node, tag string) bool {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag {
			return true
		}
	}
	return false
}
