package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/integration/poll"
)

// RedisCluster is a Redis Cluster of redis-server processes on loopback
// ports, started for one test.
type RedisCluster struct {
	t     testing.TB
	nodes []*clusterNode
	// shards are the slot ranges as created, lowest first: shard i keeps
	// its index across failovers (its master changes, its slots do not).
	shards [][2]int
}

type clusterNode struct {
	addr string
	cmd  *exec.Cmd
	done <-chan struct{}
}

// StartRedisCluster starts masters*(1+replicas) redis-servers with cluster
// mode on and persistence off, joins them with redis-cli --cluster create
// (masters get equal slot ranges, in port order), waits until every node
// reports cluster_state:ok and knows every other, and stops them all when
// the test ends.
func StartRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("testenv: a redis cluster needs at least 3 masters, got %d", masters)
	}
	bin, cli := Binary(t, "redis-server"), Binary(t, "redis-cli")
	dir := t.TempDir()
	c := &RedisCluster{t: t}
	t.Cleanup(c.Stop)
	total := masters * (1 + replicas)
	for i := range total {
		c.nodes = append(c.nodes, startClusterNode(t, bin, dir, i))
	}
	for i, n := range c.nodes {
		c.nodes[i] = awaitClusterNode(t, n, func() *clusterNode { return startClusterNode(t, bin, dir, i) })
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitOK(30 * time.Second)
	// Gossip spreads who replicates whom after the cluster is ok: wait
	// until every node knows every replica, and each replica is in sync.
	poll.UntilNil(t, 30*time.Second, "every redis cluster node knows every replica, in sync", func() error {
		for _, n := range c.nodes {
			nodes, err := clusterNodesOf(n.addr)
			if err != nil {
				return err
			}
			reps := 0
			for _, m := range nodes {
				if !m.master && m.masterID != "-" && !m.failed {
					reps++
				}
			}
			if reps != masters*replicas {
				return fmt.Errorf("node %s knows %d replicas, want %d", n.addr, reps, masters*replicas)
			}
			info, err := Dial(n.addr, "INFO", "replication")
			if err != nil {
				return err
			}
			if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
				return fmt.Errorf("replica %s not in sync: %s", n.addr, info)
			}
			// A replica's link is up before its master counts it online
			// (the end of a full sync); until then the master lists no
			// replica (ROLE) and a write does not wait for one.
			if strings.Contains(info, "role:master") && strings.Count(info, ",state=online,") != replicas {
				return fmt.Errorf("master %s has not %d replicas online: %s", n.addr, replicas, info)
			}
		}
		return nil
	})
	nodes := c.clusterNodes()
	for _, n := range nodes {
		if n.master {
			c.shards = append(c.shards, n.slots...)
		}
	}
	slices.SortFunc(c.shards, func(a, b [2]int) int { return a[0] - b[0] })
	if len(c.shards) != masters {
		t.Fatalf("testenv: redis cluster has slot ranges %v, want one per master (%d)", c.shards, masters)
	}
	return c
}

// startClusterNode starts the i-th node on two fresh ports (client and bus).
func startClusterNode(t testing.TB, bin, dir string, i int) *clusterNode {
	t.Helper()
	port, bus := FreePort(t), FreePort(t)
	n := &clusterNode{addr: fmt.Sprintf("127.0.0.1:%d", port)}
	n.cmd = exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
		// Long enough that a node busy under -race is not taken for
		// failed; failovers in tests are asked for, not detected.
		"--cluster-node-timeout", "5000",
		"--save", "", "--appendonly", "no", "--dir", dir)
	log := logFile(t, fmt.Sprintf("redis-cluster-%d", i))
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.done = startProcess(t, n.cmd)
	return n
}

// awaitClusterNode waits until n answers PING. A node that exits first lost
// one of its ports to another process between FreePort and its bind (its
// log says "Address already in use"); it is started again on new ports, up
// to three times.
func awaitClusterNode(t testing.TB, n *clusterNode, restart func() *clusterNode) *clusterNode {
	t.Helper()
	for attempt := 1; ; attempt++ {
		exited := false
		poll.UntilNil(t, 10*time.Second, "redis cluster node ready on "+n.addr, func() error {
			select {
			case <-n.done:
				exited = true
				return nil
			default:
			}
			_, err := Dial(n.addr, "PING")
			return err
		})
		if !exited {
			return n
		}
		if attempt == 3 {
			t.Fatalf("testenv: redis cluster node on %s exited before it answered, %d times; see its log", n.addr, attempt)
		}
		t.Logf("testenv: redis cluster node on %s exited before it answered; starting it on new ports", n.addr)
		n = restart()
	}
}

// Addr is the cluster's address as weir takes it:
// redis+cluster://host:port,... naming every node.
func (c *RedisCluster) Addr() string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = n.addr
	}
	return "redis+cluster://" + strings.Join(hosts, ",")
}

// Nodes returns every node's host:port, in start order.
func (c *RedisCluster) Nodes() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Shards is the number of slot ranges (masters).
func (c *RedisCluster) Shards() int { return len(c.shards) }

// ShardOf returns the shard whose slots hold key.
func (c *RedisCluster) ShardOf(key string) int {
	c.t.Helper()
	var live string
	for _, n := range c.nodes {
		if n.cmd != nil {
			live = n.addr
			break
		}
	}
	v, err := Dial(live, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		c.t.Fatalf("testenv: cluster keyslot %s: %v", key, err)
	}
	slot, _ := strconv.Atoi(v)
	for i, s := range c.shards {
		if s[0] <= slot && slot <= s[1] {
			return i
		}
	}
	c.t.Fatalf("testenv: slot %d of %s is in no shard of %v", slot, key, c.shards)
	return -1
}

// Master returns the host:port of shard's current master.
func (c *RedisCluster) Master(shard int) string {
	c.t.Helper()
	m, _ := c.roles(shard)
	return m
}

// roles returns shard's master and one of its replicas, as the node
// serving the shard's first slot sees them.
func (c *RedisCluster) roles(shard int) (master, replica string) {
	c.t.Helper()
	nodes := c.clusterNodes()
	var id string
	for _, n := range nodes {
		if n.master && slices.ContainsFunc(n.slots, func(s [2]int) bool { return s[0] <= c.shards[shard][0] && c.shards[shard][0] <= s[1] }) {
			id, master = n.id, n.addr
		}
	}
	for _, n := range nodes {
		if !n.master && n.masterID == id && !n.failed {
			replica = n.addr
		}
	}
	if master == "" {
		c.t.Fatalf("testenv: shard %d (slots %v) has no master in %+v", shard, c.shards[shard], nodes)
	}
	return master, replica
}

// Failover promotes a replica of shard's master with CLUSTER FAILOVER (the
// coordinated kind: the master stops taking writes, the replica catches
// up, then they swap), and waits until the replica serves the shard's
// slots, every node agrees and the cluster is ok. It returns the new
// master's host:port.
func (c *RedisCluster) Failover(shard int) string {
	c.t.Helper()
	old, replica := c.roles(shard)
	if replica == "" {
		c.t.Fatalf("testenv: shard %d (master %s) has no replica to fail over to", shard, old)
	}
	if _, err := Dial(replica, "CLUSTER", "FAILOVER"); err != nil {
		c.t.Fatalf("testenv: cluster failover on %s: %v", replica, err)
	}
	poll.Until(c.t, 30*time.Second, fmt.Sprintf("replica %s leads shard %d in place of %s on every node", replica, shard, old), func() bool {
		for _, n := range c.nodes {
			nodes, err := clusterNodesOf(n.addr)
			if err != nil {
				return false
			}
			ok := false
			for _, m := range nodes {
				if m.addr == replica {
					ok = m.master
				}
				if m.addr == old && m.master {
					return false
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
	c.waitOK(30 * time.Second)
	return replica
}

// Replica returns the host:port of a replica of shard's master ("" if it
// has none).
func (c *RedisCluster) Replica(shard int) string {
	c.t.Helper()
	_, r := c.roles(shard)
	return r
}

// WaitReplicated waits until shard's replica has everything its master
// had written when it was called: its link is up and its replication
// offset has reached the master's. A test that crashes a master and
// expects nothing written before to be lost calls it first; without it, a
// replica still in its initial sync (or behind by a write) loses what the
// master had not sent, as Redis's asynchronous replication does.
func (c *RedisCluster) WaitReplicated(shard int, timeout time.Duration) {
	c.t.Helper()
	m, r := c.roles(shard)
	if r == "" {
		c.t.Fatalf("testenv: shard %d has no replica to wait for", shard)
	}
	info, err := Dial(m, "INFO", "replication")
	if err != nil {
		c.t.Fatalf("testenv: replication offset of master %s: %v", m, err)
	}
	want, ok := infoInt(info, "master_repl_offset")
	if !ok {
		c.t.Fatalf("testenv: master %s reports no master_repl_offset: %s", m, info)
	}
	poll.UntilNil(c.t, timeout, fmt.Sprintf("replica %s has master %s's offset %d", r, m, want), func() error {
		info, err := Dial(r, "INFO", "replication")
		if err != nil {
			return err
		}
		got, ok := infoInt(info, "slave_repl_offset")
		if !strings.Contains(info, "master_link_status:up") || !ok || got < want {
			return fmt.Errorf("replica at offset %d (link up: %v)", got, strings.Contains(info, "master_link_status:up"))
		}
		return nil
	})
}

// infoInt returns the integer field name of an INFO reply.
func infoInt(info, name string) (int64, bool) {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// node returns the node at addr.
func (c *RedisCluster) node(addr string) *clusterNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	c.t.Fatalf("testenv: no redis cluster node %s", addr)
	return nil
}

// Pause stops the node at addr with SIGSTOP: it holds its connections and
// answers nothing, as a node cut off or stalled.
func (c *RedisCluster) Pause(addr string) {
	c.t.Helper()
	n := c.node(addr)
	if n.cmd == nil || n.cmd.Process.Signal(syscall.SIGSTOP) != nil {
		c.t.Fatalf("testenv: pause redis cluster node %s: not running", addr)
	}
	// The signal is sent, not yet taken: return once the node is stopped.
	stat := fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid)
	poll.Until(c.t, 5*time.Second, "redis cluster node "+addr+" stopped", func() bool {
		data, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := strings.LastIndexByte(string(data), ')')
		return i >= 0 && i+2 < len(data) && (data[i+2] == 'T' || data[i+2] == 't')
	})
}

// Resume continues a paused node.
func (c *RedisCluster) Resume(addr string) {
	c.t.Helper()
	if n := c.node(addr); n.cmd == nil || n.cmd.Process.Signal(syscall.SIGCONT) != nil {
		c.t.Fatalf("testenv: resume redis cluster node %s: not running", addr)
	}
}

// Kill ends the node at addr with SIGKILL, as a crash: what it had not
// yet sent its replicas is lost. The cluster fails over to a replica once
// the other nodes agree it failed (after the node timeout, 5 s); see
// WaitMaster. The node stays down.
func (c *RedisCluster) Kill(addr string) {
	c.t.Helper()
	n := c.node(addr)
	if n.cmd == nil {
		c.t.Fatalf("testenv: kill redis cluster node %s: not running", addr)
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT) // a paused node dies too
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// WaitMaster waits until the node at addr leads shard, as every live node
// sees it, and the cluster is ok on every live node.
func (c *RedisCluster) WaitMaster(shard int, addr string, timeout time.Duration) {
	c.t.Helper()
	poll.UntilNil(c.t, timeout, fmt.Sprintf("%s leads shard %d and the cluster is ok", addr, shard), func() error {
		for _, n := range c.nodes {
			if n.cmd == nil {
				continue
			}
			info, err := Dial(n.addr, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("node %s: cluster not ok", n.addr)
			}
			nodes, err := clusterNodesOf(n.addr)
			if err != nil {
				return err
			}
			lead := false
			for _, m := range nodes {
				if m.addr == addr && m.master && slices.ContainsFunc(m.slots, func(s [2]int) bool { return s[0] <= c.shards[shard][0] && c.shards[shard][0] <= s[1] }) {
					lead = true
				}
			}
			if !lead {
				return fmt.Errorf("node %s does not see %s leading shard %d yet", n.addr, addr, shard)
			}
		}
		return nil
	})
}

// Stop stops every node; safe to call twice.
func (c *RedisCluster) Stop() {
	for _, n := range c.nodes {
		if n.cmd != nil {
			stopProcess(n.cmd, n.done)
			n.cmd = nil
		}
	}
}

// waitOK waits until every node says cluster_state:ok and knows every node.
func (c *RedisCluster) waitOK(timeout time.Duration) {
	c.t.Helper()
	want := "cluster_known_nodes:" + strconv.Itoa(len(c.nodes))
	poll.UntilNil(c.t, timeout, "redis cluster ok on every node", func() error {
		for _, n := range c.nodes {
			info, err := Dial(n.addr, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
				return fmt.Errorf("node %s: %s", n.addr, info)
			}
		}
		return nil
	})
}

type nodeLine struct {
	id, addr, masterID string
	master, failed     bool
	slots              [][2]int
}

// clusterNodes is CLUSTER NODES as the first live node sees it.
func (c *RedisCluster) clusterNodes() []nodeLine {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		nodes, err := clusterNodesOf(n.addr)
		if err != nil {
			c.t.Fatalf("testenv: cluster nodes: %v", err)
		}
		return nodes
	}
	c.t.Fatal("testenv: no redis cluster node runs")
	return nil
}

// clusterNodesOf parses CLUSTER NODES as the node at addr sees it.
func clusterNodesOf(addr string) ([]nodeLine, error) {
	text, err := Dial(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var out []nodeLine
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		n := nodeLine{id: f[0], masterID: f[3]}
		n.addr, _, _ = strings.Cut(f[1], "@")
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "master":
				n.master = true
			case "fail", "fail?":
				n.failed = true
			}
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("node %s: slot range %q", n.addr, r)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// Dial sends one command to the server at addr over a fresh connection and
// returns its reply as Redis.Do does.
func Dial(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}
