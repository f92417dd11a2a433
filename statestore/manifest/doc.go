// Package manifest is the checkpoint manifest: the JSON object that commits
// a checkpoint (or a savepoint) by listing everything a restore needs, for
// every subtask of every vertex: its state files in apply order, its
// sources' positions and its sinks' pre-committed transactions.
//
// The manifest is the commit point. The coordinator writes it last, once
// every subtask has acknowledged, with a conditional create, and only then
// commits the sink transactions it lists:
//
//	data, err := m.Encode() // validates first
//	...
//	err = bucket.PutIfAbsent(ctx, layout.ManifestKey(m.Job, m.Checkpoint), data)
//	// blob.ErrExists: another coordinator committed checkpoint n first
//
// A checkpoint without a manifest never happened; its files are garbage.
// Restore reads the newest manifest (layout.ParseManifestKey picks them
// out of a listing of layout.CheckpointsPrefix) and Decode refuses
// anything truncated, not JSON, or breaking a rule with an error wrapping
// ErrCorrupt, so the caller can fall back to the previous checkpoint. A manifest from a newer weir is
// refused with ErrUnsupportedVersion instead: that checkpoint is fine, and
// falling back past it would replay input whose output sinks have already
// committed.
//
// Files lists what a manifest references, for deleting state files that no
// retained checkpoint needs.
//
// The format, its rules and its versioning are written down in
// docs/checkpoint-format.md; testdata/v1.json is a version 1 manifest that
// every later reader must still read.
package manifest
