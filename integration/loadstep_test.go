package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// TestAutoscaleLoadStep runs `weir up --min-workers 1 --max-workers 6
// --slots 1` (one slot a worker, so workers follow the parallelism) and a keyed job reading 4 redis streams into row-cost (1 ms a
// row: 1,000 rows per busy second per subtask), fed at 500 events/s, then
// 1,500/s, then 500/s again. The autoscaler scales the job up within 30 s
// of the step (the source too: its streams are splits) and back down
// after the load falls; workers follow; weir jobs stop at the end; every
// event is in the output once. It logs each decision's time after the
// step, each rescale's pause and the backlog every 2 s.
func TestAutoscaleLoadStep(t *testing.T) {
	t.Parallel() // its one timing bound (30 s) is generous
	c, port := newCluster(t, nil, "")
	t.Cleanup(c.stopAll)
	c.start("up", "up", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--min-workers", "1", "--max-workers", "6", "--slots", "1", "--scale-down-delay", "5s")
	c.waitWorkers(t, 1)
	specPath := writeSpec(t, `
job: loadstep
parallelism: 1
checkpoint: {interval: 1s, timeout: 20s}
autoscale: {enabled: true, maxParallelism: 6, window: 5s, stabilization: 10s, catchUp: 20s}
sources:
  - {name: rides, type: redis, streams: "loadstep-*", schema: {id: int64, k: int64}}
operators:
  - {name: cost, input: rides, keyBy: [k], function: row-cost, config: {cost: 1ms}}
sinks:
  - {name: out, input: cost, type: files, path: loadstep/, format: jsonl}
`)
	rdb := goredis.NewClient(&goredis.Options{Addr: c.redis.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for s := range 4 { // events 0-3: the streams exist before the job lists them
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: fmt.Sprintf("loadstep-%d", s), Values: map[string]any{"data": fmt.Sprintf(`{"id":%d,"k":%d}`, s, s)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	id := c.deploy(specPath)
	c.waitState(id, coordinator.JobRunning, time.Minute)

	// The load: phases of (events/s, seconds), bounded in count and time.
	phases := []struct{ rate, seconds int }{{500, 12}, {1500, 25}, {500, 25}}
	var sent atomic.Int64
	sent.Store(4)
	start := time.Now()
	step := start.Add(time.Duration(phases[0].seconds) * time.Second)
	fall := step.Add(time.Duration(phases[1].seconds) * time.Second)
	genDone := make(chan error, 1)
	go func() {
		n := int64(4)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for _, ph := range phases {
			end := time.Now().Add(time.Duration(ph.seconds) * time.Second)
			due := float64(0)
			for time.Now().Before(end) {
				<-tick.C
				due += float64(ph.rate) / 20
				pipe := rdb.Pipeline()
				for ; due >= 1; due-- {
					pipe.XAdd(ctx, &goredis.XAddArgs{Stream: fmt.Sprintf("loadstep-%d", n%4),
						Values: map[string]any{"data": fmt.Sprintf(`{"id":%d,"k":%d}`, n, n%100)}})
					n++
				}
				if _, err := pipe.Exec(ctx); err != nil {
					genDone <- err
					return
				}
				sent.Store(n)
			}
		}
		genDone <- nil
	}()
	// Watch: workers, parallelism and backlog every 2 s until the load ends.
	maxWorkers, maxPar := 0, 0
	watch := time.NewTicker(2 * time.Second)
	defer watch.Stop()
	var genErr error
loop:
	for {
		select {
		case genErr = <-genDone:
			break loop
		case <-watch.C:
			st, err := c.status(id)
			if err != nil {
				continue
			}
			ws, _ := c.workers()
			maxWorkers = max(maxWorkers, len(ws))
			par := 0
			for _, v := range st.Vertices {
				if strings.HasPrefix(v.Name, "cost") || v.Name == "rides" {
					par = max(par, v.Parallelism)
				}
			}
			maxPar = max(maxPar, par)
			t.Logf("%5.1fs sent %6d, backlog %5d, parallelism %d, %d workers, %s", time.Since(start).Seconds(), sent.Load(), st.Totals.Backlog, par, len(ws), st.State)
		}
	}
	if genErr != nil {
		t.Fatalf("load generator: %v", genErr)
	}
	total := int(sent.Load())
	poll.UntilNil(t, 2*time.Minute, fmt.Sprintf("all %d events in the output", total), func() error {
		if n := len(readOutput(t, c.bucket, "loadstep/")); n < total {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	if out, err := c.weir("jobs", "stop", "--wait", id); err != nil {
		t.Fatalf("jobs stop: %v\n%s", err, out)
	}
	st, err := c.status(id)
	if err != nil {
		t.Fatal(err)
	}
	var up, down time.Duration
	for _, d := range st.Scaling {
		if d.Kind != "scale" {
			continue
		}
		t.Logf("decision %+.1fs after the step: %s %d -> %d: %s", d.Time.Sub(step).Seconds(), d.Vertex, d.From, d.To, d.Reason)
		if d.To > d.From && d.Time.After(step) && up == 0 {
			up = d.Time.Sub(step)
		}
		if d.To < d.From && d.Time.After(fall) && down == 0 {
			down = d.Time.Sub(fall)
		}
	}
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d: pause %.2fs (%s)", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
	}
	if up == 0 || up > 30*time.Second {
		t.Errorf("scaled up %v after the step, want within 30s", up)
	}
	if down == 0 {
		t.Errorf("no scale-down after the load fell")
	}
	var minWorkersAfter int
	if ws, err := c.workers(); err == nil {
		minWorkersAfter = len(ws)
	}
	t.Logf("%d workers once the job stopped", minWorkersAfter)
	if maxPar < 2 || maxWorkers < 2 {
		t.Errorf("at most parallelism %d on %d workers: the job did not grow, or the workers did not follow", maxPar, maxWorkers)
	}
	seen := map[int64]int{}
	for _, r := range readOutput(t, c.bucket, "loadstep/") {
		id, _ := r["id"].(int64)
		seen[id]++
	}
	missing, dups := 0, 0
	for i := int64(0); i < int64(total); i++ {
		switch seen[i] {
		case 0:
			missing++
		case 1:
		default:
			dups++
		}
	}
	if missing != 0 || dups != 0 {
		t.Errorf("of %d events: %d missing, %d duplicated", total, missing, dups)
	}
	t.Logf("%d events: scaled up %v after the step, down %v after the fall; at most parallelism %d on %d workers", total, up, down, maxPar, maxWorkers)
}
