//go:build race

package nexmark

// raceEnabled: the race detector's runtime allocates now and then, so
// exact allocation counts are not checked under it.
const raceEnabled = true
