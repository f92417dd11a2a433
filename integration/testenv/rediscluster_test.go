package testenv

import (
	"testing"
)

// TestRedisCluster: a started cluster serves keys across its shards, and a
// failover hands a shard to its replica, which keeps the shard's data.
func TestRedisCluster(t *testing.T) {
	c := StartRedisCluster(t, 3, 1)
	const key = "{testenv}k"
	shard := c.ShardOf(key)
	old := c.Master(shard)
	if _, err := Dial(old, "SET", key, "v"); err != nil {
		t.Fatalf("set on master %s: %v", old, err)
	}
	if _, err := Dial(old, "WAIT", "1", "5000"); err != nil {
		t.Fatalf("wait for the replica: %v", err)
	}
	promoted := c.Failover(shard)
	if promoted == old || c.Master(shard) != promoted {
		t.Fatalf("after failover of shard %d: master %s, promoted %s, old %s", shard, c.Master(shard), promoted, old)
	}
	if v, err := Dial(promoted, "GET", key); err != nil || v != "v" {
		t.Fatalf("get on the new master %s: %q, %v; want \"v\"", promoted, v, err)
	}
	if _, err := Dial(old, "GET", key); err == nil {
		t.Errorf("get on the old master %s (now a replica) answered, want a MOVED redirect", old)
	}
}
