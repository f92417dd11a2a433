package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/layout"
)

// listProbe is a bucket that calls probe at every List, and fails a List
// that fail returns an error for.
type listProbe struct {
	blob.Bucket
	probe func()
	fail  func(prefix string) error
}

func (l *listProbe) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	if l.probe != nil {
		l.probe()
	}
	if l.fail != nil {
		if err := l.fail(prefix); err != nil {
			return nil, err
		}
	}
	return l.Bucket.List(ctx, prefix)
}

// TestTermLeadsFromItsStart: a leadership's coordinator may act from its
// first step, which lists the jobs in the bucket. The node trusted its
// lease only once the election loop had carried out the decisions that
// started the leadership; a CI run's coordinator got there first, found
// its lease of epoch 1 "no longer trusted" 7 ms after it began leading,
// and stepped down, and the test's deploy found no leader.
func TestTermLeadsFromItsStart(t *testing.T) {
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var n *Node
	leading := make(chan bool, 1)
	bucket := &listProbe{Bucket: dir, probe: func() {
		select {
		case leading <- n.leading():
		default:
		}
	}}
	n = NewNode(NodeConfig{ID: "c1", Coordinator: Config{Plane: control.NewLocal(), Bucket: bucket, Transport: exchange.NewLocal()}})
	n.startTerm(t.Context(), 1, time.Now().Add(time.Minute))
	select {
	case ok := <-leading:
		if !ok {
			t.Error("the coordinator's first step found the lease not trusted")
		}
	case <-time.After(10 * time.Second):
		t.Error("the coordinator did not list the jobs in 10 s")
	}
	n.endTerm(false, nil)
}

// TestFailedLeaderGivesWay: a coordinator whose leadership ends from
// within (here its Load cannot list the jobs) releases its lease and
// holds off, and a standby leads at once. Before, it kept the lease and
// took it again itself a retry interval later, every time, with a new
// epoch: the standby, whose bucket was fine, never led.
func TestFailedLeaderGivesWay(t *testing.T) {
	dir, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plane := control.NewLocal()
	const ttl = 20 * time.Second
	failed := make(chan struct{})
	var once sync.Once
	broken := &listProbe{Bucket: dir, fail: func(prefix string) error {
		if !strings.HasPrefix(prefix, layout.JobsPrefix) {
			return nil // the recorded epochs: it may take the lease
		}
		once.Do(func() { close(failed) })
		return errors.New("the disk is gone")
	}}
	node := func(id string, b blob.Bucket) *Node {
		return NewNode(NodeConfig{ID: id, Leases: plane, LeaseTTL: ttl,
			Coordinator: Config{Plane: plane, Bucket: b, Transport: exchange.NewLocal()}})
	}
	a, b := node("a", broken), node("b", dir)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	run := func(n *Node) {
		wg.Go(func() {
			if err := n.Run(ctx); err != nil {
				t.Errorf("%s: %v", n.cfg.ID, err)
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	run(a)
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not lead in 10 s")
	}
	run(b)
	deadline := time.Now().Add(ttl / 2)
	for !b.leading() {
		if time.Now().After(deadline) {
			l, _, _ := plane.Current(t.Context())
			t.Fatalf("b does not lead %v after a's leadership failed (the lease's ttl is %v); the lease is held by %+v", ttl/2, ttl, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a.leading() {
		t.Error("a leads too")
	}
}
