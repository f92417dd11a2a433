package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/weirstream/weir/coordinator"
)

// Progress modes (--progress).
const (
	progressAuto   = "auto"   // when stderr is a terminal
	progressAlways = "always" // even when it is not
	progressNever  = "never"
)

const progressUsage = "a live progress line on stderr: auto (when stderr is a terminal), always, never"

// progressEvery is how often a progress line is redrawn.
const progressEvery = 250 * time.Millisecond

// wantProgress reports whether mode asks for a progress line on w, or
// returns a usage error naming the flag and the accepted values. In auto
// mode nothing is drawn when w is not a terminal: a redrawn line makes no
// sense in a log file, the summary on stdout gives the totals at the end,
// and the log (info level) says what happened on the way.
func wantProgress(mode string, w io.Writer) (bool, error) {
	switch mode {
	case progressAlways:
		return true, nil
	case progressNever:
		return false, nil
	case progressAuto:
		return isTTY(w), nil
	}
	return false, &exitError{code: 2, err: fmt.Errorf("--progress: %q is not a mode: want auto, always or never", mode)}
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is w's width in columns, 0 when unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// progressLine renders a job's progress as one line: state, how much of
// its input the sources read (of how much, when they know), rows to
// sinks, the mean rate, elapsed time, and a savepoint or a restore under
// way. now is the time of the line for a job still running.
func progressLine(st coordinator.JobStatus, now time.Time) string {
	t := st.Totals
	start := st.Started
	if start.IsZero() {
		start = st.Created
	}
	end := now
	if !st.Ended.IsZero() {
		end = st.Ended
	}
	elapsed := max(end.Sub(start), 0)
	var b strings.Builder
	b.WriteString(st.State)
	switch {
	case t.SourceTotal > 0 && t.SourceUnit == "records":
		fmt.Fprintf(&b, " %d of %d records (%s)", t.SourceRead, t.SourceTotal, percent(t.SourceRead, t.SourceTotal))
	case t.SourceTotal > 0 && t.SourceUnit == "bytes":
		fmt.Fprintf(&b, " %s of %s read (%s), %d records", mib(t.SourceRead), mib(t.SourceTotal), percent(t.SourceRead, t.SourceTotal), t.RecordsIn)
	default:
		fmt.Fprintf(&b, " %d records", t.RecordsIn)
	}
	fmt.Fprintf(&b, ", %d rows to sinks", t.SinkIn)
	if s := elapsed.Seconds(); s > 0 {
		fmt.Fprintf(&b, ", %.0f/s", float64(t.RecordsIn)/s)
	}
	fmt.Fprintf(&b, ", %s", elapsed.Round(100*time.Millisecond))
	if t.RestoreTotal > 0 && t.RestoreRead < t.RestoreTotal {
		fmt.Fprintf(&b, ", restoring %s of %s", mib(t.RestoreRead), mib(t.RestoreTotal))
	}
	if sp := st.Savepoint; sp != nil {
		fmt.Fprintf(&b, ", %s", savepointProgress(*sp))
	}
	return b.String()
}

// savepointProgress says how far a savepoint's copy is.
func savepointProgress(sp coordinator.SavepointProgress) string {
	return fmt.Sprintf("savepoint %d: %d of %d files, %s of %s copied", sp.Checkpoint, sp.Files, sp.FilesTotal, mib(sp.Bytes), mib(sp.BytesTotal))
}

// taskState is a task's state for the status table: RESTORING n/m MiB
// while a running task reads its state files.
func taskState(t coordinator.TaskStatus) string {
	if s := t.Stats; t.State == coordinator.JobRunning && s.RestoreTotal > 0 && s.RestoreRead < s.RestoreTotal {
		return fmt.Sprintf("RESTORING %.1f/%.1f MiB", float64(s.RestoreRead)/(1<<20), float64(s.RestoreTotal)/(1<<20))
	}
	return t.State
}

func percent(n, of int64) string {
	if of <= 0 {
		return "?%"
	}
	return fmt.Sprintf("%d%%", min(n*100/of, 100))
}

// mib formats bytes in MiB with one decimal (KiB below one MiB).
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// progress draws one line in place on w (carriage return, no newline)
// until end. It is also an io.Writer for the log: a log record blanks the
// line, is written, and the line is drawn again below it.
type progress struct {
	w     io.Writer
	width int // the terminal's, to cut lines at; 0: do not cut
	mu    struct {
		sync.Mutex
		line  string // the line on screen ("" once ended)
		drawn int    // its length, to blank it
	}
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, width: terminalWidth(w)}
}

// draw replaces the line on screen with line.
func (p *progress) draw(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 1 && len(line) >= p.width {
		line = line[:p.width-1]
	}
	pad := max(p.mu.drawn-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.mu.line, p.mu.drawn = line, len(line)
}

// end draws line for the last time and ends it with a newline.
func (p *progress) end(line string) {
	p.draw(line)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w)
	p.mu.line, p.mu.drawn = "", 0
}

// Write writes a log record above the line.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.drawn > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.mu.drawn))
	}
	n, err := p.w.Write(b)
	if p.mu.line != "" {
		fmt.Fprint(p.w, p.mu.line)
	}
	return n, err
}

// clear blanks the line, leaving the cursor at its start.
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.drawn > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.mu.drawn))
	}
	p.mu.line, p.mu.drawn = "", 0
}

// follow redraws the line every progressEvery, render(status) with the
// time, until the returned stop is called; a status that is not ok (not
// known yet, the coordinator not answering) keeps the line as it is.
// stop cancels a status in flight and waits for the drawing goroutine.
func (p *progress) follow(status func(context.Context) (coordinator.JobStatus, bool), render func(coordinator.JobStatus, time.Time) string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			if st, ok := status(ctx); ok && ctx.Err() == nil {
				if line := render(st, time.Now()); line != "" {
					p.draw(line)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// savepointLine renders a savepoint under way ("" until the job's status
// shows one).
func savepointLine(st coordinator.JobStatus, _ time.Time) string {
	if st.Savepoint == nil {
		return ""
	}
	return savepointProgress(*st.Savepoint)
}

// whileSavepoint runs take (a request that returns once job id's
// savepoint is written) and, if mode says so, draws the savepoint's copy
// on stderr meanwhile, from the job's status.
func (a *app) whileSavepoint(mode, id string, take func() error) error {
	show, err := wantProgress(mode, a.stderr)
	if err != nil {
		return err
	}
	if !show {
		return take()
	}
	pr := newProgress(a.stderr)
	c := a.client()
	stop := pr.follow(func(ctx context.Context) (coordinator.JobStatus, bool) {
		var st coordinator.JobStatus
		err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, &st)
		return st, err == nil
	}, savepointLine)
	err = take()
	stop()
	pr.clear()
	return err
}
