package httpserve

import (
	"context"
	"net/http"
	"testing"
)

// A request still in flight when the stop's context ends is cut off: its
// context is cancelled (its handler's database calls return) and Stop
// reports the bounded stop it was asked for, not a failure (homing serve
// exited 1 when its requests waited on a lost PostgreSQL group).
func TestStopCutsOffRequestsStillInFlight(t *testing.T) {
	entered, cut := make(chan struct{}), make(chan struct{})
	s := New("api", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // waits like a call on a database that is gone
		close(cut)
	}), nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/")
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	spent, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown timeout, already over
	if err := s.Stop(spent); err != nil {
		t.Fatalf("Stop = %v, want the cut-off stop reported as done", err)
	}
	<-cut // the handler's context was cancelled (go test's -timeout if not)
}
