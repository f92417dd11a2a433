package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// chromium returns the headless browser's path: Debian's chromium, which
// `make deps` installs. A missing browser fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: `make deps` installs Debian's chromium package")
	return ""
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root here
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first call starts the browser; it takes no timeout (one would
	// stop the browser with it).
	start := make(chan error, 1)
	go func() { start <- chromedp.Do(ctx) }()
	select {
	case err := <-start:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("chromium did not start within a minute")
	}
	return ctx
}

// do carries out browser steps within d.
func do(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := chromedp.Do(rctx, steps...)
	for staleNode(rctx, err) {
		err = chromedp.Do(rctx, steps...)
	}
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// get runs one browser action that returns a value, within d.
func get[T any](t *testing.T, ctx context.Context, d time.Duration, what string, a chromedp.Action[T]) T {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(rctx, a)
	for staleNode(rctx, err) {
		v, err = chromedp.Run(rctx, a)
	}
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// staleNode reports whether err is the DevTools protocol's answer for a
// node the page replaced between the two steps of an action that finds a
// node and then reads or clicks it (the console redraws its tables and
// graph every second), with time left to run the action again: it then
// finds the new node. It waits a little first.
func staleNode(ctx context.Context, err error) bool {
	var pe *cdproto.Error
	if !errors.As(err, &pe) || pe.Message != "No node with given id found" {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// TestWebUI opens the coordinator's console in a real headless Chromium
// while the chaos job runs: the overview lists the job and the workers, a
// click leads to the job page, whose SVG graph names every vertex and
// whose rates change without a reload, a click on a vertex shows its
// subtasks, and the checkpoint tab lists completed checkpoints.
// Screenshots of the overview and the job page are written to
// WEIR_SCREENSHOTS (docs/img when regenerating the README's).
func TestWebUI(t *testing.T) {
	c := startCluster(t, 2, 8)
	id := c.deploy(chaosSpec)
	c.waitState(id, coordinator.JobRunning, time.Minute)
	ctx := browser(t)
	shots := os.Getenv("WEIR_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := func(name string) {
		png := get(t, ctx, 30*time.Second, "screenshot "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jobLink := chromedp.CSS(fmt.Sprintf(`a.job[data-job="%s"]`, id))

	do(t, ctx, time.Minute, "the overview lists the job and the workers",
		chromedp.Navigate(c.api+"/"),
		chromedp.WaitVisible(jobLink),
		chromedp.WaitVisible(chromedp.CSS(`#workers tr.worker`)),
	)
	if n := len(get(t, ctx, 30*time.Second, "count the workers", chromedp.Nodes(chromedp.CSSAll(`#workers tr.worker`)))); n != 2 {
		t.Errorf("the overview lists %d workers, want 2", n)
	}
	time.Sleep(3 * time.Second) // rates appear once the tasks reported twice
	// Each worker's latest heartbeat: its tasks, CPU, memory and age.
	usage := get(t, ctx, 30*time.Second, "read the workers' usage",
		chromedp.Evaluate[[]string](`[...document.querySelectorAll("#workers tr.worker")].map(r => ["tasks", "cpu", "mem", "heartbeat"].map(c => r.querySelector("td." + c).textContent).join("|"))`))
	for _, u := range usage {
		if strings.Contains(u, "–") || !strings.Contains(u, "iB") || !strings.Contains(u, "ago") {
			t.Errorf("a worker's usage on the overview: %q, want tasks|cores|memory|heartbeat age", u)
		}
	}
	shot("overview.png")

	// The overview redraws its tables every second: a click through the
	// DevTools protocol (find the node, then click it) can find a node
	// the redraw has just replaced. The page's own click() finds and
	// clicks in one step.
	if !get(t, ctx, 30*time.Second, "click the job's link",
		chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const a = document.querySelector('a.job[data-job="%s"]'); if (!a) return false; a.click(); return true })()`, id))) {
		t.Fatalf("the overview has no link to job %s", id)
	}
	do(t, ctx, time.Minute, "a click on the job opens its page with the graph",
		chromedp.WaitVisible(chromedp.CSS(`svg#graph g.vertex[data-vertex="tumbling"]`)),
	)
	var names []string
	poll.UntilNil(t, 30*time.Second, "the vertex names", func() error {
		names = get(t, ctx, 30*time.Second, "read the vertex names",
			chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg#graph g.vertex")].map(g => g.dataset.vertex)`))
		if len(names) == 0 {
			return errors.New("no vertices in the graph")
		}
		return nil
	})
	for _, want := range []string{"rides", "tumbling", "sessions", "seqcheck"} {
		found := false
		for _, n := range names {
			if n == want || strings.HasPrefix(n, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("the graph has vertices %v, none named %s", names, want)
		}
	}
	// The page redraws itself: the source's rates and the clock change
	// without a reload.
	rate := chromedp.CSS(fmt.Sprintf(`svg#graph g.vertex[data-vertex="%s"] text.rate`, names[0]))
	clock := chromedp.CSS(`#updated`)
	before, clock1 := get(t, ctx, 30*time.Second, "read the rates", chromedp.TextContent(rate)), get(t, ctx, 30*time.Second, "read the clock", chromedp.TextContent(clock))
	var after, clock2 string
	for start := time.Now(); time.Since(start) < 20*time.Second; {
		time.Sleep(time.Second)
		after, clock2 = get(t, ctx, 30*time.Second, "read the rates", chromedp.TextContent(rate)), get(t, ctx, 30*time.Second, "read the clock", chromedp.TextContent(clock))
		if after != before && clock2 != clock1 && !strings.Contains(after, "in 0/s · out 0/s") {
			break
		}
	}
	if after == before || clock2 == clock1 || strings.Contains(after, "in 0/s · out 0/s") {
		t.Errorf("the job page did not update by itself with live rates: %q then %q, clock %q then %q", before, after, clock1, clock2)
	}

	do(t, ctx, 30*time.Second, "a click on a vertex shows its subtasks",
		chromedp.Click(chromedp.CSS(`svg#graph g.vertex[data-vertex="tumbling"] rect`)),
		chromedp.WaitVisible(chromedp.CSS(`#subtasks tr.subtask`)),
	)
	if n := len(get(t, ctx, 30*time.Second, "count the subtasks", chromedp.Nodes(chromedp.CSSAll(`#subtasks tr.subtask`)))); n != 3 {
		t.Errorf("tumbling shows %d subtasks, want its parallelism 3", n)
	}
	// The edges into tumbling carry their partitioning and bytes per
	// second; its subtasks their checkpointed state.
	edge := get(t, ctx, 30*time.Second, "read an edge", chromedp.TextContent(chromedp.CSS(`svg#graph g.edge[data-to="tumbling"] text`)))
	if !strings.HasPrefix(edge, "hash") || !strings.HasSuffix(edge, "/s") {
		t.Errorf("the edge into tumbling reads %q, want its partitioning and bytes/s", edge)
	}
	poll.UntilNil(t, 30*time.Second, "state bytes in tumbling's subtasks", func() error {
		cells := get(t, ctx, 30*time.Second, "read the state cells",
			chromedp.Evaluate[[]string](`[...document.querySelectorAll("#subtasks td.state-bytes")].map(c => c.textContent)`))
		for _, c := range cells {
			if c != "0 B" {
				return nil
			}
		}
		return fmt.Errorf("state cells %q", cells)
	})
	shot("job.png")

	completed := chromedp.CSSAll(`#checkpoints tr.checkpoint[data-status="COMPLETED"]`)
	do(t, ctx, time.Minute, "the checkpoint tab lists completed checkpoints",
		chromedp.Click(chromedp.CSS(`#tab-checkpoints`)),
		chromedp.WaitVisible(chromedp.CSS(string(completed))),
	)
	shown := len(get(t, ctx, 30*time.Second, "count the checkpoints", chromedp.Nodes(completed)))
	st, err := c.status(id)
	if err != nil {
		t.Fatal(err)
	}
	if shown == 0 || st.Checkpoints == nil || st.Checkpoints.Completed == 0 {
		t.Errorf("%d completed checkpoints shown, the API says %+v", shown, st.Checkpoints)
	}
	do(t, ctx, 30*time.Second, "a checkpoint's explanation",
		chromedp.Click(chromedp.CSS(`#checkpoints tr.checkpoint[data-status="COMPLETED"] a.explain`)),
		chromedp.WaitVisible(chromedp.CSS(`#explanation`)),
	)
	if why := get(t, ctx, 30*time.Second, "read the explanation", chromedp.TextContent(chromedp.CSS(`#explanation`))); !strings.Contains(why, "Last to acknowledge:") || !strings.Contains(why, "The longest part:") {
		t.Errorf("the checkpoint's explanation: %q", why)
	}
	do(t, ctx, 30*time.Second, "the exception tab",
		chromedp.Click(chromedp.CSS(`#tab-exceptions`)),
		chromedp.WaitVisible(chromedp.CSS(`#exceptions`)),
	)
	if ex := get(t, ctx, 30*time.Second, "read the exceptions", chromedp.Text(chromedp.CSS(`#exceptions`))); !strings.Contains(ex, "No failures") {
		t.Errorf("exceptions of a job that never failed: %q", ex)
	}
	// A savepoint taken from the CLI appears in the savepoints tab (the
	// page redraws itself), with its key.
	key, err := c.weir("savepoint", id)
	if err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	key = strings.TrimSpace(key)
	do(t, ctx, 30*time.Second, "the savepoints tab lists the savepoint",
		chromedp.Click(chromedp.CSS(`#tab-savepoints`)),
		chromedp.WaitVisible(chromedp.CSS(`#savepoints tr.savepoint`)),
	)
	if sp := get(t, ctx, 30*time.Second, "read the savepoints", chromedp.Text(chromedp.CSS(`#savepoints`))); !strings.Contains(sp, key) {
		t.Errorf("the savepoints tab: %q, want %s", sp, key)
	}
	do(t, ctx, 30*time.Second, "the dead letters tab",
		chromedp.Click(chromedp.CSS(`#tab-deadletters`)),
		chromedp.WaitVisible(chromedp.CSS(`#deadletters tr.deadletter-source[data-source="rides"]`)),
	)
	if dl := get(t, ctx, 30*time.Second, "read the dead letters", chromedp.Text(chromedp.CSS(`#deadletters tr.deadletter-source`))); !strings.Contains(dl, "none committed") {
		t.Errorf("dead letters of a job without malformed input: %q", dl)
	}
	if _, err := c.weir("jobs", "cancel", "--wait", id); err != nil {
		t.Fatal(err)
	}
}
