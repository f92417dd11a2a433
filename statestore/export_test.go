package statestore

// SetStepRows sets how many rows a capture's step writes between looks at
// the clock, for the external tests, and returns a function that puts it
// back.
func SetStepRows(n int) (restore func()) {
	old := stepRows
	stepRows = n
	return func() { stepRows = old }
}
