package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Netns is a network namespace the test made (`ip netns add`) with only
// its loopback up; it is deleted when the test ends. A process started in
// it (Command) reaches nothing outside but through a Link.
type Netns struct {
	Name string
}

// NewNetns makes a network namespace for the test. It needs root (CAP_SYS_ADMIN).
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	n := &Netns{Name: "weir-" + randomHex(t, 4)}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s (the partition tests need root and iproute2)", n.Name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.Name).Run() })
	if out, err := exec.Command("ip", "-n", n.Name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v: %s", n.Name, err, out)
	}
	return n
}

// Command runs name in the namespace. `ip netns exec` execs it, so the
// process's PID is the command's own (signals reach it).
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// in runs f on an OS thread that has entered namespace n (nil: this
// process's own), and ends that thread after: a socket f opens belongs to
// n for its whole life.
func in[T any](n *Netns, f func() (T, error)) (T, error) {
	if n == nil {
		return f()
	}
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var zero T
		fd, err := os.Open("/var/run/netns/" + n.Name)
		if err != nil {
			ch <- res{zero, err}
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{zero, fmt.Errorf("enter network namespace %s: %w", n.Name, err)}
			return
		}
		v, err := f()
		ch <- res{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// Link relays TCP connections from a loopback address in one namespace to
// a loopback address in another: the test's cable between them. Cut
// stops it as a partition does: nothing passes either way, connections
// stay open (no reset, no close reaches the other side) and new ones get
// no answer; Heal lets everything through again.
type Link struct {
	ln     net.Listener
	target string
	dialNS *Netns
	mu     sync.Mutex
	cond   *sync.Cond
	cut    bool
	closed bool
	conns  map[net.Conn]bool
	delay  time.Duration
}

// NewLink listens on 127.0.0.1 in listenNS and relays each connection to
// target (a loopback host:port) in dialNS; nil is the test's own
// namespace. It is closed when the test ends.
func NewLink(t testing.TB, listenNS, dialNS *Netns, target string) *Link {
	t.Helper()
	ln, err := in(listenNS, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatalf("link to %s: %v", target, err)
	}
	l := &Link{ln: ln, target: target, dialNS: dialNS, conns: map[net.Conn]bool{}}
	l.cond = sync.NewCond(&l.mu)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.accept()
	}()
	t.Cleanup(func() {
		l.mu.Lock()
		l.closed = true
		for c := range l.conns {
			c.Close()
		}
		l.cond.Broadcast()
		l.mu.Unlock()
		ln.Close()
		<-done
	})
	return l
}

// Addr is the address to dial, in the listening namespace.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Cut stops all traffic through the link.
func (l *Link) Cut() { l.set(true) }

// Heal lets traffic through again.
func (l *Link) Heal() { l.set(false) }

// SetDelay makes the connections opened from now on deliver what passes
// through them d later, each way: a network's latency, as between a
// worker and S3.
func (l *Link) SetDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.mu.Unlock()
}

func (l *Link) set(cut bool) {
	l.mu.Lock()
	l.cut = cut
	l.cond.Broadcast()
	l.mu.Unlock()
}

// pass waits while the link is cut; false once it is closed.
func (l *Link) pass() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.cut && !l.closed {
		l.cond.Wait()
	}
	return !l.closed
}

func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = true
	return true
}

func (l *Link) accept() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if !l.pass() { // a new connection during a cut gets no answer
				return
			}
			up, err := in(l.dialNS, func() (net.Conn, error) { return net.Dial("tcp", l.target) })
			if err != nil || !l.track(up) {
				return
			}
			defer up.Close()
			var pumps sync.WaitGroup
			pumps.Add(2)
			go func() { defer pumps.Done(); l.pump(up, c) }()
			go func() { defer pumps.Done(); l.pump(c, up) }()
			pumps.Wait()
		}()
	}
}

// pump copies src to dst, holding what it read while the link is cut; the
// end of src reaches dst (as a close of both) only once the link passes.
func (l *Link) pump(dst, src net.Conn) {
	var w io.Writer = dst
	l.mu.Lock()
	delay := l.delay
	l.mu.Unlock()
	var lag *lagWriter
	if delay > 0 {
		lag = newLagWriter(dst, delay)
		w = lag
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.pass() {
				break
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil { // EOF, or a closed or reset connection: the same end
			break
		}
	}
	l.pass()
	if lag != nil {
		lag.close() // what is on its way arrives before the end
	}
	dst.Close()
	src.Close()
}

// lagWriter writes each write to dst d after it was made, in order,
// from a goroutine of its own that close stops.
type lagWriter struct {
	dst    net.Conn
	d      time.Duration
	q      chan lagged
	done   chan struct{}
	failed atomic.Bool
}

type lagged struct {
	b  []byte
	at time.Time
}

func newLagWriter(dst net.Conn, d time.Duration) *lagWriter {
	// 256 reads of 32 KiB on their way: 800 MB/s at a delay of 10 ms.
	w := &lagWriter{dst: dst, d: d, q: make(chan lagged, 256), done: make(chan struct{})}
	go w.deliver()
	return w
}

func (w *lagWriter) Write(b []byte) (int, error) {
	if w.failed.Load() {
		return 0, net.ErrClosed
	}
	w.q <- lagged{bytes.Clone(b), time.Now().Add(w.d)}
	return len(b), nil
}

func (w *lagWriter) deliver() {
	defer close(w.done)
	for c := range w.q {
		time.Sleep(time.Until(c.at))
		if w.failed.Load() {
			continue
		}
		if _, err := w.dst.Write(c.b); err != nil {
			w.failed.Store(true)
		}
	}
}

// close waits for what was written to be delivered, or to fail.
func (w *lagWriter) close() {
	close(w.q)
	<-w.done
}
