// Package testenv starts the real servers weir's tests run against: a
// redis-server and a MinIO server, each on a free loopback port, each stopped
// when the test ends. Nothing here is a mock.
//
// A test that needs a server it cannot find fails: make test installs both
// (make deps), and CI must never pass by skipping.
package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// handedOut holds every port FreePort has returned in this process. The
// kernel may give a port it just freed to the next listen on port 0, before
// the server it was meant for has bound it; a cluster asks for twelve at
// once, and two of them were once the same.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no earlier call in this process returned.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testenv: find free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	t.Fatalf("testenv: find free port: 100 listens gave ports already handed out")
	return 0
}

// Binary finds an executable by name: $WEIR_<NAME>_BIN, then PATH, then the
// Go bin directory (where make deps installs MinIO), then ./.cache/bin at the
// module root. It fails the test with the install command when it is missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	env := "WEIR_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_BIN"
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(gopath))) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if root := moduleRoot(); root != "" {
		dirs = append(dirs, filepath.Join(root, ".cache", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	t.Fatalf("testenv: %s not found (looked in $%s, PATH and %v); run `make deps` to install it", name, env, dirs)
	return ""
}

func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// logFile opens a log file for a server under the test's temp dir; its tail
// is printed if the test fails, so a broken server explains itself.
func logFile(t testing.TB, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatalf("testenv: create log: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(f.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", name, b)
		}
		f.Close()
	})
	return f
}

// stopProcess ends a server: SIGTERM, then SIGKILL after a grace period.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	if cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// startProcess starts cmd and returns a channel closed when it exits.
func startProcess(t testing.TB, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return done
}
