package exchange_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/exchangetest"
)

func newLocal(t *testing.T) exchange.Transport {
	tr := exchange.NewLocal()
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestLocal(t *testing.T) {
	exchangetest.TestTransport(t, newLocal)
}

// TestLocalPayloadByReference: the reader gets the writer's slice itself.
func TestLocalPayloadByReference(t *testing.T) {
	tr := newLocal(t)
	ch := exchange.Channel{Job: "j", Edge: "e", ConsumerVertex: "v"}
	w, err := tr.NewWriter(ch)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.NewReader(context.Background(), []exchange.Channel{ch}, exchange.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("payload")
	if err := w.Write(context.Background(), exchange.Entry{Kind: exchange.KindData, Payload: p}); err != nil {
		t.Fatal(err)
	}
	_, e, ok, err := r.Read(context.Background(), time.Second)
	if err != nil || !ok {
		t.Fatalf("read: ok %t, err %v", ok, err)
	}
	if &e.Payload[0] != &p[0] || len(e.Payload) != len(p) {
		t.Fatal("payload was copied")
	}
}
