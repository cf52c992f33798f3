package token

import (
	"sync"
	"time"
)

// checkedTTL is how long Authenticate believes a token it found without
// asking the database again: `homing serve` under load checks the same few
// tokens thousands of times a second, and this spares all but one lookup a
// second per token. The price is that a revoked token keeps working for at
// most this long in a process that checked it just before.
const checkedTTL = time.Second

// checkedMax bounds the cache: past it, the cache starts over (a process
// sees a handful of tokens; this only stops a flood of valid tokens from
// growing it without limit).
const checkedMax = 1024

// checked remembers the tokens Authenticate found, by hash, for checkedTTL.
// Unknown tokens are never remembered: each is looked up.
type checked struct {
	mu      sync.Mutex
	entries map[string]checkedEntry
}

type checkedEntry struct {
	tok Token
	at  time.Time
}

func (c *checked) get(hash string, now time.Time) (Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || now.Sub(e.at) >= checkedTTL || now.Before(e.at) {
		return Token{}, false
	}
	return e.tok, true
}

func (c *checked) put(hash string, tok Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= checkedMax {
		c.entries = make(map[string]checkedEntry)
	}
	c.entries[hash] = checkedEntry{tok: tok, at: now}
}

// forget drops every entry: a revocation in this process takes effect at
// once.
func (c *checked) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
}
