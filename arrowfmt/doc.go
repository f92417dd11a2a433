// Package arrowfmt is weir's data format: every edge of a job carries Arrow
// record batches of one schema, and this package is what the rest of weir
// uses to describe, build, ship, route and convert them.
//
// # Schemas
//
// A column has one of five types (Type): int64, float64, string, bool and
// timestamp_ms (milliseconds since the epoch, UTC). NewSchema turns job-spec
// fields into an Arrow schema; every column is nullable.
//
// # Building and slicing
//
// Sources and operators append rows with a Builder, whose typed appenders
// (Int64, String, TimestampMs, ...) do not box values; AppendAny is the
// checked path for Go values of unknown type. A RowBuffer is a task's
// output buffer for one channel: it gathers rows from batches, whole or by
// index (a keyBy edge's rows of one target), into memory it keeps, and a
// flush encodes a view of them. Take gathers rows into a new batch; Concat
// joins batches. Value reads one cell as a Go value, for tests and slow
// paths.
//
// # Channels: IPC with the schema sent once
//
// Each channel between two subtasks has one Encoder on the producer side and
// one Decoder on the consumer side. The first payload of an Encoder carries
// the schema message and a record batch message; every later payload only a
// record batch message, so decoding stays cheap:
//
//	enc := arrowfmt.NewEncoder(schema, mem)
//	for rec := range batches {
//		payload, err := enc.Encode(rec) // XADD payload
//		...
//	}
//
//	dec := arrowfmt.NewDecoder(mem)
//	defer dec.Close()
//	for payload := range entries {
//		rec, err := dec.Decode(payload) // points into payload; no copy
//		...
//		rec.Release()
//	}
//
// NewWireEncoder encodes for another process: Arrow buffers compressed
// (WireOptions.Compression) and int64 and timestamp_ms columns in 1, 2 or 4
// bytes a value where their values fit (WireOptions.Compact: compact.go).
// A compact channel sends its schema again when a batch does not fit the
// widths it announced; the Decoder turns every payload back into the
// producer's schema.
//
// Encode returns a fresh slice per payload; AppendEncode writes into a
// buffer the caller reuses, which avoids an allocation per batch (about ten
// times faster for 8K-row batches). A payload is the Arrow IPC streaming
// format's encapsulated messages without the end-of-stream marker, so
// concatenating a channel's payloads (from one schema message to the
// next, for a compact channel) and appending the marker gives a standard
// Arrow stream any Arrow tool reads.
//
// Decode never panics on a malformed payload: it verifies the flatbuffer
// metadata before arrow reads it and every buffer the record will read
// after, so a record it returns is safe to use.
//
// # Keys and key groups
//
// HashKeys hashes the key columns of every row with a hash that is fixed
// across processes and runs (no random seed); HashKeyValues gives the same
// hash from Go values. KeyGroup maps a hash to one of maxParallelism key
// groups (DefaultMaxParallelism), and subtask i of p owns the key groups
// KeyGroupRange(i, K, p) = [ceil(i*K/p), ceil((i+1)*K/p)), the subtask
// SubtaskForKeyGroup names, as in Flink. Rescaling moves whole key groups.
//
// KeyString encodes a row's key values as a compact, unambiguous string, the
// map key of keyed state; DecodeKeyString turns it back into values and
// AppendKey builds it from Go values.
//
// # JSON lines
//
// JSONDecoder appends JSON lines to a batch, rejecting a bad line as a whole
// with a *RecordError that names the field, the value and what was expected.
// AppendJSONRow and WriteJSONLines write rows back as JSON lines.
// Parquet is written by the subpackage parquetfmt, so that importers of
// arrowfmt do not compile arrow-go's Parquet writer and what it pulls in.
package arrowfmt
