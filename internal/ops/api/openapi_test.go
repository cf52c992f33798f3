package api

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/homingdev/homing/internal/engine/tenant"
	"github.com/homingdev/homing/internal/engine/webhook"
	"github.com/homingdev/homing/internal/intake/event"
	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/portal"
	"github.com/homingdev/homing/internal/ops/token"
)

// document is the part of the OpenAPI document the tests read.
type document struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]schema `json:"schemas"`
	} `json:"components"`
}

type schema struct {
	Ref        string                     `json:"$ref"`
	Properties map[string]json.RawMessage `json:"properties"`
	AllOf      []schema                   `json:"allOf"`
}

type operation struct {
	Scope     string                     `json:"x-homing-scope"`
	Responses map[string]json.RawMessage `json:"responses"`
}

func readDocument(t *testing.T) document {
	t.Helper()
	var doc document
	dec := json.NewDecoder(bytes.NewReader(openAPI))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("internal/ops/api/openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf(`"openapi" is %q, want 3.x`, doc.OpenAPI)
	}
	return doc
}

// TestDocsCopyIsIdentical: docs/openapi.json is the served document, byte
// for byte.
func TestDocsCopyIsIdentical(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, openAPI) {
		t.Fatal("docs/openapi.json differs from internal/ops/api/openapi.json: copy internal/ops/api/openapi.json over it (cp internal/ops/api/openapi.json docs/openapi.json)")
	}
}

// TestDocumentMatchesRoutes: every route the server registers is in the
// document with its method and scope, and the document has nothing else.
func TestDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	served := map[string]bool{}
	for _, rt := range New(Config{}).routes() {
		key := rt.method + " " + rt.path
		served[key] = true
		ops, ok := doc.Paths[rt.path]
		if !ok {
			t.Errorf("route %s is not in the document's paths", key)
			continue
		}
		raw, ok := ops[strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("route %s: the document's %s has no %s operation", key, rt.path, strings.ToLower(rt.method))
			continue
		}
		var op operation
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		want := rt.scope
		if want == scopeNone {
			want = "none"
		}
		if op.Scope != want {
			t.Errorf("route %s needs scope %q, the document says x-homing-scope %q", key, want, op.Scope)
		}
		if len(op.Responses) == 0 {
			t.Errorf("route %s: no responses documented", key)
		}
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	for path, ops := range doc.Paths {
		for m := range ops {
			if !slices.Contains(methods, m) {
				continue // parameters, summary …
			}
			if key := strings.ToUpper(m) + " " + path; !served[key] {
				t.Errorf("the document describes %s, which the server does not serve", key)
			}
		}
	}
}

// properties are the property names of a schema, with allOf and $ref
// resolved.
func (d document) properties(t *testing.T, s schema) []string {
	t.Helper()
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		ref, found := d.Components.Schemas[name]
		if !ok || !found {
			t.Fatalf("unresolvable $ref %q", s.Ref)
		}
		return d.properties(t, ref)
	}
	out := slices.Collect(maps.Keys(s.Properties))
	for _, sub := range s.AllOf {
		out = append(out, d.properties(t, sub)...)
	}
	slices.Sort(out)
	return out
}

// TestSchemasMatchTheJSON: each schema has exactly the JSON fields of the
// Go type the handlers write or read, so the document cannot drift from
// what goes over the wire.
func TestSchemasMatchTheJSON(t *testing.T) {
	t.Parallel()
	doc := readDocument(t)
	writable := slices.DeleteFunc(structFields(reflect.TypeFor[webhookRequest]()), func(f string) bool {
		return slices.Contains([]string{"has_secret", "disabled_reason", "created_at", "updated_at", "health"}, f)
	})
	for name, fields := range map[string][]string{
		"Error":          structFields(reflect.TypeFor[errorBody]()),
		"ErrorDetail":    structFields(reflect.TypeFor[Error]()),
		"WebhookFailure": structFields(reflect.TypeFor[event.WebhookFailure]()),
		"EventRequest":   structFields(reflect.TypeFor[eventRequest]()),
		"EventAccepted":  structFields(reflect.TypeFor[eventResponse]()),
		"Webhook":        structFields(reflect.TypeFor[webhook.View]()),
		"WebhookShown":   structFields(reflect.TypeFor[webhook.ShownView]()),
		"WebhookInput":   writable,
		"WebhookList":    structFields(reflect.TypeFor[webhookList]()),
		"Delivery":       structFields(reflect.TypeFor[inspect.Delivery]()),
		"DeliveryDetail": structFields(reflect.TypeFor[inspect.Detail]()),
		"Attempt":        structFields(reflect.TypeFor[inspect.Attempt]()),
		"DeliveryPage":   structFields(reflect.TypeFor[inspect.Page]()),
		"Preview":        structFields(reflect.TypeFor[webhook.Preview]()),
		"TestResult":     structFields(reflect.TypeFor[webhook.TestResult]()),
		"PortalLink":     structFields(reflect.TypeFor[portal.Issued]()),
		"Token":          structFields(reflect.TypeFor[token.Token]()),
		"TokenCreated":   structFields(reflect.TypeFor[tokenCreated]()),
		"TokenInput":     structFields(reflect.TypeFor[tokenRequest]()),
		"TokenList":      structFields(reflect.TypeFor[tokenList]()),
		"Tenant":         structFields(reflect.TypeFor[tenant.Tenant]()),
		"TenantInput":    structFields(reflect.TypeFor[tenantRequest]()),
	} {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		slices.Sort(fields)
		if got := doc.properties(t, s); !slices.Equal(got, fields) {
			t.Errorf("schema %s has properties\n %v\nthe Go type has JSON fields\n %v", name, got, fields)
		}
	}
}

// TestServedDocument: GET /v1/openapi.json serves the embedded document.
func TestServedDocument(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Config{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(b, openAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes; want the embedded document", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	if !bytes.Equal(OpenAPI(), openAPI) {
		t.Fatal("OpenAPI() differs from the embedded document")
	}
}
