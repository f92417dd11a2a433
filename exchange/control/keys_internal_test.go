package control

import (
	"strings"
	"testing"
)

// hashTag is the part of key Redis Cluster hashes: between the first '{'
// and the next '}', when not empty.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	tag, _, closed := strings.Cut(rest, "}")
	if !ok || !closed || tag == "" {
		return key
	}
	return tag
}

// TestCtlBase: one server keeps the key names weir had before Redis
// Cluster support; on a cluster every control key of a weir cluster has
// one hash tag, so one slot, and clusters get different tags.
func TestCtlBase(t *testing.T) {
	for _, c := range []struct {
		id      string
		cluster bool
		want    string
	}{
		{"", false, "weir:ctl:"},
		{"default", false, "weir:ctl:"},
		{"blue", false, "weir:blue:ctl:"},
		{"", true, "weir:{ctl}:"},
		{"default", true, "weir:{ctl}:"},
		{"blue", true, "weir:{blue:ctl}:"},
	} {
		if got := ctlBase(c.id, c.cluster); got != c.want {
			t.Errorf("ctlBase(%q, %t) = %q, want %q", c.id, c.cluster, got, c.want)
		}
	}
	for _, id := range []string{"default", "blue"} {
		base := ctlBase(id, true)
		want := hashTag(base + keyWorkers)
		for _, k := range []string{keyAlive + "w1", keyInbox + "w-2", keyEvents, keyLeader, keyEpoch} {
			if got := hashTag(base + k); got != want {
				t.Errorf("cluster %s: key %s hashes %q, %s hashes %q", id, base+k, got, base+keyWorkers, want)
			}
		}
	}
	if hashTag(ctlBase("default", true)+keyWorkers) == hashTag(ctlBase("blue", true)+keyWorkers) {
		t.Errorf("clusters default and blue share a hash tag")
	}
}
