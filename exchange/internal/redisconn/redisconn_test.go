package redisconn

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		cluster bool
		hosts   []string
		err     string
	}{
		{in: "127.0.0.1:6379", hosts: []string{"127.0.0.1:6379"}},
		{in: "redis.example:7000", hosts: []string{"redis.example:7000"}},
		{in: "redis+cluster://127.0.0.1:7000", cluster: true, hosts: []string{"127.0.0.1:7000"}},
		{in: "redis+cluster://a:7000, b:7001,", cluster: true, hosts: []string{"a:7000", "b:7001"}},
		{in: "", err: "empty"},
		{in: "127.0.0.1", err: `node "127.0.0.1": want host:port`},
		{in: "a:1,b:2", err: "for a Redis Cluster write redis+cluster://a:1,b:2"},
		{in: "redis://a:1", err: "want host:port, or redis+cluster://"},
		{in: "redis+cluster://", err: "names no node"},
		{in: "redis+cluster://a:1,b:x", err: `node "b:x": port "x"`},
		{in: ":6379", err: "host is empty"},
	} {
		a, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", c.in, a, err, c.err)
			}
			continue
		}
		if err != nil || a.Cluster != c.cluster || !slices.Equal(a.Hosts, c.hosts) {
			t.Errorf("Parse(%q) = %+v, %v; want cluster %t hosts %q", c.in, a, err, c.cluster, c.hosts)
			continue
		}
		if b, err := Parse(a.String()); err != nil || b.Cluster != a.Cluster || !slices.Equal(a.Hosts, b.Hosts) {
			t.Errorf("Parse(%q.String() = %q) = %+v, %v", c.in, a.String(), b, err)
		}
	}
}
