package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// TestBadSpecsRefused deploys broken specs: each is refused with a message
// naming the file, line and field, and nothing reaches the bucket, whether
// the CLI catches it or the coordinator's API does.
func TestBadSpecsRefused(t *testing.T) {
	c := startCluster(t, 1, 1)
	cases := []struct {
		file string
		want []string
	}{
		{"unknown-key.yaml", []string{"unknown-key.yaml:5", "sources[rides].rat", `unknown field "rat"`, `did you mean "rate"`}},
		{"missing-input.yaml", []string{"missing-input.yaml:", "operators[stats].input", `"ridez"`, `did you mean "rides"`}},
		{"cycle.yaml", []string{"cycle", "a -> b -> a"}},
		{"unknown-function.yaml", []string{"operators[surge]", "no-such-function"}},
		{"wrong-type.yaml", []string{"operators[stats]", "avg(zone)", "string"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			path := "testdata/bad/" + tc.file
			out, err := c.weir("deploy", path)
			if err == nil {
				t.Fatalf("weir deploy %s succeeded (%q), want refusal", tc.file, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not contain %q:\n%v", w, err)
				}
			}
			// The coordinator refuses it too, on its own.
			data, _ := os.ReadFile(path)
			resp, err := http.Post(c.api+"/api/v1/jobs?file="+tc.file, "application/yaml", bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			var ae coordinator.APIError
			_ = json.NewDecoder(resp.Body).Decode(&ae)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || len(ae.Problems) == 0 {
				t.Errorf("API answered %s %+v, want 400 with problems", resp.Status, ae)
			}
		})
	}
	objs, err := c.bucket.List(t.Context(), layout.JobsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Errorf("refused specs stored objects: %v", objs)
	}
}

// TestDeadLetters feeds malformed JSON records through a files source and a
// redis source: they go to the dead-letter output with the raw record and

// TestDeadLettersUnderKills runs a checkpointing files job with 16
// malformed lines among 40,000 and kills a worker with SIGKILL three
// times: every malformed line is committed to jobs/<id>/deadletters/
// exactly once, the status counts 16 over all attempts, and every good
// line reaches the sink exactly once.
func TestDeadLettersUnderKills(t *testing.T) {
	t.Parallel() // checks exactness only, no timing: runs beside the other long ones
	c := startCluster(t, 3, 2)
	ctx := t.Context()
	const objects, perObject = 4, 10000
	var bad []string
	for o := 0; o < objects; o++ {
		var f strings.Builder
		for l := 0; l < perObject; l++ {
			i := o*perObject + l
			if i%2500 != 1234 {
				fmt.Fprintf(&f, `{"id": %d, "name": "n%d", "ts": %d}`+"\n", i, i, 1700000000000+int64(i))
				continue
			}
			b := [...]string{
				fmt.Sprintf(`{"id": "bad-%d", "name": "x"}`, i),
				fmt.Sprintf(`{"id": %d, "name":`, i),
				fmt.Sprintf(`[%d]`, i),
				fmt.Sprintf(`{"id": %d.5}`, i),
			}[len(bad)%4]
			bad = append(bad, b)
			fmt.Fprintln(&f, b)
		}
		if err := c.bucket.Put(ctx, fmt.Sprintf("dlk/in/part-%d.jsonl", o), []byte(f.String())); err != nil {
			t.Fatal(err)
		}
	}
	// 2,000 lines a second: about 20 s, checkpoints every second.
	specPath := writeSpec(t, `
job: dead-letters-kills-it
parallelism: 2
checkpoint: {interval: 1s, timeout: 20s, retain: 2}
restart: {attempts: 50, backoff: 200ms, maxBackoff: 2s}
sources:
  - {name: files-in, type: files, path: dlk/in/, format: jsonl, rate: 2000, schema: {id: int64, name: string, ts: timestamp_ms}}
sinks:
  - {name: out, input: files-in, type: files, path: dlk/out/, format: jsonl}
`)
	id := c.deploy(specPath)
	var last int64
	for kill := 1; kill <= 3; kill++ {
		// Each kill waits for a checkpoint of the attempt before it, so
		// that the job gets on and letters are committed, staged and
		// pending at kills.
		var victim string
		poll.UntilNil(t, time.Minute, fmt.Sprintf("a new checkpoint before kill %d", kill), func() error {
			st, err := c.status(id)
			if err != nil {
				return err
			}
			if st.State == coordinator.JobFinished {
				t.Fatalf("job finished before kill %d", kill)
			}
			if st.State != coordinator.JobRunning || st.Checkpoints == nil || st.Checkpoints.Latest <= last {
				return fmt.Errorf("state %s, checkpoints %+v", st.State, st.Checkpoints)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, w := range c.workersWithTasks(id) {
				if c.procs[w] != nil {
					victim, last = w, st.Checkpoints.Latest
					return nil
				}
			}
			return errors.New("no live worker runs its tasks")
		})
		t.Logf("kill -9 %s after checkpoint %d", victim, last)
		c.kill(victim)
		c.addWorker(2)
	}
	st := c.waitState(id, coordinator.JobFinished, 2*time.Minute)
	if len(st.Recoveries) < 3 {
		t.Errorf("%d recoveries for 3 kills", len(st.Recoveries))
	}
	if st.Totals.DeadLetters != int64(len(bad)) {
		t.Errorf("status counts %d dead letters, want %d", st.Totals.DeadLetters, len(bad))
	}
	for _, prefix := range []string{layout.JobPrefix(id) + "deadletters/", "dlk/out/"} {
		objs, err := c.bucket.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strings.Contains(o.Key, "/_staging/") {
				t.Errorf("staged object left after the job: %s", o.Key)
			}
		}
	}
	seen := map[string]int{}
	for _, l := range readDeadLetters(t, c.bucket, layout.DeadLetterPrefix(id, "files-in")) {
		seen[l["raw"]]++
		if l["reason"] == "" || !strings.HasPrefix(l["origin"], "dlk/in/") {
			t.Errorf("dead letter without reason or origin: %v", l)
		}
	}
	for _, b := range bad {
		if seen[b] != 1 {
			t.Errorf("malformed line %q is in the dead letters %d times, want once", b, seen[b])
		}
		delete(seen, b)
	}
	for raw, n := range seen {
		t.Errorf("dead letter %q (%d times) is not one of the malformed lines", raw, n)
	}
	// The good output is the batch recomputation: every good line once.
	got := map[int64]int{}
	for _, r := range readOutput(t, c.bucket, "dlk/out/") {
		k, _ := r["id"].(int64)
		if r["name"] != fmt.Sprintf("n%d", k) {
			t.Errorf("output row %v does not match its input line", r)
		}
		got[k]++
	}
	lost, dup := 0, 0
	for i := 0; i < objects*perObject; i++ {
		switch n := got[int64(i)]; {
		case i%2500 == 1234:
			if n != 0 {
				t.Errorf("malformed line %d reached the sink", i)
			}
		case n == 0:
			lost++
		case n > 1:
			dup += n - 1
		}
	}
	t.Logf("%d output rows for %d good lines: %d lost, %d duplicated; %d recoveries", len(got), objects*perObject-len(bad), lost, dup, len(st.Recoveries))
	if lost+dup > 0 || len(got) != objects*perObject-len(bad) {
		t.Errorf("output: %d distinct rows for %d good lines, %d lost, %d duplicated", len(got), objects*perObject-len(bad), lost, dup)
	}
}

// the reason, the job keeps running, and the count is reported.
func TestDeadLetters(t *testing.T) {
	c := startCluster(t, 2, 4)
	ctx := t.Context()
	good := func(i int) string {
		return fmt.Sprintf(`{"id": %d, "name": "n%d", "ts": %d}`, i, i, 1700000000000+int64(i)*1000)
	}
	var f1, f2 strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintln(&f1, good(i))
		fmt.Fprintln(&f2, good(100+i))
	}
	bad := []string{`{"id": "seven", "name": "x"}`, `{"id": 1, "name":`, `[1,2,3]`, `{"id": 1.5}`}
	for _, b := range bad[:2] {
		fmt.Fprintln(&f1, b)
	}
	for _, b := range bad[2:] {
		fmt.Fprintln(&f2, b)
	}
	for k, v := range map[string]string{"in/a.jsonl": f1.String(), "in/b.jsonl": f2.String()} {
		if err := c.bucket.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	specPath := writeSpec(t, `
job: dead-letters-it
parallelism: 2
sources:
  - {name: files-in, type: files, path: in/, format: jsonl, schema: {id: int64, name: string, ts: timestamp_ms}}
sinks:
  - {name: out, input: files-in, type: files, path: out/dl/, format: jsonl}
`)
	id := c.deploy(specPath)
	st := c.waitState(id, coordinator.JobFinished, 2*time.Minute)
	if st.Totals.DeadLetters != int64(len(bad)) {
		t.Errorf("dead letters counted = %d, want %d", st.Totals.DeadLetters, len(bad))
	}
	if got := readOutput(t, c.bucket, "out/dl/"); len(got) != 100 {
		t.Errorf("output has %d rows, want the 100 good ones", len(got))
	}
	letters := readDeadLetters(t, c.bucket, layout.DeadLetterPrefix(id, "files-in"))
	if len(letters) != len(bad) {
		t.Fatalf("dead-letter files hold %d records, want %d: %v", len(letters), len(bad), letters)
	}
	for _, b := range bad {
		found := false
		for _, l := range letters {
			if l["raw"] == b && l["reason"] != "" && strings.HasPrefix(l["origin"], "in/") {
				found = true
			}
		}
		if !found {
			t.Errorf("no dead letter with raw record %q (origin and reason set): %v", b, letters)
		}
	}

	// A redis source is unbounded: malformed entries are counted while it
	// runs.
	const stream = "dl-in"
	for i := 0; i < 20; i++ {
		if _, err := c.redis.Do("XADD", stream, "*", "data", good(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"data", "{broken"}, {"other", "1"}} {
		if _, err := c.redis.Do(append([]string{"XADD", stream, "*"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	specPath = writeSpec(t, `
job: dead-letters-redis-it
sources:
  - {name: redis-in, type: redis, stream: dl-in, schema: {id: int64, name: string, ts: timestamp_ms}}
sinks:
  - {name: out, input: redis-in, type: redis, stream: dl-out}
exchange: {bufferTimeout: 20ms}
`)
	id = c.deploy(specPath)
	poll.UntilNil(t, time.Minute, "20 rows through the redis job", func() error {
		n, err := c.redis.Do("XLEN", "dl-out")
		if err != nil {
			return err
		}
		if n != "20" {
			return fmt.Errorf("XLEN dl-out = %s", n)
		}
		return nil
	})
	poll.UntilNil(t, 30*time.Second, "2 dead letters reported", func() error {
		st, err := c.status(id)
		if err != nil {
			return err
		}
		if st.State != coordinator.JobRunning || st.Totals.DeadLetters != 2 {
			return fmt.Errorf("state %s, %d dead letters", st.State, st.Totals.DeadLetters)
		}
		return nil
	})
	if _, err := c.weir("jobs", "cancel", id); err != nil {
		t.Fatal(err)
	}
	c.waitState(id, coordinator.JobCanceled, 30*time.Second)
	letters = readDeadLetters(t, c.bucket, layout.DeadLetterPrefix(id, "redis-in"))
	if len(letters) != 2 {
		t.Errorf("redis dead letters written: %v, want 2", letters)
	}
	// The API (and the console's dead letters tab): the count and samples.
	resp, err := http.Get(c.api + "/api/v1/jobs/" + id + "/deadletters?samples=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dl []coordinator.SourceDeadLetters
	if err := json.NewDecoder(resp.Body).Decode(&dl); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET deadletters: %s, %v", resp.Status, err)
	}
	if len(dl) != 1 || dl[0].Source != "redis-in" || dl[0].Count != 2 || len(dl[0].Samples) != 1 ||
		dl[0].Samples[0].Reason == "" || !strings.HasPrefix(dl[0].Samples[0].Origin, "dl-in:") {
		t.Errorf("GET deadletters?samples=1 = %+v, want redis-in's 2 with one sample", dl)
	}
}

func readDeadLetters(t *testing.T, b blob.BucketReader, prefix string) []map[string]string {
	t.Helper()
	objs, err := b.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, o := range objs {
		if strings.Contains(o.Key, "/_staging/") {
			continue // not committed (TestDeadLettersUnderKills checks none is left)
		}
		data, err := b.Get(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m map[string]string
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %v", o.Key, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func writeSpec(t testing.TB, text string) string {
	t.Helper()
	p := t.TempDir() + "/spec.yaml"
	if err := os.WriteFile(p, []byte(strings.TrimLeft(text, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
