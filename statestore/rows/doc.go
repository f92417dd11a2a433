// Package rows is the change tracking and snapshot mechanism of operators
// that keep their keyed state in their own columnar structures instead of
// statestore.Backend tables: the window operator (per key, its windows
// and accumulator slots) and the join operator (the rows it keeps). Both
// write their state as Arrow batches of their own schema, key_group
// first, so that a checkpoint reads well in any Arrow reader and the
// runtime can keep a subtask's key groups after a rescale
// (docs/checkpoint-format.md describes each layout).
//
// What they share lives here, once:
//
//   - Layout: the state schema, key_group first, with unique column names
//     (Namer), and the check a restore makes of a batch's schema;
//   - ChangeLog: what changed since the last snapshot, off until the
//     first snapshot or restore (an operator never checkpointed keeps no
//     list);
//   - Writer: gathers the rows of a snapshot and builds them into batches
//     of at most BatchRows rows with one call per batch, not per row (the
//     window is the hot path of Nexmark q5 and q7), releasing what it
//     built if the snapshot fails;
//   - CheckKeyGroup and DescribeKey: the errors a restore gives for a row
//     outside the subtask's key groups or with a bad key.
//
// How a change is encoded (a replace row, an expire entry) stays the
// operator's: applying a base and then its deltas in order must rebuild
// the state exactly (task.Stateful).
package rows
