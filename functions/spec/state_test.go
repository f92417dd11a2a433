package spec_test

import (
	"encoding/json"
	"testing"

	"github.com/weirstream/weir/functions/spec"
)

func TestStateParse(t *testing.T) {
	job, err := spec.Parse([]byte(valid+"state: {backend: pebble, memory: 256MiB}\n"), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if st := job.State; st == nil || st.Backend != spec.StatePebble || st.Memory != 256<<20 {
		t.Fatalf("state = %+v, want pebble with 256MiB", st)
	}
	// The stored spec (JSON) keeps the size readable and reads it back.
	raw, err := json.Marshal(job.State)
	if err != nil || string(raw) != `{"backend":"pebble","memory":"256MiB"}` {
		t.Fatalf("json = %s, %v", raw, err)
	}
	var back spec.State
	if err := json.Unmarshal(raw, &back); err != nil || back != *job.State {
		t.Fatalf("json round trip = %+v, %v", back, err)
	}
}

func TestStateValidate(t *testing.T) {
	for _, tc := range []struct {
		section, field, want string
	}{
		{"{backend: rocksdb}", "state.backend",
			`job.yaml:20: state.backend: "rocksdb" is not a state backend: want memory or pebble`},
		{"{backend: pebble, memory: 1MiB}", "state.memory",
			"job.yaml:20: state.memory: 1MiB is below the least, 4MiB"},
		{"{memory: 64MiB}", "state.memory",
			"job.yaml:20: state.memory: applies to the pebble backend; the memory backend keeps everything in memory"},
		{"{backend: pebble, memory: lots}", "state.memory",
			`job.yaml:20: state.memory: "lots" is not a size: want a whole number of bytes, or one with KiB, MiB or GiB, as in 512KiB or 64MiB`},
		{"{backend: pebble, memroy: 64MiB}", "state.memroy",
			`job.yaml:20: state.memroy: unknown field "memroy" (did you mean "memory"?); accepted: backend, memory`},
	} {
		_, err := spec.Parse([]byte(valid+"state: "+tc.section+"\n"), "job.yaml")
		if got := problemAt(t, problems(t, err), tc.field).Error(); got != tc.want {
			t.Errorf("state: %s:\n got %s\nwant %s", tc.section, got, tc.want)
		}
	}
}

func TestCheckpointPartSize(t *testing.T) {
	job, err := spec.Parse([]byte(valid+"checkpoint: {interval: 1s, partSize: 8MiB}\n"), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Checkpoint.PartSize; got != 8<<20 {
		t.Fatalf("partSize = %d, want 8MiB", got)
	}
	_, err = spec.Parse([]byte(valid+"checkpoint: {interval: 1s, partSize: 1KiB}\n"), "job.yaml")
	want := "job.yaml:20: checkpoint.partSize: 1KiB is below the least, 64KiB"
	if got := problemAt(t, problems(t, err), "checkpoint.partSize").Error(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
