package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// TestRescaleUnderLoad rescales the chaos job in place with weir jobs
// scale while it runs on a real cluster (Redis, MinIO, worker processes):
// its datagen source (made of splits) 2 -> 5, tumbling 3 -> 6 and sessions
// 3 -> 4, a worker killed, then all three to 1. (The sequence checker needs
// each of its keys, ride_id % 50, made by one source subtask, so the
// source's parallelism divides 50 and its 120 splits: 1, 2, 5 or 10.)
// The committed output equals the batch recomputation; each rescale's
// pause (detected -> every task running again) is logged with the state
// the scaled vertices held.
func TestRescaleUnderLoad(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 10)
	scale := func(ctx context.Context, id string, to ...string) { scaleLogged(t, ctx, c, id, to...) }
	st := chaosRun(t, c, func(ctx context.Context, id string) {
		wait := func(d time.Duration) bool { return sleepCtx(ctx, d) }
		if !wait(5 * time.Second) {
			return
		}
		scale(ctx, id, "rides=5", "tumbling=6", "sessions=4")
		if !wait(4 * time.Second) {
			return
		}
		c.killOneOf(id, 10)
		c.waitState(id, coordinator.JobRunning, time.Minute)
		if !wait(3 * time.Second) {
			return
		}
		scale(ctx, id, "rides=1", "tumbling=1", "sessions=1")
	})
	rescales := 0
	for _, r := range st.Recoveries {
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
			t.Logf("rescale pause %.2fs, restored from checkpoint %d: %s", r.Seconds, r.RestoredFrom, r.Reason)
		}
	}
	if rescales != 2 {
		t.Errorf("%d rescales recorded, want 2", rescales)
	}
	for _, v := range st.Vertices {
		if (v.Name == "rides" || v.Name == "tumbling" || v.Name == "sessions") && v.Parallelism != 1 {
			t.Errorf("%s ends at parallelism %d, want 1", v.Name, v.Parallelism)
		}
	}
}

// sleepCtx waits d, and reports whether ctx was not done meanwhile.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// scaleLogged runs weir jobs scale --wait and logs how long the job took
// to run again, with the state the scaled vertices held before. A job
// that is restarting (a worker was just killed) refuses a rescale until
// it runs again; --wait asks again meanwhile, for at most 3 minutes here.
func scaleLogged(t testing.TB, ctx context.Context, c *cluster, id string, to ...string) {
	t.Helper()
	start := time.Now()
	var state int64
	if st, err := c.status(id); err == nil {
		for _, v := range st.Vertices {
			for _, arg := range to {
				if strings.HasPrefix(arg, v.Name+"=") {
					state += v.Totals.StateBytes
				}
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, weirBin, append([]string{"--coordinator", c.api, "jobs", "scale", id, "--wait"}, to...)...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() == nil { // not the test ending the job
			t.Errorf("jobs scale %v: %v\n%s%s", to, err, out.String(), errb.String())
		}
		return
	}
	t.Logf("jobs scale %v (state %d bytes): running again after %v:\n%s%s", to, state, time.Since(start).Round(time.Millisecond), errb.String(), strings.TrimSpace(out.String()))
}

// TestRescaleFilesAndRedis rescales a checkpointed windows job reading a
// files source (six objects in MinIO, three small ones on subtask 0 and
// three large ones on subtask 1, so subtask 0 finishes first) and a redis
// source (four streams fed while it runs) with weir jobs scale: 2 -> 4
// while the files source's subtask 0 has finished and subtask 1 is in the
// middle of its objects, a worker killed, then everything to 1. weir jobs
// stop drains it at the end; both windows equal the batch recomputation
// of the rows written, and each rescale's pause is logged with the state
// the scaled vertices held.
func TestRescaleFilesAndRedis(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 10)
	ctx := context.Background()
	const base = int64(1_767_225_600_000) // 2026-01-01
	zones := []string{"north", "south", "east", "west", "centre", "port"}
	mkRow := func(id int64) (row, string) {
		r := row{"id": id, "zone": zones[(id*7)%int64(len(zones))], "fare": id%90 + 5, "ts": base + id}
		return r, fmt.Sprintf(`{"id":%d,"zone":%q,"fare":%d,"ts":%d}`, id, r["zone"], r["fare"], r["ts"])
	}
	// Objects by key: part-0 (subtask 0 of 2), part-1 (subtask 1), ...
	var archive []row
	id := int64(0)
	for part, n := range []int{300, 3000, 300, 3000, 300, 3000} {
		var b strings.Builder
		for range n {
			r, line := mkRow(id)
			archive = append(archive, r)
			b.WriteString(line + "\n")
			id++
		}
		if err := c.bucket.Put(ctx, fmt.Sprintf("mixed/in/part-%d.jsonl", part), []byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: c.redis.Addr})
	defer rdb.Close()
	var live []row
	addLive := func(n int) error {
		pipe := rdb.Pipeline()
		for range n {
			r, line := mkRow(int64(len(live)))
			live = append(live, r)
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: fmt.Sprintf("mixed-live-%d", len(live)%4), Values: map[string]any{"data": line}})
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	if err := addLive(4); err != nil { // the streams exist before the job lists them
		t.Fatal(err)
	}
	specPath := writeSpec(t, `
job: mixed
parallelism: 2
checkpoint: {interval: 1s, timeout: 20s, retain: 2}
restart: {attempts: 20, backoff: 200ms, maxBackoff: 2s}
sources:
  - name: archive
    type: files
    path: mixed/in/
    format: jsonl
    rate: 2000
    schema: {id: int64, zone: string, fare: int64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 10s}
  - name: live
    type: redis
    streams: "mixed-live-*"
    schema: {id: int64, zone: string, fare: int64, ts: timestamp_ms}
    eventTime: {column: ts, maxOutOfOrderness: 10s}
operators:
  - name: archive-win
    input: archive
    keyBy: [zone]
    window: {type: tumbling, size: 1s}
    aggregate: {n: count(), total: sum(fare), lo: min(id), hi: max(id)}
  - name: live-win
    input: live
    keyBy: [zone]
    window: {type: tumbling, size: 1s}
    aggregate: {n: count(), total: sum(fare), lo: min(id), hi: max(id)}
sinks:
  - {name: archive-out, input: archive-win, type: files, path: mixed/out/archive/, format: jsonl}
  - {name: live-out, input: live-win, type: files, path: mixed/out/live/, format: jsonl}
`)
	id0 := c.deploy(specPath)
	c.waitState(id0, coordinator.JobRunning, time.Minute)

	// 400 entries a second into the streams for 16 s, while the job is
	// rescaled and a worker killed.
	feedCtx, stopFeed := context.WithTimeout(ctx, 16*time.Second)
	defer stopFeed()
	fed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-feedCtx.Done():
				fed <- nil
				return
			case <-tick.C:
				if err := addLive(40); err != nil {
					fed <- err
					return
				}
			}
		}
	}()
	taskState := func(st coordinator.JobStatus, vertex string, subtask int) string {
		for _, v := range st.Vertices {
			if v.Name == vertex && subtask < len(v.Tasks) {
				return v.Tasks[subtask].State
			}
		}
		return ""
	}
	st := waitStatus(t, c, id0, "archive[0] finished while archive[1] reads", func(st coordinator.JobStatus) error {
		if s := taskState(st, "archive", 0); s != coordinator.JobFinished {
			return fmt.Errorf("archive[0] %s", s)
		}
		return nil
	})
	if s := taskState(st, "archive", 1); s != coordinator.JobRunning {
		t.Fatalf("archive[1] is %s when archive[0] finished; the test needs it still reading", s)
	}
	scaleLogged(t, ctx, c, id0, "archive=4", "live=4", "archive-win=4", "live-win=4")
	c.waitState(id0, coordinator.JobRunning, time.Minute)
	c.killOneOf(id0, 10)
	waitStatus(t, c, id0, "a checkpoint after the recovery", func(st coordinator.JobStatus) error {
		n := len(st.Recoveries)
		if st.State != coordinator.JobRunning || n == 0 || st.Checkpoints == nil || st.Checkpoints.Latest <= st.Recoveries[n-1].RestoredFrom {
			return fmt.Errorf("%d recoveries, checkpoints %+v", n, st.Checkpoints)
		}
		return nil
	})
	scaleLogged(t, ctx, c, id0, "archive=1", "live=1", "archive-win=1", "live-win=1")
	if err := <-fed; err != nil {
		t.Fatalf("feeding the streams: %v", err)
	}
	fedAll := time.Now()
	// Every entry read before the stop, which drains (sources end, the
	// last windows fire, sinks commit): a backlog of 0 reported more
	// than two stats intervals after the last entry was added.
	waitStatus(t, c, id0, "the live streams read to their end", func(st coordinator.JobStatus) error {
		if s := taskState(st, "archive", 0); time.Since(fedAll) < 2*time.Second || st.State != coordinator.JobRunning ||
			st.Totals.Backlog != 0 || s != coordinator.JobFinished {
			var per []string
			for _, v := range st.Vertices {
				for _, tk := range v.Tasks {
					per = append(per, fmt.Sprintf("%s[%d] %s backlog %d read %d", v.Name, tk.Subtask, tk.State, tk.Stats.Backlog, tk.Stats.RecordsOut))
				}
			}
			return fmt.Errorf("backlog %d, archive[0] %s: %v", st.Totals.Backlog, s, per)
		}
		return nil
	})
	if out, err := c.weir("jobs", "stop", "--wait", id0); err != nil {
		t.Fatalf("jobs stop: %v\n%s", err, out)
	}
	st, err := c.status(id0)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != coordinator.JobFinished {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	rescales := 0
	for _, r := range st.Recoveries {
		t.Logf("attempt %d from checkpoint %d: pause %.2fs (%s)", r.Attempt, r.RestoredFrom, r.Seconds, r.Reason)
		if strings.HasPrefix(r.Reason, "rescale: ") {
			rescales++
		}
	}
	if rescales != 2 {
		t.Errorf("%d rescales recorded, want 2", rescales)
	}
	js := loadSpec(t, specPath)
	t.Logf("%d archive rows, %d live entries", len(archive), len(live))
	for _, op := range js.Operators {
		input := archive
		if op.Name == "live-win" {
			input = live
		}
		compareRows(t, op.Name, readOutput(t, c.bucket, "mixed/out/"+strings.TrimSuffix(op.Name, "-win")+"/"), recomputeWindows(t, &op, "ts", input))
	}
}

// waitStatus polls the job's status until cond accepts it (a minute at
// most), failing if the job ends meanwhile.
func waitStatus(t testing.TB, c *cluster, id, what string, cond func(coordinator.JobStatus) error) coordinator.JobStatus {
	t.Helper()
	return waitStatusWithin(t, c, id, what, time.Minute, cond)
}

// waitStatusWithin is waitStatus for at most timeout.
func waitStatusWithin(t testing.TB, c *cluster, id, what string, timeout time.Duration, cond func(coordinator.JobStatus) error) coordinator.JobStatus {
	t.Helper()
	var st coordinator.JobStatus
	poll.UntilNil(t, timeout, what, func() error {
		var err error
		if st, err = c.status(id); err != nil {
			return err
		}
		if lifecycleEnded(st.State) {
			t.Fatalf("job %s ended %s while waiting for %s: %s", id, st.State, what, st.Error)
		}
		if err := cond(st); err != nil {
			return fmt.Errorf("state %s: %w", st.State, err)
		}
		return nil
	})
	return st
}

func lifecycleEnded(state string) bool {
	return state == coordinator.JobFinished || state == coordinator.JobFailed || state == coordinator.JobCanceled
}
