//go:build !race

package pebblestate_test

const raceEnabled = false
