package redis

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/connector/connectortest"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/integration/testenv"
)

// TestRedisPending: a source whose positions are at the end of its
// streams has nothing pending; an entry added to a stream, a stream the
// positions do not name but that has entries, and an old single-stream
// position behind its stream's end are pending.
func TestRedisPending(t *testing.T) {
	connectortest.CheckLeaks(t)
	r := testenv.StartRedis(t)
	ctx := context.Background()
	a1 := connXAdd(t, r, "p-a", "data", `{"id":1}`)
	b1 := connXAdd(t, r, "p-b", "data", `{"id":2}`)
	src := &spec.Source{Name: "in", Type: spec.SourceRedis, Addr: r.Addr, Streams: spec.StreamNames{"p-*"},
		Schema: connectortest.Schema("id", "int64")}
	pos := func(s string) []json.RawMessage { return []json.RawMessage{json.RawMessage(s)} }
	check := func(what string, positions []json.RawMessage, want bool) {
		t.Helper()
		got, err := pending(ctx, src, positions, connector.PendingEnv{})
		if err != nil || got != want {
			t.Errorf("%s: pending %v (%v), want %v", what, got, err, want)
		}
	}
	atEnd := []json.RawMessage{json.RawMessage(`{"splits":{"p-a":{"id":"` + a1 + `"}}}`), json.RawMessage(`{"splits":{"p-b":{"id":"` + b1 + `"}}}`)}
	check("at the end of both streams", atEnd, false)
	check("a stream the positions do not name", pos(`{"splits":{"p-a":{"id":"`+a1+`"}}}`), true)
	connXAdd(t, r, "p-b", "data", `{"id":3}`)
	check("an entry after the position", atEnd, true)

	one := &spec.Source{Name: "in", Type: spec.SourceRedis, Addr: r.Addr, Stream: "p-a", Schema: connectortest.Schema("id", "int64")}
	if got, err := pending(ctx, one, pos(`{"id":"0-0"}`), connector.PendingEnv{}); err != nil || !got {
		t.Errorf("an old position before the stream's entry: %v %v", got, err)
	}
	if got, err := pending(ctx, one, pos(`{"id":"`+a1+`"}`), connector.PendingEnv{}); err != nil || got {
		t.Errorf("an old position at the stream's end: %v %v", got, err)
	}
	if idAfter("5-0", "10-0") || !idAfter("10-0", "9-7") || !idAfter("3-2", "3-1") || idAfter("3-1", "3-1") {
		t.Error("idAfter compares ids as text, not numbers")
	}
}
