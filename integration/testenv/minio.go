package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/statestore/blob"
)

// MinIO is a MinIO server started for one test, with one bucket created.
type MinIO struct {
	Endpoint  string // http://127.0.0.1:<port>
	AccessKey string // random per server
	SecretKey string // random per server
	Bucket    string // created at start
	DataDir   string // survives Stop/Start

	t        testing.TB
	bin      string
	port     int
	console  int
	certsDir string
	log      *os.File
	cmd      *exec.Cmd
	done     <-chan struct{}
}

// minioStartTimeout bounds how long a starting MinIO may take to report
// itself live; a cold start on a loaded machine takes a few seconds.
const minioStartTimeout = 60 * time.Second

// StartMinIO starts `minio server` on a free loopback port with random root
// credentials and its data in a temporary directory, creates the bucket
// "weir-test" and stops the server when the test ends.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	base := t.TempDir()
	m := &MinIO{
		AccessKey: "weir" + randomHex(t, 8),
		SecretKey: randomHex(t, 20),
		Bucket:    "weir-test",
		DataDir:   filepath.Join(base, "data"),
		t:         t,
		bin:       Binary(t, "minio"),
		certsDir:  filepath.Join(base, "certs"), // never ~/.minio/certs
		log:       logFile(t, "minio"),
	}
	m.port = FreePort(t)
	m.console = FreePort(t)
	for m.console == m.port {
		m.console = FreePort(t)
	}
	m.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", m.port)
	t.Cleanup(m.Stop)
	m.Start()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := blob.NewS3(ctx, m.S3Config())
	if err != nil {
		t.Fatalf("testenv: minio client: %v", err)
	}
	defer b.Close()
	if err := b.EnsureBucket(ctx); err != nil {
		t.Fatalf("testenv: create minio bucket %q: %v", m.Bucket, err)
	}
	return m
}

// Start starts the server (again) on the same port and data directory and
// waits until it is live and ready for requests; it does nothing if the
// server is running.
func (m *MinIO) Start() {
	m.t.Helper()
	if m.cmd != nil {
		return
	}
	cmd := exec.Command(m.bin, "server",
		"--address", fmt.Sprintf("127.0.0.1:%d", m.port),
		"--console-address", fmt.Sprintf("127.0.0.1:%d", m.console),
		"--certs-dir", m.certsDir,
		m.DataDir)
	cmd.Env = append(hermeticEnv(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout, cmd.Stderr = m.log, m.log
	m.cmd = cmd
	m.done = startProcess(m.t, cmd)

	// No keep-alive: an idle connection would outlive the check and show
	// up as a leaked goroutine.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// "live" answers as soon as the listener is up, before the object layer
	// and IAM are; S3 calls then get 503. "cluster" answers 200 only once
	// the server can take writes.
	checks := []string{m.Endpoint + "/minio/health/live", m.Endpoint + "/minio/health/cluster"}
	poll.UntilNil(m.t, minioStartTimeout, "minio ready on "+m.Endpoint, func() error {
		select {
		case <-m.done:
			m.cmd = nil
			m.t.Fatalf("testenv: minio exited while starting (port %d taken?); see the log", m.port)
		default:
		}
		for _, u := range checks {
			resp, err := hc.Get(u)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", u, resp.Status)
			}
		}
		return nil
	})
}

// Stop stops the server, keeping its data; safe to call twice.
func (m *MinIO) Stop() {
	if m.cmd != nil {
		stopProcess(m.cmd, m.done)
		m.cmd = nil
	}
}

// Restart stops the server and starts it again with the same data, the way
// it comes back after a crash or an upgrade.
func (m *MinIO) Restart() {
	m.t.Helper()
	m.Stop()
	m.Start()
}

// S3Config returns a configuration for the test bucket with explicit
// credentials, so tests never depend on the developer's ~/.aws.
func (m *MinIO) S3Config() blob.S3Config {
	return blob.S3Config{
		Bucket:         m.Bucket,
		Endpoint:       m.Endpoint,
		Region:         "us-east-1",
		ForcePathStyle: true,
		AccessKey:      m.AccessKey,
		SecretKey:      m.SecretKey,
	}
}

// Env returns the environment a child process (a weir binary) needs to
// reach the server through the standard AWS variables.
func (m *MinIO) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + m.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + m.SecretKey,
		"AWS_ENDPOINT_URL=" + m.Endpoint,
		"AWS_REGION=us-east-1",
	}
}

// hermeticEnv is the current environment without MINIO_* settings, so a
// developer's MinIO configuration cannot change the test server.
func hermeticEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return env
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testenv: random: %v", err)
	}
	return hex.EncodeToString(b)
}

// PID returns the server's process id, for CPU accounting in benchmarks.
func (m *MinIO) PID() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}
