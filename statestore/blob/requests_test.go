package blob_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/statestore/blob"
)

// TestRequestsShared checks that buckets opened with one Options.Requests
// count into it, and that it exports weir_store_requests_total as a
// counter with every op.
func TestRequestsShared(t *testing.T) {
	r := blob.NewRequests()
	var bs []blob.Bucket
	for range 2 {
		b, err := blob.Open(t.Context(), t.TempDir(), blob.Options{Requests: r})
		if err != nil {
			t.Fatal(err)
		}
		if blob.RequestsOf(b) != r || blob.RequestsOf(blob.NewPrefixed(b, "x")) != r {
			t.Fatal("RequestsOf is not the counter given to Open")
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		if err := b.Put(t.Context(), "k", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Counts()["put"]; got != 2 {
		t.Fatalf("put: %d, want 2", got)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != "weir_store_requests_total" || fams[0].GetType().String() != "COUNTER" {
		t.Fatalf("families: %v", fams)
	}
	ops := map[string]float64{}
	for _, m := range fams[0].GetMetric() {
		ops[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	for _, op := range []string{"put", "get", "head", "list", "delete", "copy", "other"} {
		if _, ok := ops[op]; !ok {
			t.Errorf("no series for op %q", op)
		}
	}
	if ops["put"] != 2 {
		t.Errorf("put series: %v, want 2", ops["put"])
	}
}
