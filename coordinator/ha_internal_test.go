package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/exchange"
	"github.com/weirstream/weir/exchange/control"
	"github.com/weirstream/weir/statestore/blob"
)

// listProbe is a bucket that calls probe at every List.
type listProbe struct {
	blob.Bucket
	probe func()
}

func (l *listProbe) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	l.probe()
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
