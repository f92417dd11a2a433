package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/examples/nexmark"
	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/functions/connectors/blackhole"
	gen "github.com/weirstream/weir/functions/connectors/nexmark"
	"github.com/weirstream/weir/functions/spec"
	"github.com/weirstream/weir/functions/worker"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// nexmarkEvents is each query's default event count, chosen so that a
// run at full speed takes at least ~20 s on the project's 2-vCPU machine
// with both cores to itself (measured events per CPU-second times 2; q7's
// maxes run at parallelism 1); twice that when another process takes a
// core.
var nexmarkEvents = map[string]int64{
	"q0":  50_000_000,
	"q1":  45_000_000,
	"q2":  50_000_000,
	"q3":  40_000_000,
	"q5":  25_000_000,
	"q7":  15_000_000,
	"q8":  40_000_000,
	"q11": 32_000_000,
}

// Published Nexmark throughput of Flink per core (events/s/core), measured
// on the publishers' servers.
var (
	flink113PerCore = map[string]float64{"q0": 155e3, "q1": 158e3, "q2": 175e3, "q3": 152e3, "q5": 22e3, "q7": 12.3e3, "q8": 146e3, "q11": 40e3}
	flink20PerCore  = map[string]float64{"q0": 379e3, "q5": 75e3, "q7": 23e3}
)

const (
	// nexmarkRunTimeout bounds every job run of the harness.
	nexmarkRunTimeout = 10 * time.Minute
	// nexmarkSlots is the slots of the one worker, embedded or distributed.
	nexmarkSlots = 16
	// nexmarkFlushEvery is how many events the hand-written programs
	// generate between two flushes of the batch builder.
	nexmarkFlushEvery = 8192
)

// nexmarkLatencyRun is how long a latency run lasts at its rate: 15 s,
// and 60 s for the queries with event-time windows. When a bounded input
// ends, the final watermark fires every window still open, before its end:
// the blackhole counts those rows apart (early, not in the percentiles);
// the longer runs make them a small part of the output.
func nexmarkLatencyRun(q string) time.Duration {
	switch q {
	case "q5", "q7", "q8", "q11":
		return 60 * time.Second
	}
	return 15 * time.Second
}

// nexmarkTimed lists the queries whose output has no event-time column,
// which the blackhole needs to time rows: for their latency runs (only)
// the last operator also outputs one, column = expression.
var nexmarkTimed = map[string]struct{ op, column, expr string }{
	"q2": {"q2", "dateTime", "dateTime"},      // the bid's
	"q3": {"q3", "dateTime", "left.dateTime"}, // the auction's
	"q5": {"q5", "window_end", "window_end"},  // the join window's end
	"q8": {"q8", "window_end", "window_end"},  // the join window's end
}

var (
	nexmarkModes     = []string{"embedded", "distributed"}
	nexmarkLoads     = []int{50, 80} // latency runs, % of the max rate
	nexmarkIntervals = []string{"off", "10s", "1s"}
)

// nexmarkOptions configure BenchmarkNexmark, from the environment (the
// Makefile's variables): NEXMARK_QUERIES (comma-separated, default all),
// NEXMARK_EVENTS (0: each query's default), NEXMARK_PARALLELISM (default
// 2), NEXMARK_MODES (default embedded,distributed) and NEXMARK_REPORT (the
// Markdown report, default .bench-nexmark.md in the module root).
type nexmarkOptions struct {
	queries     []string
	events      int64
	parallelism int
	modes       []string
	report      string
}

func nexmarkOptionsFromEnv() (nexmarkOptions, error) {
	o := nexmarkOptions{queries: nexmark.Queries, parallelism: 2, modes: nexmarkModes}
	var errs []error
	if v := os.Getenv("NEXMARK_QUERIES"); v != "" {
		o.queries = nil
		for q := range strings.SplitSeq(v, ",") {
			if q = strings.TrimSpace(q); !slices.Contains(nexmark.Queries, q) {
				errs = append(errs, fmt.Errorf("NEXMARK_QUERIES: %q is not a query: want some of %s", q, strings.Join(nexmark.Queries, ",")))
			}
			o.queries = append(o.queries, q)
		}
	}
	if v := os.Getenv("NEXMARK_EVENTS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("NEXMARK_EVENTS: %q: want a whole number ≥ 0 (0: each query's default)", v))
		}
		o.events = n
	}
	if v := os.Getenv("NEXMARK_PARALLELISM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 8 {
			errs = append(errs, fmt.Errorf("NEXMARK_PARALLELISM: %q: want a whole number from 1 to 8", v))
		}
		o.parallelism = n
	}
	if v := os.Getenv("NEXMARK_MODES"); v != "" {
		o.modes = nil
		for m := range strings.SplitSeq(v, ",") {
			if m = strings.TrimSpace(m); !slices.Contains(nexmarkModes, m) {
				errs = append(errs, fmt.Errorf("NEXMARK_MODES: %q is not a mode: want some of %s", m, strings.Join(nexmarkModes, ",")))
			}
			o.modes = append(o.modes, m)
		}
	}
	o.report = os.Getenv("NEXMARK_REPORT")
	if o.report == "" {
		root, err := moduleRoot()
		if err != nil {
			errs = append(errs, err)
		}
		o.report = filepath.Join(root, ".bench-nexmark.md")
	}
	return o, errors.Join(errs...)
}

// eventsOf returns the event count of query q's runs.
func (o nexmarkOptions) eventsOf(q string) int64 {
	if o.events > 0 {
		return o.events
	}
	return nexmarkEvents[q]
}

// moduleRoot is the directory of go.mod, above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// BenchmarkNexmark runs the Nexmark queries (examples/nexmark) with every
// sink replaced by a blackhole, embedded (coordinator and one worker in
// this process, in-process exchange, a directory store) and distributed
// (`weir coordinator` and one `weir worker` process on a real Redis and
// MinIO). For each query and mode:
//
//   - a run at full speed: events/s, CPU-seconds of every process, events
//     per CPU-second, peak RSS;
//   - runs at 50% and 80% of that rate, events timed to the wall clock:
//     p50 and p99 of the time from an event's due time (or its window's
//     end) to the sink.
//
// q0 and q5 also have a hand-written single-threaded Go program over the
// same events ("handwritten"), and q5 runs with checkpoints off, every 10 s
// and every 1 s ("checkpoint-<mode>"). Results go to a Markdown report,
// rewritten after every run. Options: see nexmarkOptions; `make
// bench-nexmark` sets them from QUERIES, EVENTS, PARALLELISM and MODES.
//
//	go test -run '^$' -bench Nexmark -benchtime 1x -count 1 -timeout 120m ./integration/
func BenchmarkNexmark(b *testing.B) {
	o, err := nexmarkOptionsFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	rep := newNexmarkReport(o)
	for _, q := range o.queries {
		b.Run(q, func(b *testing.B) {
			for _, mode := range o.modes {
				b.Run(mode, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						benchNexmarkQuery(b, rep, o, q, mode)
					}
				})
			}
			if q == "q0" || q == "q5" {
				b.Run("handwritten", func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						benchNexmarkHandwritten(b, rep, o, q)
					}
				})
			}
			if q == "q5" {
				for _, mode := range o.modes {
					b.Run("checkpoint-"+mode, func(b *testing.B) {
						benchNexmarkCheckpoints(b, rep, o, q, mode)
					})
				}
			}
		})
	}
}

// nexmarkJob is query q with events events, the job parallelism par (an
// operator that sets its own keeps it), every sink a blackhole under path
// and, for rate > 0, the source limited to rate events/s whose event times
// are their due times on the wall clock.
func nexmarkJob(q string, events int64, par int, rate float64, path string) (*spec.Job, error) {
	js, err := nexmark.Spec(q)
	if err != nil {
		return nil, err
	}
	js.Parallelism = par
	if len(js.Sources) != 1 || js.Sources[0].Type != spec.SourceNexmark {
		return nil, fmt.Errorf("nexmark %s: want one nexmark source, have %d sources", q, len(js.Sources))
	}
	src := &js.Sources[0]
	src.Count = events
	src.Rate = rate
	if rate > 0 {
		opt := spec.NexmarkOpt{}
		if src.Nexmark != nil {
			opt = *src.Nexmark
		}
		opt.EventsPerSecond, opt.Start = rate, "now"
		src.Nexmark = &opt
		if t, ok := nexmarkTimed[q]; ok {
			if err := addOutputColumn(js, t.op, t.column, t.expr); err != nil {
				return nil, fmt.Errorf("nexmark %s: %w", q, err)
			}
		}
	}
	for i := range js.Sinks {
		s := &js.Sinks[i]
		p := path
		if len(js.Sinks) > 1 {
			p += s.Name + "/"
		}
		*s = spec.Sink{Name: s.Name, Input: s.Input, Type: spec.SinkBlackhole, Parallelism: s.Parallelism, Path: p}
	}
	return js, nil
}

// addOutputColumn adds column = expr to the output of the select or join
// operator op of js.
func addOutputColumn(js *spec.Job, op, column, expr string) error {
	for i := range js.Operators {
		o := &js.Operators[i]
		if o.Name != op {
			continue
		}
		switch {
		case o.Select != nil:
			o.Select.Set(column, expr)
		case o.Join != nil && o.Join.Columns != nil:
			o.Join.Columns.Set(column, expr)
		default:
			return fmt.Errorf("operator %s is neither a select nor a join with columns", op)
		}
		return nil
	}
	return fmt.Errorf("no operator %s", op)
}

// nexmarkRun is what one job run measured.
type nexmarkRun struct {
	status coordinator.JobStatus
	wall   time.Duration
	cpu    map[string]time.Duration // by process group: weir, redis, minio
	rss    map[string]int64         // peak bytes, summed over the group
	base   map[string]int64         // resident bytes at the start (distributed only)
	ckpts  []coordinator.CheckpointInfo
}

func (r nexmarkRun) totalCPU() time.Duration {
	var t time.Duration
	for _, c := range r.cpu {
		t += c
	}
	return t
}

func (r nexmarkRun) totalRSS() int64 {
	var t int64
	for _, m := range r.rss {
		t += m
	}
	return t
}

// nexmarkEnv runs jobs in one mode.
type nexmarkEnv interface {
	// run submits js, waits (at most nexmarkRunTimeout) for it to finish
	// and returns what it measured; it fails b if the job does not finish.
	run(b *testing.B, js *spec.Job) nexmarkRun
	// store is where the job's sinks write.
	store() blob.BucketReader
}

func newNexmarkEnv(b *testing.B, mode string) nexmarkEnv {
	if mode == "distributed" {
		return newDistributedEnv(b)
	}
	return newEmbeddedEnv(b)
}

// embeddedEnv is a coordinator and one worker in this process on the
// in-process exchange and control plane and a directory store.
type embeddedEnv struct {
	coord  *coordinator.Coordinator
	bucket blob.Bucket
}

func newEmbeddedEnv(b *testing.B) *embeddedEnv {
	b.Helper()
	bucket := benchDir(b)
	tr, pl := exchange.NewLocal(), control.NewLocal()
	ctx, cancel := context.WithCancel(context.Background())
	coord := coordinator.New(coordinator.Config{Plane: pl, Bucket: bucket, Transport: tr})
	w := worker.New(worker.Config{ID: "nexmark", Slots: nexmarkSlots, Plane: pl, Transport: tr, Bucket: bucket})
	done := make(chan struct{}, 2)
	go func() { _ = coord.Run(ctx); done <- struct{}{} }()
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	b.Cleanup(func() {
		cancel()
		<-done
		<-done
		tr.Close()
		pl.Close()
	})
	poll.UntilNil(b, 10*time.Second, "the worker registered", func() error {
		if ws, err := pl.Workers(ctx); err != nil || len(ws) == 0 {
			return fmt.Errorf("%d workers: %v", len(ws), err)
		}
		return nil
	})
	return &embeddedEnv{coord: coord, bucket: bucket}
}

func (e *embeddedEnv) store() blob.BucketReader { return e.bucket }

func (e *embeddedEnv) run(b *testing.B, js *spec.Job) nexmarkRun {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := testenv.ResetPeakRSS(0); err != nil {
		b.Logf("peak RSS includes earlier runs: %v", err)
	}
	cpu0, _ := testenv.ProcessCPU(0)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), nexmarkRunTimeout)
	defer cancel()
	id, err := e.coord.Submit(ctx, js)
	if err != nil {
		b.Fatalf("submit %s: %v", js.Name, err)
	}
	st, err := e.coord.Wait(ctx, id)
	wall := time.Since(start)
	if err != nil || st.State != coordinator.JobFinished {
		b.Fatalf("job %s: %s %v %s", id, st.State, err, st.Error)
	}
	cpu1, _ := testenv.ProcessCPU(0)
	rss, _ := testenv.ProcessPeakRSS(0)
	cps, err := e.coord.Checkpoints(id)
	if err != nil {
		b.Fatalf("checkpoints of %s: %v", id, err)
	}
	return nexmarkRun{
		status: st, wall: jobWall(st, wall), ckpts: cps,
		cpu: map[string]time.Duration{"weir": cpu1 - cpu0},
		rss: map[string]int64{"weir": rss},
	}
}

// jobWall is the job's run time by the coordinator's clock, from submit to
// its end, or measured if the status lacks either.
func jobWall(st coordinator.JobStatus, measured time.Duration) time.Duration {
	if st.Created.IsZero() || st.Ended.IsZero() || !st.Ended.After(st.Created) {
		return measured
	}
	return st.Ended.Sub(st.Created)
}

// distributedEnv is `weir coordinator` and one `weir worker` with 16
// slots on Redis and MinIO. One worker, not two with 8 slots: on 2 vCPUs
// a second Go runtime adds scheduler and GC contention and nothing else,
// since every channel goes through Redis either way; and one worker
// process compares one to one with the embedded mode.
type distributedEnv struct {
	c    *cluster
	pids map[string][]int
}

func newDistributedEnv(b *testing.B) *distributedEnv {
	b.Helper()
	c := startCluster(b, 1, nexmarkSlots)
	e := &distributedEnv{c: c, pids: map[string][]int{
		"redis": {c.redis.PID()},
		"minio": {c.minio.PID()},
	}}
	c.mu.Lock()
	for _, p := range c.procs {
		e.pids["weir"] = append(e.pids["weir"], p.cmd.Process.Pid)
	}
	c.mu.Unlock()
	if len(e.pids["weir"]) != 2 {
		b.Fatalf("want a coordinator and a worker process, have %d processes", len(e.pids["weir"]))
	}
	return e
}

func (e *distributedEnv) store() blob.BucketReader { return e.c.bucket }

func (e *distributedEnv) cpu(b *testing.B) map[string]time.Duration {
	b.Helper()
	m := map[string]time.Duration{}
	for group, pids := range e.pids {
		for _, pid := range pids {
			c, err := testenv.ProcessCPU(pid)
			if err != nil {
				b.Fatalf("cpu of %s process %d: %v", group, pid, err)
			}
			m[group] += c
		}
	}
	return m
}

func (e *distributedEnv) run(b *testing.B, js *spec.Job) nexmarkRun {
	b.Helper()
	body, err := json.Marshal(js)
	if err != nil {
		b.Fatal(err)
	}
	base := map[string]int64{}
	for group, pids := range e.pids {
		for _, pid := range pids {
			if err := testenv.ResetPeakRSS(pid); err != nil {
				b.Logf("peak RSS of %d includes earlier runs: %v", pid, err)
			}
			m, _ := testenv.ProcessPeakRSS(pid) // just reset: what it holds now
			base[group] += m
		}
	}
	cpu0 := e.cpu(b)
	start := time.Now()
	sub := submitJSON(b, e.c.api, js.Name, body)
	// Poll the API, not the CLI: a process per poll would cost CPU the
	// job needs.
	var st coordinator.JobStatus
	for deadline := start.Add(nexmarkRunTimeout); ; time.Sleep(100 * time.Millisecond) {
		st = coordinator.JobStatus{}
		if err := getJSON(e.c.api+"/api/v1/jobs/"+sub.ID, &st); err != nil {
			b.Logf("status of %s: %v", sub.ID, err)
		}
		if st.State == coordinator.JobFinished {
			break
		}
		if st.State == coordinator.JobFailed || st.State == coordinator.JobCanceled {
			b.Fatalf("job %s: %s %s", sub.ID, st.State, st.Error)
		}
		if time.Now().After(deadline) {
			b.Fatalf("job %s not finished within %s: %s", sub.ID, nexmarkRunTimeout, st.State)
		}
	}
	wall := time.Since(start)
	cpu1 := e.cpu(b)
	r := nexmarkRun{status: st, wall: jobWall(st, wall), cpu: map[string]time.Duration{}, rss: map[string]int64{}, base: base}
	for group := range cpu1 {
		r.cpu[group] = cpu1[group] - cpu0[group]
	}
	for group, pids := range e.pids {
		for _, pid := range pids {
			m, err := testenv.ProcessPeakRSS(pid)
			if err != nil {
				b.Fatalf("peak RSS of %s process %d: %v", group, pid, err)
			}
			r.rss[group] += m
		}
	}
	if err := getJSON(e.c.api+"/api/v1/jobs/"+sub.ID+"/checkpoints", &r.ckpts); err != nil {
		b.Fatalf("checkpoints of %s: %v", sub.ID, err)
	}
	return r
}

// submitJSON submits a job spec in JSON through the coordinator's API at
// api and returns what the coordinator answered.
func submitJSON(b *testing.B, api, name string, body []byte) coordinator.SubmitResponse {
	b.Helper()
	resp, err := httpClient.Post(api+"/api/v1/jobs?file="+name+".json", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatalf("submit %s: %v", name, err)
	}
	var sub coordinator.SubmitResponse
	var apiErr coordinator.APIError
	if resp.StatusCode == 201 {
		err = json.NewDecoder(resp.Body).Decode(&sub)
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&apiErr)
		err = fmt.Errorf("%s: %s", resp.Status, apiErr.Error)
	}
	resp.Body.Close()
	if err != nil {
		b.Fatalf("submit %s: %v", name, err)
	}
	return sub
}

// readLatency merges the latency summaries of the blackhole sinks under
// prefix.
func readLatency(b *testing.B, store blob.BucketReader, prefix string) blackhole.LatencySummary {
	b.Helper()
	ctx := context.Background()
	objs, err := store.List(ctx, prefix)
	if err != nil {
		b.Fatal(err)
	}
	sum := blackhole.LatencySummary{Buckets: map[int64]int64{}}
	var files int
	for _, o := range objs {
		if !strings.HasPrefix(filepath.Base(o.Key), "latency-") || !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		data, err := store.Get(ctx, o.Key)
		if err != nil {
			b.Fatal(err)
		}
		var l blackhole.LatencySummary
		if err := json.Unmarshal(data, &l); err != nil {
			b.Fatalf("%s: %v", o.Key, err)
		}
		sum.Merge(l)
		files++
	}
	if files == 0 {
		b.Fatalf("no latency-*.json under %s: the blackhole sinks wrote nothing", prefix)
	}
	return sum
}

// checkRun fails b unless the job read every event and wrote rows.
func checkRun(b *testing.B, r nexmarkRun, events int64, lat blackhole.LatencySummary) {
	b.Helper()
	if got := r.status.Totals.RecordsIn; got != events {
		b.Fatalf("read %d events, want %d", got, events)
	}
	if lat.Rows == 0 {
		b.Fatal("the blackhole sinks took no rows")
	}
	if late := r.status.Totals.LateDropped + r.status.Totals.LateSide; late != 0 {
		b.Errorf("%d late records: the generator is in order within the watermark bound", late)
	}
}

func benchNexmarkQuery(b *testing.B, rep *nexmarkReport, o nexmarkOptions, q, mode string) {
	res := &nexmarkResult{query: q, mode: mode, latency: map[int]nexmarkLatency{}}
	rep.add(res)
	defer rep.done(b, res)
	env := newNexmarkEnv(b, mode)
	events := o.eventsOf(q)
	path := "bench/" + q + "/latency-max/"
	js, err := nexmarkJob(q, events, o.parallelism, 0, path)
	if err != nil {
		b.Fatal(err)
	}
	r := env.run(b, js)
	lat := readLatency(b, env.store(), path)
	checkRun(b, r, events, lat)
	res.events, res.run, res.rows = events, r, lat.Rows
	eps := float64(events) / r.wall.Seconds()
	b.ReportMetric(eps, "events/s")
	b.ReportMetric(float64(events)/r.totalCPU().Seconds(), "events/cpu-s")
	for _, g := range []string{"weir", "redis", "minio"} {
		if c, ok := r.cpu[g]; ok {
			b.ReportMetric(c.Seconds(), g+"-cpu-s")
		}
	}
	b.ReportMetric(float64(r.totalRSS())/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(lat.Rows), "rows")
	rep.write(b)

	for _, load := range nexmarkLoads {
		rate := math.Round(eps * float64(load) / 100)
		n := int64(rate * nexmarkLatencyRun(q).Seconds())
		path := fmt.Sprintf("bench/%s/latency-%d/", q, load)
		js, err := nexmarkJob(q, n, o.parallelism, rate, path)
		if err != nil {
			b.Fatal(err)
		}
		r := env.run(b, js)
		lat := readLatency(b, env.store(), path)
		checkRun(b, r, n, lat)
		if lat.Timed == 0 {
			b.Errorf("%s at %d%%: no row had an event time to measure latency from", q, load)
		}
		l := nexmarkLatency{rate: rate, events: n, wall: r.wall, rows: lat.Rows, p50: lat.Percentile(0.5), p99: lat.Percentile(0.99)}
		res.latency[load] = l
		b.Logf("%s %s at %d%% (%.0f events/s): %d events in %.1f s, p50 %d ms, p99 %d ms", q, mode, load, rate, n, r.wall.Seconds(), l.p50, l.p99)
		b.ReportMetric(float64(l.p50), fmt.Sprintf("p50@%d%%-ms", load))
		b.ReportMetric(float64(l.p99), fmt.Sprintf("p99@%d%%-ms", load))
		rep.write(b)
	}
}

// benchNexmarkHandwritten runs the hand-written program of query q (q0 or
// q5) over the events of q's weir runs.
func benchNexmarkHandwritten(b *testing.B, rep *nexmarkReport, o nexmarkOptions, q string) {
	events := o.eventsOf(q)
	js, err := nexmarkJob(q, events, o.parallelism, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := gen.ConfigOf(&js.Sources[0], time.Now())
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	cpu0, _ := testenv.ProcessCPU(0)
	start := time.Now()
	var rows int64
	if q == "q0" {
		var sum, extra int64
		rows, sum, extra = handwrittenQ0(cfg, events)
		if sum == 0 || extra == 0 {
			b.Fatalf("q0: sum %d, extra bytes %d", sum, extra)
		}
	} else {
		rows = handwrittenQ5(cfg, events)
	}
	wall := time.Since(start)
	cpu1, _ := testenv.ProcessCPU(0)
	h := nexmarkHand{query: q, events: events, wall: wall, cpu: cpu1 - cpu0, rows: rows}
	report(b, int(events), wall, h.cpu)
	b.ReportMetric(float64(rows), "rows")
	for _, w := range rep.results(q) {
		if w.run.wall == 0 {
			continue
		}
		ratio := w.perCPU() / h.perCPU()
		b.ReportMetric(ratio, "weir-"+w.mode+"/handwritten")
		if q == "q5" && w.rows != rows {
			b.Errorf("q5: the hand-written program found %d hot rows, weir %s %d", rows, w.mode, w.rows)
		}
	}
	rep.addHand(h)
	rep.write(b)
}

// handwrittenQ0 generates events 0..n-1 as weir's source does and touches
// every bid's five columns; it returns the number of bids, the sum of
// auction, bidder, price and dateTime, and the bytes of extra.
func handwrittenQ0(cfg gen.Config, n int64) (bids, sum, extra int64) {
	bb := gen.NewBatchBuilder(cfg, memory.DefaultAllocator)
	defer bb.Release()
	for i := int64(0); i < n; i++ {
		bb.Append(i)
		if (i+1)%nexmarkFlushEvery != 0 && i != n-1 {
			continue
		}
		p, a, bid := bb.Flush()
		releaseAll(p, a)
		if bid == nil {
			continue
		}
		auction := bid.Column(0).(*array.Int64).Int64Values()
		bidder := bid.Column(1).(*array.Int64).Int64Values()
		price := bid.Column(2).(*array.Int64).Int64Values()
		ts := bid.Column(gen.BidDateTime).(*array.Timestamp).Values()
		ex := bid.Column(6).(*array.String)
		for r := range auction {
			sum += auction[r] + bidder[r] + price[r] + int64(ts[r])
			extra += int64(ex.ValueLen(r))
		}
		bids += int64(len(auction))
		bid.Release()
	}
	return bids, sum, extra
}

// handwrittenQ5 generates events 0..n-1 as weir's source does, counts bids
// per auction in 10 s windows sliding by 2 s, fires windows once the
// watermark (the largest event time minus 4 s, as the source's
// maxOutOfOrderness) passes their end, and emits each window's auctions
// with the most bids. It returns how many rows it emitted.
func handwrittenQ5(cfg gen.Config, n int64) int64 {
	const size, slide, bound = 10_000, 2_000, 4_000
	bb := gen.NewBatchBuilder(cfg, memory.DefaultAllocator)
	defer bb.Release()
	open := map[int64]map[int64]int64{} // window start -> auction -> bids
	var hot int64
	var out []byte
	fire := func(wm int64) {
		for start, counts := range open {
			if start+size-1 > wm {
				continue
			}
			var maxn int64
			for _, c := range counts {
				maxn = max(maxn, c)
			}
			for a, c := range counts {
				if c == maxn {
					out = fmt.Appendf(out[:0], `{"auction":%d,"num":%d,"starttime":%d,"endtime":%d}`, a, c, start, start+size)
					hot++
				}
			}
			delete(open, start)
		}
	}
	maxTs, lastFire := int64(math.MinInt64), int64(math.MinInt64)
	for i := int64(0); i < n; i++ {
		bb.Append(i)
		if (i+1)%nexmarkFlushEvery != 0 && i != n-1 {
			continue
		}
		p, a, bid := bb.Flush()
		releaseAll(p, a)
		if bid == nil {
			continue
		}
		auction := bid.Column(0).(*array.Int64).Int64Values()
		ts := bid.Column(gen.BidDateTime).(*array.Timestamp).Values()
		for r, a := range auction {
			t := int64(ts[r])
			last := t - ((t%slide)+slide)%slide
			for s := last; s > t-size; s -= slide {
				counts := open[s]
				if counts == nil {
					counts = map[int64]int64{}
					open[s] = counts
				}
				counts[a]++
			}
			maxTs = max(maxTs, t)
			if wm := maxTs - bound - 1; wm-lastFire >= 1000 {
				lastFire = wm
				fire(wm)
			}
		}
		bid.Release()
	}
	fire(math.MaxInt64)
	return hot
}

func releaseAll(bs ...arrow.RecordBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}

// benchNexmarkCheckpoints runs query q in one mode with checkpoints off,
// every 10 s and every 1 s.
func benchNexmarkCheckpoints(b *testing.B, rep *nexmarkReport, o nexmarkOptions, q, mode string) {
	env := newNexmarkEnv(b, mode)
	events := o.eventsOf(q)
	for _, iv := range nexmarkIntervals {
		b.Run(iv, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				path := fmt.Sprintf("bench/%s/checkpoint-%s-%d/", q, iv, i)
				js, err := nexmarkJob(q, events, o.parallelism, 0, path)
				if err != nil {
					b.Fatal(err)
				}
				if iv != "off" {
					d, err := spec.ParseDuration(iv)
					if err != nil {
						b.Fatal(err)
					}
					js.Checkpoint = &spec.Checkpoint{Interval: d}
				}
				r := env.run(b, js)
				lat := readLatency(b, env.store(), path)
				checkRun(b, r, events, lat)
				c := nexmarkCkpt{query: q, mode: mode, interval: iv, events: events, run: r}
				for _, cp := range r.ckpts {
					if cp.Status == coordinator.CheckpointCompleted && !cp.Final {
						c.completed++
						c.meanMs += cp.Duration * 1000
					}
				}
				if c.completed > 0 {
					c.meanMs /= float64(c.completed)
				}
				report(b, int(events), r.wall, r.totalCPU())
				b.ReportMetric(float64(c.completed), "checkpoints")
				b.ReportMetric(c.meanMs, "ckpt-ms")
				rep.addCkpt(c)
				rep.write(b)
			}
		})
	}
}

// nexmarkResult is one query in one mode.
type nexmarkResult struct {
	query, mode string
	events      int64
	run         nexmarkRun
	rows        int64
	latency     map[int]nexmarkLatency // by load, % of the max rate
	err         string
}

func (r *nexmarkResult) perCPU() float64 {
	return float64(r.events) / r.run.totalCPU().Seconds()
}

type nexmarkLatency struct {
	rate     float64
	events   int64
	wall     time.Duration
	rows     int64
	p50, p99 int64 // ms, -1 for no timed rows
}

type nexmarkHand struct {
	query  string
	events int64
	wall   time.Duration
	cpu    time.Duration
	rows   int64
}

func (h nexmarkHand) perCPU() float64 { return float64(h.events) / h.cpu.Seconds() }

type nexmarkCkpt struct {
	query, mode, interval string
	events                int64
	run                   nexmarkRun
	completed             int
	meanMs                float64
}

func (c nexmarkCkpt) perCPU() float64 { return float64(c.events) / c.run.totalCPU().Seconds() }

// nexmarkReport accumulates the results of one BenchmarkNexmark and
// writes them as Markdown, whole, after every run, so that an interrupted
// benchmark leaves what it measured.
type nexmarkReport struct {
	opts    nexmarkOptions
	started time.Time
	machine string
	load    string // load average at the start
	mu      struct {
		sync.Mutex
		runs  []*nexmarkResult
		hand  []nexmarkHand
		ckpts []nexmarkCkpt
	}
}

func newNexmarkReport(o nexmarkOptions) *nexmarkReport {
	return &nexmarkReport{opts: o, started: time.Now(), machine: machineInfo(), load: loadAverage()}
}

// loadAverage is the 1, 5 and 15 minute load averages of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func (r *nexmarkReport) add(res *nexmarkResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.runs = append(r.mu.runs, res)
}

// done records why a run failed, if it did, and rewrites the report.
func (r *nexmarkReport) done(b *testing.B, res *nexmarkResult) {
	if b.Failed() {
		r.mu.Lock()
		res.err = "failed: see " + b.Name() + " in the test output"
		r.mu.Unlock()
	}
	r.write(b)
}

func (r *nexmarkReport) addHand(h nexmarkHand) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.hand = append(r.mu.hand, h)
}

func (r *nexmarkReport) addCkpt(c nexmarkCkpt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.ckpts = append(r.mu.ckpts, c)
}

// results returns the finished max-rate runs of query q.
func (r *nexmarkReport) results(q string) []*nexmarkResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*nexmarkResult
	for _, res := range r.mu.runs {
		if res.query == q && res.run.wall > 0 {
			out = append(out, res)
		}
	}
	return out
}

func (r *nexmarkReport) write(b *testing.B) {
	r.mu.Lock()
	md := r.markdown()
	r.mu.Unlock()
	if err := os.WriteFile(r.opts.report, []byte(md), 0o644); err != nil {
		b.Errorf("write the report: %v", err)
	}
}

// machineInfo describes this machine for the report.
func machineInfo() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "? GiB"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) == 2 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						mem = fmt.Sprintf("%.0f GiB", kb/(1<<20))
					}
				}
			}
		}
	}
	redis := "redis-server not found"
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		redis = strings.TrimSpace(string(out))
		for _, f := range strings.Fields(redis) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				redis = "Redis " + v
			}
		}
	}
	return fmt.Sprintf("%s, %d vCPU, %s, %s/%s, %s, %s", model, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), redis)
}

// command is how to run this benchmark again with the same options.
func (r *nexmarkReport) command() string {
	o := r.opts
	events := "0"
	if o.events > 0 {
		events = strconv.FormatInt(o.events, 10)
	}
	mk := fmt.Sprintf("make bench-nexmark QUERIES=%s EVENTS=%s PARALLELISM=%d MODES=%s",
		strings.Join(o.queries, ","), events, o.parallelism, strings.Join(o.modes, ","))
	var flags []string
	for _, a := range os.Args[1:] {
		for _, f := range []string{"bench", "benchtime", "count", "timeout", "cpuprofile"} {
			if strings.HasPrefix(a, "-test."+f+"=") {
				flags = append(flags, strings.TrimPrefix(a, "-test."))
			}
		}
	}
	return fmt.Sprintf("`%s` (go test flags: `%s`)", mk, strings.Join(flags, " "))
}

func (r *nexmarkReport) markdown() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format+"\n", args...) }
	p("# Nexmark")
	p("")
	p("- Command: %s", r.command())
	p("- Date: %s (report written %s)", r.started.Format("2006-01-02 15:04 MST"), time.Now().Format("15:04 MST"))
	p("- Machine: %s; everything on loopback. Load average when the benchmark started: %s; now: %s. "+
		"A shared machine: another process's load lowers events/s (wall) but hardly events per CPU-second.", r.machine, r.load, loadAverage())
	p("- Job parallelism %d (operators that set their own keep it); every sink is a blackhole.", r.opts.parallelism)
	p("- Modes: **embedded** = coordinator and one worker (%d slots) in the benchmark process, in-process exchange, a directory store; "+
		"**distributed** = `weir coordinator` and one `weir worker` (%d slots) process, Redis exchange and control plane, MinIO store. "+
		"One worker: every channel goes through Redis either way, and on 2 vCPUs a second worker process would only add a second Go runtime.", nexmarkSlots, nexmarkSlots)
	p("- CPU-s: user+system time from /proc/<pid>/stat over the run (weir = the benchmark process when embedded; coordinator + worker when distributed). " +
		"The event generator runs in weir's source tasks, so its cost is weir's. Peak RSS: VmHWM summed over the processes, reset before the max-rate run.")
	p("- Flink ratios: weir's events per CPU-second over Flink's published events/s per core " +
		"(Flink 1.13: q0 155K, q1 158K, q2 175K, q3 152K, q5 22K, q7 12.3K, q8 146K, q11 40K; Flink 2.0: q0 379K, q5 75K, q7 23K). " +
		"These are published per-core figures, measured on the publishers' servers, not this machine.")
	p("- Latency: runs at 50%% and 80%% of the max run's events/s, for %s (q5, q7, q8, q11: %s), each event's time being its due time on the wall clock; "+
		"latency is the arrival at the sink minus the row's event time. For windowed queries (q5, q7, q8, q11) a row's event time is its window's end - 1 ms, "+
		"so the latency includes the wait for the watermark (the source's maxOutOfOrderness, 4 s) after the window ends; a row's wait from its events is longer by up to the window size. "+
		"When the input ends, the final watermark fires the windows still open, before their end: those rows' event time is still ahead of the clock, "+
		"and they are left out of the percentiles (counted as early; hence also the longer runs for windowed queries). "+
		"q2, q3, q5 and q8 output no event-time column; in their latency runs (only) the last operator also outputs one: "+
		"q2 the bid's dateTime, q3 the auction's dateTime, q5 and q8 the join window's end.", nexmarkLatencyRun("q0"), nexmarkLatencyRun("q5"))
	p("")
	p("## Throughput and latency")
	p("")
	p("| query | mode | events | wall s | events/s | CPU-s weir / redis / minio | events per CPU-s | × Flink 1.13 /core | × Flink 2.0 /core | p50 / p99 ms @50%% | p50 / p99 ms @80%% | peak RSS MiB weir / all |")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, res := range r.mu.runs {
		if res.run.wall == 0 {
			msg := res.err
			if msg == "" {
				msg = "running"
			}
			p("| %s | %s | %s |  |  |  |  |  |  |  |  |  |", res.query, res.mode, msg)
			continue
		}
		run := res.run
		cpu := []string{fmtSec(run.cpu["weir"])}
		if _, ok := run.cpu["redis"]; ok {
			cpu = append(cpu, fmtSec(run.cpu["redis"]), fmtSec(run.cpu["minio"]))
		}
		lat := func(load int) string {
			l, ok := res.latency[load]
			if !ok {
				return ""
			}
			return fmt.Sprintf("%s / %s", fmtMs(l.p50), fmtMs(l.p99))
		}
		p("| %s | %s | %s | %.1f | %s | %s | **%s** | %s | %s | %s | %s | %.0f / %.0f |",
			res.query, res.mode, fmtCount(float64(res.events)), run.wall.Seconds(), fmtCount(float64(res.events)/run.wall.Seconds()),
			strings.Join(cpu, " / "), fmtCount(res.perCPU()), ratio(res.perCPU(), flink113PerCore[res.query]), ratio(res.perCPU(), flink20PerCore[res.query]),
			lat(50), lat(80), float64(run.rss["weir"])/(1<<20), float64(run.totalRSS())/(1<<20))
		if res.err != "" {
			p("| %s | %s | %s |  |  |  |  |  |  |  |  |  |", res.query, res.mode, res.err)
		}
	}
	p("")
	p("Latency runs: the rate asked for and the rate reached (below it, the job fell behind and latency grew with the backlog).")
	p("")
	p("| query | mode | load | events/s asked | events/s reached | events | rows | p50 ms | p99 ms |")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, res := range r.mu.runs {
		for _, load := range nexmarkLoads {
			if l, ok := res.latency[load]; ok {
				p("| %s | %s | %d%% | %s | %s | %s | %d | %s | %s |", res.query, res.mode, load, fmtCount(l.rate),
					fmtCount(float64(l.events)/l.wall.Seconds()), fmtCount(float64(l.events)), l.rows, fmtMs(l.p50), fmtMs(l.p99))
			}
		}
	}
	p("")
	p("## Hand-written single-threaded Go")
	p("")
	p("The same events (the same generator and batch builder, flushed every %d events), then q0: the five bid columns summed; "+
		"q5: per-auction counts in 10 s windows sliding by 2 s in a map, fired as the watermark passes, the hottest auctions of each window emitted. "+
		"The limit for one core, not a competitor.", nexmarkFlushEvery)
	p("")
	p("| query | events | wall s | events per CPU-s | rows | weir embedded / hand-written | weir distributed / hand-written |")
	p("| --- | --- | --- | --- | --- | --- | --- |")
	for _, h := range r.mu.hand {
		ratios := map[string]string{}
		for _, res := range r.mu.runs {
			if res.query == h.query && res.run.wall > 0 {
				ratios[res.mode] = fmt.Sprintf("%.2f", res.perCPU()/h.perCPU())
			}
		}
		p("| %s | %s | %.1f | %s | %d | %s | %s |", h.query, fmtCount(float64(h.events)), h.wall.Seconds(), fmtCount(h.perCPU()), h.rows, ratios["embedded"], ratios["distributed"])
	}
	p("")
	p("## Checkpoint overhead, q5")
	p("")
	p("Checkpoints of the window and join state: to the directory store (embedded) or MinIO (distributed). Completed checkpoints exclude the final one.")
	p("")
	p("| mode | checkpoints | events | wall s | events per CPU-s | vs off | completed | mean checkpoint ms |")
	p("| --- | --- | --- | --- | --- | --- | --- | --- |")
	off := map[string]float64{}
	for _, c := range r.mu.ckpts {
		if c.interval == "off" {
			off[c.mode] = c.perCPU()
		}
	}
	for _, c := range r.mu.ckpts {
		vs := ""
		if o := off[c.mode]; o > 0 {
			vs = fmt.Sprintf("%.2f", c.perCPU()/o)
		}
		p("| %s | %s | %s | %.1f | %s | %s | %d | %.0f |", c.mode, c.interval, fmtCount(float64(c.events)), c.run.wall.Seconds(), fmtCount(c.perCPU()), vs, c.completed, c.meanMs)
	}
	p("")
	p("## Targets")
	p("")
	for _, line := range r.targets() {
		p("- %s", line)
	}
	return w.String()
}

// targets checks the results against the goals, per core meaning per
// CPU-second of every process.
func (r *nexmarkReport) targets() []string {
	var out []string
	check := func(ok bool, format string, args ...any) {
		verdict := "MISS"
		if ok {
			verdict = "PASS"
		}
		out = append(out, fmt.Sprintf("**%s** "+format, append([]any{verdict}, args...)...))
	}
	perCPU := map[string]map[string]float64{}
	for _, res := range r.mu.runs {
		if res.run.wall == 0 {
			continue
		}
		if perCPU[res.query] == nil {
			perCPU[res.query] = map[string]float64{}
		}
		perCPU[res.query][res.mode] = res.perCPU()
		f13 := flink113PerCore[res.query]
		check(res.perCPU() >= 2*f13, "%s %s ≥ 2× Flink 1.13 per core: %s vs 2 × %s events/s/core (%s)",
			res.query, res.mode, fmtCount(res.perCPU()), fmtCount(f13), ratio(res.perCPU(), f13))
		if f20, ok := flink20PerCore[res.query]; ok {
			check(res.perCPU() >= f20, "%s %s ≥ Flink 2.0 per core: %s vs %s events/s/core (%s)",
				res.query, res.mode, fmtCount(res.perCPU()), fmtCount(f20), ratio(res.perCPU(), f20))
		}
	}
	for _, q := range []string{"q0", "q5"} {
		e, d := perCPU[q]["embedded"], perCPU[q]["distributed"]
		if e > 0 && d > 0 {
			check(d >= 0.7*e, "%s distributed ≥ 0.7× embedded: %s vs %s events per CPU-s (%.2f×)", q, fmtCount(d), fmtCount(e), d/e)
		}
	}
	for _, h := range r.mu.hand {
		if h.query != "q5" {
			continue
		}
		for _, mode := range nexmarkModes {
			if w := perCPU["q5"][mode]; w > 0 {
				check(w >= 0.3*h.perCPU(), "q5 %s ≥ 0.3× hand-written: %s vs %s events per CPU-s (%.2f×)", mode, fmtCount(w), fmtCount(h.perCPU()), w/h.perCPU())
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "no results yet")
	}
	return out
}

func ratio(v, ref float64) string {
	if ref == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", v/ref)
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }

func fmtMs(ms int64) string {
	if ms < 0 {
		return "n/a"
	}
	return strconv.FormatInt(ms, 10)
}

// fmtCount writes 1234567 as 1.23M.
func fmtCount(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
