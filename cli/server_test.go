package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/poll"
)

// TestMetricsServerHealthz checks what a worker's --metrics-addr serves:
// /metrics, and /healthz for a liveness probe (deploy/kubernetes).
func TestMetricsServerHealthz(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "weir_worker_slots 1\n") })
	go func() {
		done <- serveWith(ctx, addr, metrics, slog.New(slog.DiscardHandler), func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
	}()
	get := func(path string) (int, string, error) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	poll.UntilNil(t, 10*time.Second, "metrics server up", func() error { _, _, err := get("/healthz"); return err })
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "weir_worker_slots 1"} {
		code, body, err := get(path)
		if err != nil || code != http.StatusOK || strings.TrimSpace(body) != want {
			t.Errorf("GET %s = %d %q (%v), want 200 %q", path, code, body, err, want)
		}
	}
	if code, _, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveWith: %v", err)
	}
}

// TestUpWorkersFlags checks that bad worker bounds are refused before
// anything starts, naming the flags and what is accepted.
func TestUpWorkersFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--min-workers 3 --max-workers 2": "weir up --min-workers 3 --max-workers 2 --slots 4 --scale-down-delay 10s: min workers 3 above max workers 2: want min ≤ max",
		"--workers 0":                     "max workers 0: want ≥ 1",
		"--max-workers 1 --slots 0":       "--min-workers 1 --max-workers 1 --slots 0",
		"--scale-down-delay -1s":          "scale-down delay -1s: want ≥ 0",
	} {
		stderr := weirFails(t, append([]string{"up", "--redis-addr", "127.0.0.1:1"}, strings.Fields(args)...)...)
		if !strings.Contains(stderr, want) {
			t.Errorf("weir up %s: stderr %q, want it to say %q", args, stderr, want)
		}
	}
}

// TestBadRedisAddr: an address that is neither host:port nor
// redis+cluster://host:port,... is refused before anything connects,
// saying what would be accepted.
func TestBadRedisAddr(t *testing.T) {
	store := "file://" + t.TempDir()
	for addr, want := range map[string]string{
		"127.0.0.1:1,127.0.0.1:2": "for a Redis Cluster write redis+cluster://127.0.0.1:1,127.0.0.1:2",
		"redis+cluster://":        "names no node",
		"redis://127.0.0.1:1":     "want host:port, or redis+cluster://",
		"redis+cluster://h:0":     `port "0", want 1-65535`,
	} {
		stderr := weirFails(t, "worker", "--store", store, "--redis-addr", addr)
		if !strings.Contains(stderr, "--redis-addr") || !strings.Contains(stderr, want) {
			t.Errorf("weir worker --redis-addr %s: stderr %q, want it to name the flag and say %q", addr, stderr, want)
		}
	}
}
