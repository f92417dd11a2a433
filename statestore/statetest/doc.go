// Package statetest is the contract suite of statestore.Backend: Run checks
// what every keyed-state backend must do (tables scoped to key group, key
// and namespace; the list, map, reducing and aggregating kinds over them;
// timers; change tracking; base and delta snapshots as Arrow batches with
// key_group first; restore by key-group range), so that the in-memory
// backend and any later one (pebble) are held to the same behaviour. A
// backend's package runs it from a test:
//
//	func TestContract(t *testing.T) {
//		statetest.Run(t, func(t *testing.T, start, end int) statestore.Backend {
//			return statestore.NewMemory(start, end)
//		})
//	}
package statetest
