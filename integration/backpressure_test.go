package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/coordinator"
	"github.com/weirstream/weir/integration/poll"
)

// TestBackpressure throttles a sink to 500 rows/s behind a network edge:
// the source's rate falls to match, and every channel in Redis stays within
// its credits.
func TestBackpressure(t *testing.T) {
	c := startCluster(t, 2, 2)
	id := c.deploy("testdata/backpressure.yaml")
	c.waitState(id, coordinator.JobRunning, time.Minute)

	const credits, batchRows, producers = 4, 256, 2
	var src, snk int64
	// Wait until the sink has written a few seconds' worth, then compare
	// what the source read with what the sink took.
	poll.UntilNil(t, time.Minute, "sink progress", func() error {
		st, err := c.status(id)
		if err != nil {
			return err
		}
		src, snk = vertexIn(st, "gen"), vertexIn(st, "slow")
		if snk < 3000 {
			return fmt.Errorf("sink has %d rows", snk)
		}
		return nil
	})
	// In flight between them at most: per producer, credits entries in
	// the channel, one blocked on credit, one buffered, one batch being
	// polled; plus one second of metric-report skew at the sink's rate.
	slack := int64(producers*(credits+3)*batchRows + 500)
	t.Logf("source read %d rows, sink took %d (slack allowed %d)", src, snk, slack)
	if src > snk+slack {
		t.Errorf("source ran ahead: read %d rows, sink took %d; backpressure should hold it within %d", src, snk, slack)
	}

	// Redis holds at most credits data entries per channel.
	keys, err := c.redis.Do("KEYS", "weir:{*}:ch:*")
	if err != nil {
		t.Fatal(err)
	}
	chans := strings.Fields(keys)
	if len(chans) != producers {
		t.Fatalf("channels in Redis: %q, want %d", keys, producers)
	}
	for _, k := range chans {
		n, err := c.redis.Do("XLEN", k)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := c.redis.Do("MEMORY", "USAGE", k)
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := strconv.Atoi(n)
		bytes, _ := strconv.Atoi(mem)
		t.Logf("channel %s: %d entries, %d bytes", k, entries, bytes)
		if entries > credits {
			t.Errorf("channel %s holds %d entries, more than its %d credits", k, entries, credits)
		}
		// An entry of 256 rows (id, ~10-byte payload) is ~6 KiB of Arrow
		// IPC; 64 KiB each is a generous bound that an unbounded queue
		// (millions of rows) would blow through.
		if bytes > credits*64<<10 {
			t.Errorf("channel %s uses %d bytes of Redis memory, more than credits x batch", k, bytes)
		}
	}
	if _, err := c.weir("jobs", "cancel", id); err != nil {
		t.Fatal(err)
	}
	c.waitState(id, coordinator.JobCanceled, 30*time.Second)
	poll.UntilNil(t, 10*time.Second, "channels deleted", func() error {
		keys, err := c.redis.Do("KEYS", "weir:{*")
		if err != nil {
			return err
		}
		if keys != "" {
			return fmt.Errorf("left: %q", keys)
		}
		return nil
	})
}

func vertexIn(st coordinator.JobStatus, vertex string) int64 {
	for _, v := range st.Vertices {
		if v.Name == vertex {
			return v.Totals.RecordsIn
		}
	}
	return -1
}
