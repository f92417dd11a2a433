//go:build race

package statestore

// raceEnabled: the race detector slows the big tests down a lot.
const raceEnabled = true
