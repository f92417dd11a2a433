package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/poll"
)

// Redis is a redis-server started for one test.
type Redis struct {
	Addr string // host:port on 127.0.0.1

	t    testing.TB
	cmd  *exec.Cmd
	done <-chan struct{}
	port int
	bin  string
	dir  string
}

// StartRedis starts redis-server on a free loopback port with persistence off
// and stops it when the test ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r := &Redis{t: t, bin: Binary(t, "redis-server"), dir: t.TempDir()}
	r.port = FreePort(t)
	r.Addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.start()
	t.Cleanup(r.Stop)
	return r
}

func (r *Redis) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin,
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir,
		"--protected-mode", "no")
	log := logFile(r.t, "redis")
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.done = startProcess(r.t, r.cmd)
	poll.UntilNil(r.t, 10*time.Second, "redis ready on "+r.Addr, func() error {
		_, err := r.Do("PING")
		return err
	})
}

// Stop stops the server; safe to call twice.
func (r *Redis) Stop() {
	if r.cmd != nil {
		stopProcess(r.cmd, r.done)
		r.cmd = nil
	}
}

// Restart stops the server and starts an empty one on the same port, the
// way a Redis without persistence comes back after a crash.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Stop()
	r.start()
}

// Do sends one command over a fresh connection using the inline RESP
// protocol and returns the first reply line. It is for test assertions
// (INFO, MEMORY USAGE, KEYS), kept free of weir's own client code.
func (r *Redis) Do(args ...string) (string, error) { return Dial(r.Addr, args...) }

// readReply reads one RESP reply and renders it as text: arrays become
// newline-separated items, bulk strings their content.
func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		items := make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			s, err := readReply(br)
			if err != nil {
				return "", err
			}
			items = append(items, s)
		}
		return strings.Join(items, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// PID returns the server's process id, for CPU accounting in benchmarks.
func (r *Redis) PID() int {
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}
