package integration

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/statestore/manifest"
)

// TestChaosPebbleWindows runs the chaos job (with 30,000 rides, half its
// count) with its keyed state in pebble stores of 4 MiB (state: {backend:
// pebble}): the windows (tumbling, sessions and perride's 2,500 keys),
// the joins (pairs, a regular join that keeps every row, and near, an
// interval join) and the sequence checker, checkpointed as their stores'
// files. Workers running tasks are killed -9 three times and the windows
// and joins are rescaled while it runs; the committed output is still
// exactly the batch recomputation.
//
// perride's aggregates are changed to ones that all merge (no float sum:
// an integer sum, a float's min and max), so that its windows are added
// to as merge operands without being read, while tumbling's sum(fare)
// keeps its windows read and written whole.
func TestChaosPebbleWindows(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	text, err := os.ReadFile(chaosSpec)
	if err != nil {
		t.Fatal(err)
	}
	spec := string(text)
	const restart = "restart: {attempts: 50, backoff: 200ms, maxBackoff: 2s}\n"
	if !strings.Contains(spec, restart) {
		t.Fatalf("%s has no %q", chaosSpec, restart)
	}
	spec = strings.Replace(spec, restart, restart+"state: {backend: pebble, memory: 4MiB}\n", 1)
	const perride, merged = "aggregate: {n: count(), total: sum(fare)}", "aggregate: {n: count(), vendors: sum(vendor), lo: min(fare), hi: max(fare)}"
	if strings.Count(spec, perride) != 1 {
		t.Fatalf("%s has not one %q", chaosSpec, perride)
	}
	spec = strings.Replace(spec, perride, merged, 1)
	// Half the rides of the other chaos tests: the stores' checkpoints
	// under -race make this job about three times as slow as on the
	// heap, and its kills and rescale all come in its first 25 s.
	const rides = "count: 60000\n"
	if strings.Count(spec, rides) != 1 {
		t.Fatalf("%s has not one %q", chaosSpec, rides)
	}
	spec = strings.Replace(spec, rides, "count: 30000\n", 1)
	specPath := filepath.Join(t.TempDir(), "chaos-pebble.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, 10)
	kills, jobID := 0, ""
	st := chaosRunSpec(t, c, specPath, func(ctx context.Context, id string) {
		jobID = id
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range 4 {
			if !sleepCtx(ctx, time.Duration(3000+rng.IntN(2000))*time.Millisecond) {
				return
			}
			if i == 2 {
				scaleLogged(t, ctx, c, id, "tumbling=2", "sessions=4", "perride=2", "pairs=2", "near=4")
				continue
			}
			if c.killRandomWorker(id, rng, 10) {
				kills++
			}
		}
	})
	if kills < 2 {
		t.Errorf("only %d kills happened while the job ran", kills)
	}
	if len(st.Recoveries) < kills+1 {
		t.Errorf("%d recoveries for %d kills and a rescale", len(st.Recoveries), kills)
	}
	for _, v := range st.Vertices {
		if v.Name == "perride" && v.Parallelism != 2 {
			t.Errorf("perride ends at parallelism %d, want 2 (rescaled)", v.Parallelism)
		}
	}
	// The windows' state went to the bucket as their stores' sstables.
	m := newestStateManifest(t, c, jobID)
	ssts := map[string]int{}
	for _, v := range m.Vertices {
		for _, s := range v.Subtasks {
			for _, f := range s.State {
				if f.Kind == manifest.KindStore && strings.HasSuffix(f.Name, ".sst") {
					ssts[v.Name]++
				}
			}
		}
	}
	t.Logf("checkpoint %d: sstables by operator: %v", m.Checkpoint, ssts)
	for _, name := range []string{"tumbling", "sessions", "perride", "pairs", "near"} {
		if ssts[name] == 0 {
			t.Errorf("checkpoint %d lists no sstable of %s's stores", m.Checkpoint, name)
		}
	}
}
