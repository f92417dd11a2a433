package nexmark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	gen "github.com/weirstream/weir/functions/connectors/nexmark"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/worker"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
)

// The test event set: 60,000 events over 60 s of event time (1,000 per
// second), so that the 10 s windows of q5, q7, q8 and q11 are many and
// full.
const (
	testEvents = 60_000
	testRate   = 1000
)

// testSpec loads query q with the test event set.
func testSpec(t *testing.T, q string) *spec.Job {
	t.Helper()
	js, err := Spec(q)
	if err != nil {
		t.Fatal(err)
	}
	src := &js.Sources[0]
	src.Count = testEvents
	src.Nexmark.EventsPerSecond = testRate
	return js
}

// runJob runs js to the end on an in-process coordinator and worker (the
// embedded mode) and returns the store its sinks wrote to.
func runJob(t *testing.T, js *spec.Job) blob.Bucket {
	t.Helper()
	bucket, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	tr, pl := exchange.NewLocal(), control.NewLocal()
	defer tr.Close()
	defer pl.Close()
	ctx, cancel := context.WithCancel(t.Context())
	coord := coordinator.New(coordinator.Config{Plane: pl, Bucket: bucket, Transport: tr})
	w := worker.New(worker.Config{ID: "nexmark-test", Slots: 16, Plane: pl, Transport: tr, Bucket: bucket})
	done := make(chan struct{}, 2)
	go func() { _ = coord.Run(ctx); done <- struct{}{} }()
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()
	poll.Until(t, 10*time.Second, "the worker registered", func() bool {
		ws, err := pl.Workers(ctx)
		return err == nil && len(ws) > 0
	})
	id, err := coord.Submit(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer wcancel()
	st, err := coord.Wait(wctx, id)
	if err != nil || st.State != coordinator.JobFinished {
		t.Fatalf("job %s: %s %v %s", id, st.State, err, st.Error)
	}
	if st.Totals.RecordsIn != js.Sources[0].Count {
		t.Errorf("read %d events, want %d", st.Totals.RecordsIn, js.Sources[0].Count)
	}
	if late := st.Totals.LateDropped + st.Totals.LateSide; late != 0 {
		t.Errorf("%d late records: the generator is in order within the watermark bound", late)
	}
	return bucket
}

// readRows returns the JSON lines under prefix, each re-encoded with
// sorted keys and numbers as float64, sorted.
func readRows(t *testing.T, b blob.BucketReader, prefix string) []string {
	t.Helper()
	objs, err := b.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, o := range objs {
		data, err := b.Get(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", o.Key, err)
			}
			rows = append(rows, canonical(t, m))
		}
	}
	sort.Strings(rows)
	return rows
}

// row is one expected output row; timestamps are Unix ms in ts fields.
type row map[string]any

// ts marks a value as a timestamp, written as weir writes them.
type ts int64

func canonical(t *testing.T, m map[string]any) string {
	out := map[string]any{}
	for k, v := range m {
		switch x := v.(type) {
		case ts:
			out[k] = time.UnixMilli(int64(x)).UTC().Format("2006-01-02T15:04:05.000Z")
		case int64:
			out[k] = float64(x)
		default:
			out[k] = x
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// check compares the query's output with the expected rows, as multisets.
func check(t *testing.T, q string, b blob.BucketReader, want []row) {
	t.Helper()
	got := readRows(t, b, "nexmark/"+q+"/")
	exp := make([]string, len(want))
	for i, r := range want {
		exp[i] = canonical(t, r)
	}
	sort.Strings(exp)
	if len(exp) == 0 {
		t.Fatalf("%s: the independent computation expects no rows: the test set is too small to check anything", q)
	}
	if slices.Equal(got, exp) {
		t.Logf("%s: %d rows equal the independent computation", q, len(got))
		return
	}
	t.Errorf("%s: %d rows, want %d", q, len(got), len(exp))
	missing, extra := diff(exp, got), diff(got, exp)
	for i, r := range missing {
		if i == 5 {
			t.Errorf("... %d more missing", len(missing)-5)
			break
		}
		t.Errorf("missing %s", r)
	}
	for i, r := range extra {
		if i == 5 {
			t.Errorf("... %d more unexpected", len(extra)-5)
			break
		}
		t.Errorf("unexpected %s", r)
	}
}

// diff returns the rows of a not in b (sorted multisets).
func diff(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) {
		switch {
		case j >= len(b) || a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			j++
		default:
			i++
			j++
		}
	}
	return out
}

// events generates the test event set with the generator's reference
// (plain Go) path, as the source's configuration says.
func events(t *testing.T, js *spec.Job) (persons []gen.Person, auctions []gen.Auction, bids []gen.Bid) {
	t.Helper()
	cfg, err := gen.ConfigOf(&js.Sources[0], time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := gen.NewGenerator(cfg)
	for n := int64(0); n < js.Sources[0].Count; n++ {
		e := g.Event(n)
		switch {
		case e.Person != nil:
			persons = append(persons, *e.Person)
		case e.Auction != nil:
			auctions = append(auctions, *e.Auction)
		default:
			bids = append(bids, *e.Bid)
		}
	}
	return persons, auctions, bids
}

// floorTo returns the start of the size-aligned window holding ts.
func floorTo(ts, size int64) int64 {
	return ts - ((ts%size)+size)%size
}

func expectQ0(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	var want []row
	for _, b := range bids {
		want = append(want, row{"auction": b.Auction, "bidder": b.Bidder, "price": b.Price, "dateTime": ts(b.DateTime), "extra": b.Extra})
	}
	return want
}

func TestQ0(t *testing.T) {
	js := testSpec(t, "q0")
	js.Sources[0].Count = testEvents / 3 // stateless: its output is nearly every event, checked row by row
	check(t, "q0", runJob(t, js), expectQ0(t, js))
}

func expectQ1(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	var want []row
	for _, b := range bids {
		want = append(want, row{"auction": b.Auction, "bidder": b.Bidder, "price": 0.908 * float64(b.Price), "dateTime": ts(b.DateTime), "extra": b.Extra})
	}
	return want
}

func TestQ1(t *testing.T) {
	js := testSpec(t, "q1")
	js.Sources[0].Count = testEvents / 3 // stateless: its output is nearly every event, checked row by row
	check(t, "q1", runJob(t, js), expectQ1(t, js))
}

func expectQ2(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	var want []row
	for _, b := range bids {
		if b.Auction%123 == 0 {
			want = append(want, row{"auction": b.Auction, "price": b.Price})
		}
	}
	return want
}

func TestQ2(t *testing.T) {
	js := testSpec(t, "q2")
	check(t, "q2", runJob(t, js), expectQ2(t, js))
}

func expectQ3(t *testing.T, js *spec.Job) []row {
	persons, auctions, _ := events(t, js)
	var want []row
	for _, a := range auctions {
		if a.Category != 10 {
			continue
		}
		for _, p := range persons {
			if p.ID == a.Seller && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
				want = append(want, row{"name": p.Name, "city": p.City, "state": p.State, "id": a.ID})
			}
		}
	}
	return want
}

func TestQ3(t *testing.T) {
	js := testSpec(t, "q3")
	check(t, "q3", runJob(t, js), expectQ3(t, js))
}

func expectQ5(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	const size, slide = 10_000, 2_000
	type win struct{ start, auction int64 }
	counts := map[win]int64{}
	for _, b := range bids {
		// Every sliding window [start, start+size) that holds the bid.
		for start := floorTo(b.DateTime, slide); start > b.DateTime-size; start -= slide {
			counts[win{start, b.Auction}]++
		}
	}
	maxn := map[int64]int64{}
	for w, n := range counts {
		maxn[w.start] = max(maxn[w.start], n)
	}
	var want []row
	for w, n := range counts {
		if n >= maxn[w.start] {
			want = append(want, row{"auction": w.auction, "num": n, "starttime": ts(w.start), "endtime": ts(w.start + size)})
		}
	}
	return want
}

func TestQ5(t *testing.T) {
	js := testSpec(t, "q5")
	check(t, "q5", runJob(t, js), expectQ5(t, js))
}

func expectQ7(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	const size = 10_000
	maxPrice := map[int64]int64{} // window end -> highest price
	for _, b := range bids {
		end := floorTo(b.DateTime, size) + size
		if p, ok := maxPrice[end]; !ok || b.Price > p {
			maxPrice[end] = b.Price
		}
	}
	var want []row
	for _, b := range bids {
		for end, p := range maxPrice {
			// B.dateTime BETWEEN B1.dateTime - 10 s AND B1.dateTime
			if b.Price == p && end-size <= b.DateTime && b.DateTime <= end {
				want = append(want, row{"auction": b.Auction, "price": b.Price, "bidder": b.Bidder, "dateTime": ts(b.DateTime), "extra": b.Extra})
			}
		}
	}
	return want
}

func TestQ7(t *testing.T) {
	js := testSpec(t, "q7")
	check(t, "q7", runJob(t, js), expectQ7(t, js))
}

func expectQ8(t *testing.T, js *spec.Job) []row {
	persons, auctions, _ := events(t, js)
	const size = 10_000
	type sellerWin struct{ seller, start int64 }
	sold := map[sellerWin]bool{}
	for _, a := range auctions {
		sold[sellerWin{a.Seller, floorTo(a.DateTime, size)}] = true
	}
	type personWin struct {
		id    int64
		name  string
		start int64
	}
	seen := map[personWin]bool{}
	var want []row
	for _, p := range persons {
		pw := personWin{p.ID, p.Name, floorTo(p.DateTime, size)}
		if sold[sellerWin{p.ID, pw.start}] && !seen[pw] {
			seen[pw] = true
			want = append(want, row{"id": p.ID, "name": p.Name, "starttime": ts(pw.start)})
		}
	}
	return want
}

func TestQ8(t *testing.T) {
	js := testSpec(t, "q8")
	check(t, "q8", runJob(t, js), expectQ8(t, js))
}

func expectQ11(t *testing.T, js *spec.Job) []row {
	_, _, bids := events(t, js)
	const gap = 10_000
	times := map[int64][]int64{}
	for _, b := range bids {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var want []row
	for bidder, tss := range times {
		slices.Sort(tss)
		// Sessions [first, last+gap): a bid at or before the current
		// session's end joins it (windows that touch merge).
		start, last, n := tss[0], tss[0], int64(0)
		for _, x := range tss {
			if x > last+gap {
				want = append(want, row{"bidder": bidder, "bid_count": n, "starttime": ts(start), "endtime": ts(last + gap)})
				start, n = x, 0
			}
			last = x
			n++
		}
		want = append(want, row{"bidder": bidder, "bid_count": n, "starttime": ts(start), "endtime": ts(last + gap)})
	}
	return want
}

func TestQ11(t *testing.T) {
	js := testSpec(t, "q11")
	check(t, "q11", runJob(t, js), expectQ11(t, js))
}

// The queries are the ones the docs list, and every spec is valid.
func TestSpecs(t *testing.T) {
	for _, q := range Queries {
		js, err := Spec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if js.Name != "nexmark-"+q || len(js.Sources) != 1 || js.Sources[0].Type != spec.SourceNexmark {
			t.Errorf("%s: job %q, sources %v", q, js.Name, js.Sources)
		}
		if !strings.HasPrefix(js.Sinks[0].Path, "nexmark/"+q+"/") {
			t.Errorf("%s: sink path %q", q, js.Sinks[0].Path)
		}
	}
	if _, err := Spec("q99"); err == nil || !strings.Contains(err.Error(), "no such query") {
		t.Errorf("q99: %v", err)
	}
}
