// Package statefile is the codec of checkpoint state files: one operator's
// state over one key group range, as an Arrow IPC file with compressed
// buffers, zstd unless the job says lz4 or none (docs/checkpoint-format.md,
// "State files"). The manifest records
// each file's size and SHA-256 (manifest.File); layout.StateFileKey says
// where it goes.
//
// A task writes a file with Encode and, on restore, reads it back with Read
// (which checks it against its manifest entry) and Decode (which trusts
// nothing in it and bounds what it may allocate). The CLI reads state the
// same way, so a file the tools accept is one a restore accepts:
//
//	f, data, err := statefile.Encode(manifest.File{Key: key, Kind: kind, ...}, schema, batches, mem, arrowfmt.CompressZstd)
//	err = bucket.Put(ctx, f.Key, data)
//	...
//	data, err := statefile.Read(ctx, bucket, f) // *MismatchError if damaged
//	_, batches, err := statefile.Decode(data, schema, mem)
package statefile
