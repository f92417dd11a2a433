package checkpoint

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRandomInvariants drives the coordinator with random events and checks
// what must always hold: at most one checkpoint in flight, ids triggered in
// increasing order, a checkpoint completes only after every task acked and
// its manifest was written, aborted checkpoints never complete, and no more
// than Retain checkpoints are retained.
func TestRandomInvariants(t *testing.T) {
	tasks := []Task{{"src", 0}, {"src", 1}, {"win", 0}, {"sink", 0}}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{Interval: time.Duration(1+rng.IntN(5)) * 100 * time.Millisecond, Timeout: time.Second,
			MinPause: time.Duration(rng.IntN(3)) * 100 * time.Millisecond, Retain: 1 + rng.IntN(3)}
		c, err := New(cfg, tasks, tasks[:2], 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.UnixMilli(0)
		var lastTrigger int64
		inFlight := int64(0)
		acked := map[int64]map[Task]bool{}
		writing := map[int64]bool{}
		ended := map[int64]bool{}
		check := func(ds []Decision) {
			for _, d := range ds {
				switch d.Kind {
				case Trigger:
					if inFlight != 0 {
						t.Fatalf("seed %d: trigger %d while %d in flight", seed, d.Checkpoint, inFlight)
					}
					if d.Checkpoint <= lastTrigger {
						t.Fatalf("seed %d: trigger %d after %d", seed, d.Checkpoint, lastTrigger)
					}
					lastTrigger, inFlight = d.Checkpoint, d.Checkpoint
					acked[d.Checkpoint] = map[Task]bool{}
				case WriteManifest:
					if len(acked[d.Checkpoint]) != len(tasks) || len(d.Acks) != len(tasks) {
						t.Fatalf("seed %d: write manifest %d with %d acks", seed, d.Checkpoint, len(acked[d.Checkpoint]))
					}
					writing[d.Checkpoint] = true
				case Complete:
					if !writing[d.Checkpoint] || ended[d.Checkpoint] {
						t.Fatalf("seed %d: complete %d without its manifest, or twice", seed, d.Checkpoint)
					}
					ended[d.Checkpoint], inFlight = true, 0
				case Abort:
					if ended[d.Checkpoint] || d.Checkpoint != inFlight {
						t.Fatalf("seed %d: abort %d (in flight %d, ended %v)", seed, d.Checkpoint, inFlight, ended[d.Checkpoint])
					}
					ended[d.Checkpoint], inFlight = true, 0
				}
			}
			if len(c.Completed()) > cfg.Retain {
				t.Fatalf("seed %d: %d retained, more than %d", seed, len(c.Completed()), cfg.Retain)
			}
		}
		for step := 0; step < 400; step++ {
			now = now.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
			id, _ := c.InFlight()
			if rng.IntN(4) == 0 && id > 1 {
				id -= int64(1 + rng.IntN(2)) // a stale id
			}
			tk := tasks[rng.IntN(len(tasks))]
			switch rng.IntN(10) {
			case 0, 1, 2:
				check(c.Tick(now))
			case 3, 4, 5, 6:
				ds, err := c.Ack(now, id, Ack{Task: tk})
				if err != nil {
					t.Fatal(err)
				}
				if id != 0 && id == inFlight && !writing[id] {
					acked[id][tk] = true
				}
				check(ds)
			case 7:
				check(c.Decline(now, id, tk, "no"))
			case 8:
				if rng.IntN(5) == 0 {
					check(c.TaskFailed(now, tk))
				}
			case 9:
				var werr error
				if rng.IntN(3) == 0 {
					werr = errors.New("down")
				}
				check(c.ManifestWritten(now, id, werr))
			}
		}
	}
}
