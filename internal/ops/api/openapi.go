package api

import (
	_ "embed"
	"net/http"
)

// openAPI is the API's OpenAPI 3 document. It is the canonical copy;
// docs/openapi.json is kept identical to it, and tests hold both to the
// routes table and the JSON the handlers write.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document served at /v1/openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// serveOpenAPI is GET /v1/openapi.json. It needs no token: the document
// describes the API, not anyone's data.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
	return nil
}
