package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/exchange/control"
)

func TestProgressLine(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name string
		st   coordinator.JobStatus
		now  time.Time
		want string
	}{
		{"datagen count", coordinator.JobStatus{State: "RUNNING", Started: t0,
			Totals: control.Stats{RecordsIn: 2500, SinkIn: 2400, SourceRead: 2500, SourceTotal: 10000, SourceUnit: "records"}},
			t0.Add(2 * time.Second), "RUNNING 2500 of 10000 records (25%), 2400 rows to sinks, 1250/s, 2s"},
		{"files bytes", coordinator.JobStatus{State: "RUNNING", Started: t0,
			Totals: control.Stats{RecordsIn: 300, SourceRead: 3 << 20, SourceTotal: 12 << 20, SourceUnit: "bytes"}},
			t0.Add(1500 * time.Millisecond), "RUNNING 3.0 MiB of 12.0 MiB read (25%), 300 records, 0 rows to sinks, 200/s, 1.5s"},
		{"unbounded", coordinator.JobStatus{State: "RUNNING", Started: t0, Totals: control.Stats{RecordsIn: 7, SinkIn: 7}},
			t0.Add(time.Second), "RUNNING 7 records, 7 rows to sinks, 7/s, 1s"},
		{"mixed units", coordinator.JobStatus{State: "RUNNING", Started: t0,
			Totals: control.Stats{RecordsIn: 7, SourceRead: 5, SourceTotal: 9, SourceUnit: "mixed"}},
			t0.Add(time.Second), "RUNNING 7 records, 0 rows to sinks, 7/s, 1s"},
		{"not started", coordinator.JobStatus{State: "CREATED", Created: t0}, t0, "CREATED 0 records, 0 rows to sinks, 0s"},
		{"final uses ended", coordinator.JobStatus{State: "FINISHED", Started: t0, Ended: t0.Add(4 * time.Second),
			Totals: control.Stats{RecordsIn: 400, SinkIn: 400, SourceRead: 400, SourceTotal: 400, SourceUnit: "records"}},
			t0.Add(time.Hour), "FINISHED 400 of 400 records (100%), 400 rows to sinks, 100/s, 4s"},
		{"restoring", coordinator.JobStatus{State: "RUNNING", Started: t0, Totals: control.Stats{RestoreRead: 1 << 20, RestoreTotal: 4 << 20}},
			t0.Add(time.Second), "RUNNING 0 records, 0 rows to sinks, 0/s, 1s, restoring 1.0 MiB of 4.0 MiB"},
		{"savepoint", coordinator.JobStatus{State: "RUNNING", Started: t0,
			Savepoint: &coordinator.SavepointProgress{Checkpoint: 3, Files: 1, FilesTotal: 4, Bytes: 512 << 10, BytesTotal: 2 << 20}},
			t0.Add(time.Second), "RUNNING 0 records, 0 rows to sinks, 0/s, 1s, savepoint 3: 1 of 4 files, 512.0 KiB of 2.0 MiB copied"},
	} {
		if got := progressLine(c.st, c.now); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// The line is redrawn in place, blanking what a longer line left; a log
// record goes above it.
func TestProgressDraw(t *testing.T) {
	var out bytes.Buffer
	p := &progress{w: &out}
	p.draw("RUNNING 10 records")
	p.draw("RUNNING 9")
	if _, err := p.Write([]byte("level=WARN msg=x\n")); err != nil {
		t.Fatal(err)
	}
	p.end("FINISHED 20")
	want := "\rRUNNING 10 records" + "\rRUNNING 9         " + "\r         \rlevel=WARN msg=x\nRUNNING 9" + "\rFINISHED 20\n"
	if out.String() != want {
		t.Errorf("drew %q\nwant %q", out.String(), want)
	}
}

func TestProgressMode(t *testing.T) {
	var b bytes.Buffer
	for mode, want := range map[string]bool{"always": true, "never": false, "auto": false} {
		if got, err := wantProgress(mode, &b); err != nil || got != want {
			t.Errorf("--progress=%s on a buffer: %v, %v; want %v", mode, got, err, want)
		}
	}
	if _, err := wantProgress("yes", &b); err == nil || !strings.Contains(err.Error(), `--progress: "yes" is not a mode: want auto, always or never`) {
		t.Errorf("--progress=yes: %v", err)
	}
}

// weir run --progress=always draws counts that grow, and a final line.
func TestRunProgress(t *testing.T) {
	dir := inConfigDir(t)
	writeFile(t, "job.yaml", `job: slow
sources: [{name: gen, type: datagen, count: 3000, rate: 2000, schema: {k: string, v: int64}}]
sinks: [{name: out, input: gen, type: files, path: out/, format: jsonl}]
`)
	stdout, stderr := weir(t, "run", "job.yaml", "--progress=always", "--store", "file://"+dir+"/store")
	if !strings.Contains(stdout, "FINISHED") {
		t.Fatalf("stdout %q", stdout)
	}
	if !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("stderr does not end with the final line: %q", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\r")
	final := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(final, "FINISHED 3000 of 3000 records (100%), 3000 rows to sinks") {
		t.Errorf("final line %q", final)
	}
	re := regexp.MustCompile(`^RUNNING (\d+) of 3000 records`)
	var counts []int
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			counts = append(counts, n)
		}
	}
	distinct := 0
	for i := 1; i < len(counts); i++ {
		if counts[i] < counts[i-1] {
			t.Fatalf("counts went down: %v", counts)
		}
		if counts[i] > counts[i-1] {
			distinct++
		}
	}
	if distinct < 2 {
		t.Errorf("counts did not grow while it ran: %v\nstderr %q", counts, stderr)
	}
}

func TestTaskStateRestoring(t *testing.T) {
	ts := coordinator.TaskStatus{State: "RUNNING", Stats: control.Stats{RestoreRead: 3 << 20, RestoreTotal: 10 << 20}}
	if got := taskState(ts); got != "RESTORING 3.0/10.0 MiB" {
		t.Errorf("restoring task: %q", got)
	}
	ts.Stats.RestoreRead = ts.Stats.RestoreTotal
	if got := taskState(ts); got != "RUNNING" {
		t.Errorf("restored task: %q", got)
	}
}
