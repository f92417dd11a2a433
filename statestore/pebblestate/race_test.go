//go:build race

package pebblestate_test

// raceEnabled: the race detector slows pebble down some 40 times, so the
// big tests make fewer changes under it.
const raceEnabled = true
