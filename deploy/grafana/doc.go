// Package grafana holds weir's Grafana dashboard, weir.json, and the test
// that keeps it honest: every metric a panel queries is a family the
// coordinator or a worker exports (read from the collectors' Describe, not
// from a list), and only counters are put through rate(). README.md says
// how to import it.
package grafana
