package layout_test

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/statestore/layout"
)

const job = "rides-0a1b2c3d"

// TestKeys pins every key byte for byte: these are the keys in existing
// buckets (docs/checkpoint-format.md, docs/formats.md), which a new weir
// must keep reading.
func TestKeys(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"JobsPrefix", layout.JobsPrefix, "jobs/"},
		{"JobPrefix", layout.JobPrefix(job), "jobs/rides-0a1b2c3d/"},
		{"SpecKey", layout.SpecKey(job), "jobs/rides-0a1b2c3d/spec.json"},
		{"StatusKey", layout.StatusKey(job), "jobs/rides-0a1b2c3d/status.json"},
		{"StatusKeyAt", layout.StatusKeyAt(job, 7), "jobs/rides-0a1b2c3d/status/00000000000000000007.json"},
		{"StatusKeyAt no epoch", layout.StatusKeyAt(job, 0), "jobs/rides-0a1b2c3d/status.json"},
		{"StatusPrefix", layout.StatusPrefix(job), "jobs/rides-0a1b2c3d/status"},
		{"EpochKey", layout.EpochKey(12), "coordinator/epochs/00000000000000000012.json"},
		{"OriginKey", layout.OriginKey(job), "jobs/rides-0a1b2c3d/origin"},
		{"CheckpointsPrefix", layout.CheckpointsPrefix(job), "jobs/rides-0a1b2c3d/checkpoints/"},
		{"ManifestKey", layout.ManifestKey(job, 42), "jobs/rides-0a1b2c3d/checkpoints/42/manifest.json"},
		{"StatePrefix", layout.StatePrefix(job), "jobs/rides-0a1b2c3d/state/"},
		{"OperatorStatePrefix", layout.OperatorStatePrefix(job, "window"), "jobs/rides-0a1b2c3d/state/window/"},
		{"StateFileKey base", layout.StateFileKey(job, "window", 0, 64, 40, 2, "base"), "jobs/rides-0a1b2c3d/state/window/0-64/40-a2-base.arrow"},
		{"StateFileKey delta", layout.StateFileKey("j-1", "win", 0, 64, 12, 3, "delta"), "jobs/j-1/state/win/0-64/12-a3-delta.arrow"},
		{"StateObjectKey", layout.StateObjectKey("j-1", "host-1.local-4242", 12, 3, 5), "jobs/j-1/state/_workers/host-1.local-4242/12-a3-5.arrow"},
		{"StateObjectKey odd worker", layout.StateObjectKey("j-1", ".w/x y:ü", 1, 0, 1), "jobs/j-1/state/_workers/_w_x_y___/1-a0-1.arrow"},
		{"StateObjectKey empty worker", layout.StateObjectKey("j-1", "", 1, 0, 1), "jobs/j-1/state/_workers/_/1-a0-1.arrow"},
		{"SavepointsPrefix", layout.SavepointsPrefix(job), "jobs/rides-0a1b2c3d/savepoints/"},
		{"SavepointPrefix", layout.SavepointPrefix(job, "before-upgrade"), "jobs/rides-0a1b2c3d/savepoints/before-upgrade/"},
		{"SavepointManifestKey", layout.SavepointManifestKey(job, "before-upgrade"), "jobs/rides-0a1b2c3d/savepoints/before-upgrade/manifest.json"},
		{"SavepointStateKey", layout.SavepointStateKey(job, "sp-42-20260101T000000Z", "jobs/rides-0a1b2c3d/state/window/0-64/40-a2-base.arrow"),
			"jobs/rides-0a1b2c3d/savepoints/sp-42-20260101T000000Z/state/window/0-64/40-a2-base.arrow"},
		{"SavepointStateKey of a savepoint's file", layout.SavepointStateKey(job, "sp-50-x", "jobs/old-00000000/savepoints/sp-7-y/state/window/0-64/7-a1-base.arrow"),
			"jobs/rides-0a1b2c3d/savepoints/sp-50-x/state/window/0-64/7-a1-base.arrow"},
		{"SavepointStateKey of another key", layout.SavepointStateKey(job, "sp-1-x", "elsewhere/f.arrow"), "jobs/rides-0a1b2c3d/savepoints/sp-1-x/state/elsewhere/f.arrow"},
		{"DeadLetterPrefix", layout.DeadLetterPrefix(job, "rides"), "jobs/rides-0a1b2c3d/deadletters/rides/"},
		{"DeadLetterKey", layout.DeadLetterKey("j1", "src", 0, 3, 0), "jobs/j1/deadletters/src/part-0-a3-000000.jsonl"},
		{"DeadLetterKey long seq", layout.DeadLetterKey(job, "rides", 2, 1, 1234567), "jobs/rides-0a1b2c3d/deadletters/rides/part-2-a1-1234567.jsonl"},
		{"SinkObjectKey", layout.SinkObjectKey("out/totals", "part-0-a2-000017.jsonl"), "out/totals/part-0-a2-000017.jsonl"},
		{"SinkObjectKey trailing slash", layout.SinkObjectKey("out/totals/", "x.parquet"), "out/totals/x.parquet"},
		{"StagingPrefix", layout.StagingPrefix("out/totals"), "out/totals/_staging/"},
		{"StagingPrefix trailing slash", layout.StagingPrefix("out/totals//"), "out/totals/_staging/"},
		{"StagedTxnPrefix", layout.StagedTxnPrefix("out/totals", "job-a2-s1-c1"), "out/totals/_staging/job-a2-s1-c1/"},
		{"StagedKey", layout.StagedKey("out/totals", "job-a2-s1-c1", "part-1-a2-000000.jsonl"), "out/totals/_staging/job-a2-s1-c1/part-1-a2-000000.jsonl"},
		{"FunctionsPrefix", layout.FunctionsPrefix, "functions/"},
		{"FunctionPrefix", layout.FunctionPrefix("zone-stats"), "functions/zone-stats/"},
		{"ModulesPrefix", layout.ModulesPrefix("zone-stats"), "functions/zone-stats/modules/"},
		{"ModuleKey", layout.ModuleKey("zone-stats", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
			"functions/zone-stats/modules/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.wasm"},
		{"VersionsPrefix", layout.VersionsPrefix("zone-stats"), "functions/zone-stats/versions/"},
		{"VersionKey", layout.VersionKey("zone-stats", 3), "functions/zone-stats/versions/000003.json"},
		{"VersionKey long", layout.VersionKey("f", 1234567), "functions/f/versions/1234567.json"},
		{"FunctionDeletedKey", layout.FunctionDeletedKey("zone-stats"), "functions/zone-stats/deleted.json"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestParseSpecKey(t *testing.T) {
	for _, j := range []string{job, "j", "orphan-1"} {
		if got, ok := layout.ParseSpecKey(layout.SpecKey(j)); !ok || got != j {
			t.Errorf("ParseSpecKey(SpecKey(%q)) = %q, %v", j, got, ok)
		}
	}
	for _, key := range []string{
		"", "jobs/notes.txt", "jobs/junk-2/other.json", "jobs/j/status.json", "x/jobs/j/spec.json",
		"jobs/j/spec.json/x", "jobs/a/b/spec.json", "jobs/j/checkpoints/1/manifest.json",
	} {
		if j, ok := layout.ParseSpecKey(key); ok {
			t.Errorf("ParseSpecKey(%q) = %q, true; want false", key, j)
		}
	}
}

func TestParseManifestKey(t *testing.T) {
	for _, n := range []int64{1, 9, 10, 42, 1 << 40, 1<<63 - 1} {
		for _, j := range []string{"j-1", job} {
			got, id, ok := layout.ParseManifestKey(layout.ManifestKey(j, n))
			if !ok || got != j || id != n {
				t.Errorf("ParseManifestKey(ManifestKey(%s, %d)) = %q, %d, %v", j, n, got, id, ok)
			}
		}
	}
	for _, key := range []string{
		"", "jobs/j/checkpoints/0/manifest.json", "jobs/j/checkpoints/-1/manifest.json",
		"jobs/j/checkpoints/+1/manifest.json", "jobs/j/checkpoints/01/manifest.json",
		"jobs/j/checkpoints/1x/manifest.json", "jobs/j/checkpoints//manifest.json",
		"jobs/j/checkpoints/9223372036854775808/manifest.json", "jobs/j/checkpoints/1/manifest.json.tmp",
		"jobs/j/checkpoints/1/x/manifest.json", "jobs/a/b/checkpoints/1/manifest.json",
		"jobs//checkpoints/1/manifest.json", "jobs/../checkpoints/1/manifest.json",
		"x/jobs/j/checkpoints/1/manifest.json", "jobs/j/savepoints/1/manifest.json",
		"jobs/j/checkpoints/1/state.json", layout.SavepointManifestKey("j", "sp-1"),
	} {
		if j, n, ok := layout.ParseManifestKey(key); ok {
			t.Errorf("ParseManifestKey(%q) = %q, %d, true; want false", key, j, n)
		}
	}
}

func TestStateFileCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int64
	}{
		{layout.StateFileKey("j-1", "win", 0, 64, 12, 3, "delta"), 12},
		{layout.StateFileKey(job, "window", 64, 128, 1<<40, 1, "base"), 1 << 40},
		{layout.SavepointStateKey(job, "sp-7-x", layout.StateFileKey(job, "window", 0, 64, 7, 2, "base")), 7},
		{layout.StateObjectKey(job, "w-1", 9, 2, 3), 9},
		{layout.SavepointStateKey(job, "sp-7-x", layout.StateObjectKey(job, "w-1", 8, 2, 3)), 8},
		{layout.StoreFileKey(job, "count", 0, 64, 15, 2, "000012.sst"), 15},
		{layout.StoreFileKey(job, "count", 0, 64, 16, 2, "marker.manifest.000001.MANIFEST-000001"), 16},
		{layout.SavepointStateKey(job, "sp-7-x", layout.StoreFileKey(job, "count", 0, 64, 6, 1, "OPTIONS-000003")), 6},
	} {
		if id, ok := layout.StateFileCheckpoint(tc.key); !ok || id != tc.want {
			t.Errorf("StateFileCheckpoint(%s) = %d, %v; want %d", tc.key, id, ok, tc.want)
		}
	}
	for _, bad := range []string{"jobs/j/state/win/0-64/x-a1-base.arrow", "jobs/j/spec.json", "a/0-a1-base.arrow", "jobs/j/state/win/0-64/12-a1-base.json", "jobs/j/state/win/0-64/12-a1-store-", "jobs/j/state/win/0-64/12-store-000001.sst", ""} {
		if _, ok := layout.StateFileCheckpoint(bad); ok {
			t.Errorf("StateFileCheckpoint(%s) accepted", bad)
		}
	}
}

func TestParseStagedKey(t *testing.T) {
	for _, path := range []string{"out/totals", "out/totals/", "o"} {
		for _, name := range []string{"part-0-a2-000017.jsonl", "part-1-j-a1-000000.parquet"} {
			key := layout.StagedKey(path, "job-a2-s1-c1", name)
			txn, got, ok := layout.ParseStagedKey(path, key)
			if !ok || txn != "job-a2-s1-c1" || got != name {
				t.Errorf("ParseStagedKey(%q, %q) = %q, %q, %v", path, key, txn, got, ok)
			}
		}
	}
	for _, key := range []string{"out/totals/part-0.jsonl", "out/totals/_staging/txn", "other/_staging/c1/part-0.jsonl", "out/_staging/c1/part-0.jsonl"} {
		if txn, name, ok := layout.ParseStagedKey("out/totals", key); ok {
			t.Errorf("ParseStagedKey(out/totals, %q) = %q, %q, true; want false", key, txn, name)
		}
	}
}

func TestValidJobID(t *testing.T) {
	for _, id := range []string{"j", "j-1", job, "a_x-Y9", "a" + strings.Repeat("0", 71)} {
		if !layout.ValidJobID(id) {
			t.Errorf("ValidJobID(%q) = false", id)
		}
	}
	for _, id := range []string{"", "1j", "-j", "j/k", "j.k", "..", "j k", "a" + strings.Repeat("0", 72)} {
		if layout.ValidJobID(id) {
			t.Errorf("ValidJobID(%q) = true", id)
		}
	}
}

func TestParseVersionKey(t *testing.T) {
	for _, n := range []int{1, 9, 10, 42, 999999, 1000000, 1<<31 - 1} {
		for _, name := range []string{"f", "zone-stats", "a_b-9"} {
			got, v, ok := layout.ParseVersionKey(layout.VersionKey(name, n))
			if !ok || got != name || v != n {
				t.Errorf("ParseVersionKey(VersionKey(%s, %d)) = %q, %d, %v", name, n, got, v, ok)
			}
		}
	}
	for _, key := range []string{
		"", "functions/f/versions/000000.json", "functions/f/versions/1.json", "functions/f/versions/00001.json",
		"functions/f/versions/0000001.json", "functions/f/versions/-00001.json", "functions/f/versions/+00001.json",
		"functions/f/versions/00000x.json", "functions/f/versions/000001.json.tmp", "functions/f/versions/000001",
		"functions/f/versions/2147483648.json", "functions/F/versions/000001.json", "functions/a/b/versions/000001.json",
		"functions//versions/000001.json", "x/functions/f/versions/000001.json", "functions/f/modules/000001.json",
		"functions/f/versions/x/000001.json", layout.FunctionDeletedKey("f"), layout.ModuleKey("f", "00"),
	} {
		if name, v, ok := layout.ParseVersionKey(key); ok {
			t.Errorf("ParseVersionKey(%q) = %q, %d, true; want false", key, name, v)
		}
	}
}

func TestValidFunctionName(t *testing.T) {
	for _, name := range []string{"f", "zone-stats", "surge-multiplier-wasm", "a_1", "a" + strings.Repeat("0", 62)} {
		if !layout.ValidFunctionName(name) {
			t.Errorf("ValidFunctionName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "1f", "-f", "_f", "Zone", "zone-Stats", "f@1", "f/g", "f.g", "..", "f g", "a" + strings.Repeat("0", 63)} {
		if layout.ValidFunctionName(name) {
			t.Errorf("ValidFunctionName(%q) = true", name)
		}
	}
}

func TestParseStatusAndEpochKeys(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int64
		ok   bool
	}{
		{layout.StatusKey(job), 0, true},
		{layout.StatusKeyAt(job, 3), 3, true},
		{layout.StatusKeyAt(job, 1<<40), 1 << 40, true},
		{layout.StatusKeyAt("other-00000000", 3), 0, false},
		{"jobs/rides-0a1b2c3d/status/3.json", 0, false},
		{"jobs/rides-0a1b2c3d/status/00000000000000000000.json", 0, false},
		{"jobs/rides-0a1b2c3d/status/0000000000000000000x.json", 0, false},
		{"jobs/rides-0a1b2c3d/statusx", 0, false},
	} {
		if got, ok := layout.ParseStatusKey(job, tc.key); got != tc.want || ok != tc.ok {
			t.Errorf("ParseStatusKey(%q) = %d, %v; want %d, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
	if n, ok := layout.ParseEpochKey(layout.EpochKey(99)); n != 99 || !ok {
		t.Errorf("ParseEpochKey(EpochKey(99)) = %d, %v", n, ok)
	}
	for _, k := range []string{"coordinator/epochs/99.json", "coordinator/epochs/00000000000000000000.json", "coordinator/x/00000000000000000001.json"} {
		if n, ok := layout.ParseEpochKey(k); ok {
			t.Errorf("ParseEpochKey(%q) = %d, want refused", k, n)
		}
	}
}
