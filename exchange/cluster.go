package exchange

import (
	"fmt"
	"regexp"
)

// DefaultCluster is the cluster id when none is given. Its keys keep the
// plain "weir:" prefix, so a cluster upgraded from before cluster ids
// finds its keys where they were.
const DefaultCluster = "default"

var clusterRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ValidateCluster checks a cluster id: a lower-case letter or digit, then
// up to 31 lower-case letters, digits or '-'.
func ValidateCluster(id string) error {
	if id == "" || clusterRE.MatchString(id) {
		return nil
	}
	return fmt.Errorf("cluster %q: want a lower-case letter or digit, then up to 31 lower-case letters, digits or '-'", id)
}

// KeyPrefix is what every Redis key of cluster id starts with: "weir:" for
// the default cluster, "weir:<id>:" for another, so that clusters sharing
// one Redis never see each other's workers, commands, events or channels.
func KeyPrefix(id string) string {
	if id == "" || id == DefaultCluster {
		return "weir:"
	}
	return "weir:" + id + ":"
}
