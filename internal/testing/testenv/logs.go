package testenv

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Logs is a log a test reads back: what services logged through Logger,
// one text line per record. It is safe for concurrent use.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewLogs returns a log and the logger (every level) that writes to it.
func NewLogs() (*Logs, *slog.Logger) {
	l := &Logs{}
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Count is how many records at level (slog's name: "ERROR", "INFO") contain
// text.
func (l *Logs) Count(level, text string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, "level="+level+" ") && strings.Contains(line, text) {
			n++
		}
	}
	return n
}
