package console

import (
	"strings"

	"github.com/homingdev/homing/internal/engine/signing"
)

// Snippet is one way to verify a webhook's signature, shown beside its
// secret: the official Standard Webhooks library of a language, or the
// Frappe scheme's HMAC.
type Snippet struct {
	// ID names the snippet on the page (snippet-go, …).
	ID, Title string
	// Install is the command that fetches the library; "" for none.
	Install string
	Code    string
}

// standardWebhooksGo is the Go module of the official Standard Webhooks
// library and the version the snippet names (go.mod's; the tests build the
// snippet against it).
const standardWebhooksGo = "github.com/standard-webhooks/standard-webhooks/libraries"

// Snippets are the verification snippets for a webhook signing with scheme
// under secret: Node, Python and Go with the official Standard Webhooks
// libraries when it sends webhook-signature, and Frappe's HMAC when it sends
// X-Frappe-Webhook-Signature. Each reads the secret from WEBHOOK_SECRET,
// never from its text. A secret without the whsec_ prefix (a Frappe user's
// own) is its raw bytes, which each library is told.
func Snippets(scheme string, secret signing.Secret) []Snippet {
	raw := !strings.HasPrefix(string(secret), signing.StandardPrefix)
	var out []Snippet
	if scheme == signing.SchemeBoth || scheme == signing.SchemeStandard {
		out = append(out, nodeSnippet(raw), pythonSnippet(raw), goSnippet(raw))
	}
	if scheme == signing.SchemeBoth || scheme == signing.SchemeFrappe {
		out = append(out, frappeSnippet())
	}
	return out
}

func nodeSnippet(raw bool) Snippet {
	newWebhook := `new Webhook(process.env.WEBHOOK_SECRET)`
	if raw {
		newWebhook = `new Webhook(Buffer.from(process.env.WEBHOOK_SECRET), { format: "raw" })`
	}
	return Snippet{ID: "snippet-node", Title: "Node.js (standardwebhooks)", Install: "npm install standardwebhooks", Code: `// receiver.mjs: WEBHOOK_SECRET=… PORT=8000 node receiver.mjs
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = ` + newWebhook + `;

http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    try {
      wh.verify(body, req.headers); // throws unless the signature and timestamp hold
    } catch (err) {
      res.writeHead(401).end("invalid signature");
      return;
    }
    console.log("verified", req.headers["webhook-id"]);
    res.writeHead(204).end();
  });
}).listen(process.env.PORT || 8000);
`}
}

func pythonSnippet(raw bool) Snippet {
	newWebhook := `Webhook(os.environ["WEBHOOK_SECRET"])`
	if raw {
		newWebhook = `Webhook(os.environ["WEBHOOK_SECRET"].encode())  # bytes: the secret's raw bytes are the key`
	}
	return Snippet{ID: "snippet-python", Title: "Python (standardwebhooks)", Install: "pip install standardwebhooks", Code: `import os

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

wh = ` + newWebhook + `


def verified(body: bytes, headers: dict) -> bool:
    """body: the request's raw bytes; headers: its headers (any case)."""
    try:
        wh.verify(body, headers)  # checks the signature and the timestamp
    except WebhookVerificationError:
        return False
    return True
`}
}

func goSnippet(raw bool) Snippet {
	newWebhook := `standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))`
	if raw {
		newWebhook = `standardwebhooks.NewWebhookRaw([]byte(os.Getenv("WEBHOOK_SECRET")))`
	}
	return Snippet{ID: "snippet-go", Title: "Go (standard-webhooks)", Install: "go get " + standardWebhooksGo + "@v1.3.0", Code: `// WEBHOOK_SECRET=… ADDR=:8000 go run .
package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	wh, err := ` + newWebhook + `
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		// Verify checks the signature and that the timestamp is recent.
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		log.Printf("verified %s", r.Header.Get("webhook-id"))
		w.WriteHeader(http.StatusNoContent)
	})
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8000"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
`}
}

func frappeSnippet() Snippet {
	return Snippet{ID: "snippet-frappe", Title: "Frappe scheme (X-Frappe-Webhook-Signature), Python", Code: `import base64
import hashlib
import hmac
import os


def verified(body: bytes, signature: str) -> bool:
    """signature: the X-Frappe-Webhook-Signature header, the base64 of the
    HMAC-SHA256 of the body keyed with the whole secret string."""
    key = os.environ["WEBHOOK_SECRET"].encode()
    expected = base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()
    return hmac.compare_digest(expected, signature)
`}
}
