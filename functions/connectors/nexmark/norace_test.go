//go:build !race

package nexmark

const raceEnabled = false
