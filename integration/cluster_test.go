package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// weirBin is the weir binary built once for the package's tests.
var weirBin string

// buildWeir builds cli/weir into dir, with the race detector if race.
func buildWeir(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "weir")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/weirstream/weir/cli/weir")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build weir: %w", err)
	}
	return bin, nil
}

// cluster is a coordinator and workers, each a weir process, on a real
// Redis and a real MinIO.
type cluster struct {
	t       testing.TB
	redis   *testenv.Redis        // nil on a Redis Cluster
	rc      *testenv.RedisCluster // the Redis Cluster, if the cluster runs on one
	minio   *testenv.MinIO
	env     []string
	api     string // coordinator URL
	bucket  blob.Bucket
	mu      sync.Mutex
	procs   map[string]*proc
	logDir  string
	workerN int
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startCluster starts Redis, MinIO, `weir coordinator` and n `weir worker`
// processes with the given slots each.
func startCluster(t testing.TB, workers, slots int) *cluster {
	t.Helper()
	return startClusterOn(t, workers, slots, nil, "")
}

// startClusterOn is startCluster on a given Redis (nil: its own) with a
// cluster id ("" for the default), so several clusters can share one
// Redis. Each has its own MinIO.
func startClusterOn(t testing.TB, workers, slots int, redis *testenv.Redis, id string, coordArgs ...string) *cluster {
	t.Helper()
	c, port := newCluster(t, redis, id)
	c.startProcs(workers, slots, port, coordArgs...)
	return c
}

// startClusterOnRedisCluster is startCluster on a Redis Cluster: every
// process gets WEIR_REDIS_ADDR=redis+cluster://... naming all its nodes.
func startClusterOnRedisCluster(t testing.TB, workers, slots int, rc *testenv.RedisCluster) *cluster {
	t.Helper()
	c, port := newClusterAt(t, nil, rc.Addr(), "")
	c.rc = rc
	c.startProcs(workers, slots, port)
	return c
}

// startProcs starts the coordinator on port and workers, and waits until
// the workers registered.
func (c *cluster) startProcs(workers, slots, port int, coordArgs ...string) {
	t := c.t
	t.Helper()
	c.start("coordinator", append([]string{"coordinator", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--id", "coordinator"}, coordArgs...)...)
	poll.UntilNil(t, 30*time.Second, "coordinator API", func() error {
		_, err := c.weir("jobs", "list")
		return err
	})
	for i := 0; i < workers; i++ {
		c.addWorker(slots)
	}
	poll.UntilNil(t, 30*time.Second, fmt.Sprintf("%d workers registered", workers), func() error {
		out, err := c.weir("jobs", "list") // reachable
		_ = out
		if err != nil {
			return err
		}
		var ws []json.RawMessage
		if err := getJSON(c.api+"/api/v1/workers", &ws); err != nil {
			return err
		}
		if len(ws) < workers {
			return fmt.Errorf("%d of %d workers", len(ws), workers)
		}
		return nil
	})
	t.Cleanup(c.stopAll)
}

// newCluster starts Redis (unless given one) and MinIO and returns a
// cluster of no process yet, with the port its coordinator is to listen
// on.
func newCluster(t testing.TB, redis *testenv.Redis, id string) (*cluster, int) {
	t.Helper()
	if redis == nil {
		redis = testenv.StartRedis(t)
	}
	return newClusterAt(t, redis, redis.Addr, id)
}

// newClusterAt is newCluster on the Redis at redisAddr (redis, if not nil,
// is the server there).
func newClusterAt(t testing.TB, redis *testenv.Redis, redisAddr, id string) (*cluster, int) {
	t.Helper()
	c := &cluster{t: t, procs: map[string]*proc{}, logDir: t.TempDir()}
	c.redis = redis
	c.minio = testenv.StartMinIO(t)
	c.env = append(c.minio.Env(),
		"WEIR_REDIS_ADDR="+redisAddr,
		"WEIR_CLUSTER="+id,
		"WEIR_STORE=s3://"+c.minio.Bucket,
		"WEIR_S3_ENDPOINT="+c.minio.Endpoint,
		"WEIR_LOG_LEVEL=debug",
		"PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"),
		"GORACE=halt_on_error=1",
	)
	if poisonFreed {
		c.env = append(c.env, "WEIR_POISON_FREED=1")
	}
	if v, ok := os.LookupEnv("WEIR_HUGE_PAGES"); ok { // the benchmarks' choice (BenchmarkWindowState)
		c.env = append(c.env, "WEIR_HUGE_PAGES="+v)
	}
	b, err := blob.NewS3(context.Background(), c.minio.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	c.bucket = b
	t.Cleanup(func() { b.Close() })
	port := testenv.FreePort(t)
	c.api = fmt.Sprintf("http://127.0.0.1:%d", port)
	return c, port
}

func (c *cluster) addWorker(slots int) string {
	c.mu.Lock()
	c.workerN++
	name := fmt.Sprintf("worker-%d", c.workerN)
	c.mu.Unlock()
	c.start(name, "worker", "--slots", fmt.Sprint(slots), "--id", name)
	return name
}

// start runs weir with args as a named background process.
func (c *cluster) start(name string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(weirBin, args...)
	cmd.Env = c.env
	c.startCmd(name, cmd)
}

// startCmd runs cmd (its Env set) as a named background process.
func (c *cluster) startCmd(name string, cmd *exec.Cmd) {
	c.t.Helper()
	logPath := filepath.Join(c.logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
}

// channelKeys lists the exchange's channel keys (weir:{*) on the Redis, or
// on every master of the Redis Cluster.
func (c *cluster) channelKeys() (string, error) {
	if c.rc == nil {
		return c.redis.Do("KEYS", "weir:{*")
	}
	var all []string
	for s := range c.rc.Shards() {
		keys, err := testenv.Dial(c.rc.Master(s), "KEYS", "weir:{*")
		if err != nil {
			return "", err
		}
		for k := range strings.SplitSeq(keys, "\n") {
			// The control keys of a Redis Cluster start weir:{ctl}: too.
			if k != "" && !strings.HasPrefix(k, "weir:{ctl}:") {
				all = append(all, k)
			}
		}
	}
	return strings.Join(all, "\n"), nil
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.procs = map[string]*proc{}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
	for name, p := range procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if c.t.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			c.t.Logf("---- %s log tail ----\n%s", name, b)
		}
	}
}

// weir runs a weir client command against the cluster and returns stdout;
// the error carries stderr and the exit status.
func (c *cluster) weir(args ...string) (string, error) {
	return runWeir(c.env, append([]string{"--coordinator", c.api}, args...)...)
}

func runWeir(env []string, args ...string) (string, error) {
	cmd := exec.Command(weirBin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("weir %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// deploy deploys a spec file and returns the job id.
func (c *cluster) deploy(specPath string) string {
	c.t.Helper()
	out, err := c.weir("deploy", specPath)
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// status reads a job's status through the CLI's JSON output.
func (c *cluster) status(id string) (coordinator.JobStatus, error) {
	var st coordinator.JobStatus
	out, err := c.weir("jobs", "status", id, "-o", "json")
	if err != nil {
		return st, err
	}
	err = json.Unmarshal([]byte(out), &st)
	return st, err
}

// waitState polls until the job reaches state (failing on another final
// state) and returns its status.
func (c *cluster) waitState(id, state string, timeout time.Duration) coordinator.JobStatus {
	c.t.Helper()
	var st coordinator.JobStatus
	poll.UntilNil(c.t, timeout, "job "+id+" "+state, func() error {
		var err error
		st, err = c.status(id)
		if err != nil {
			return err
		}
		if st.State == state {
			return nil
		}
		if st.State == coordinator.JobFailed || st.State == coordinator.JobFinished || st.State == coordinator.JobCanceled {
			c.t.Fatalf("job %s ended %s, want %s: %s", id, st.State, state, st.Error)
		}
		return fmt.Errorf("state %s", st.State)
	})
	return st
}

func getJSON(url string, out any) error {
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
