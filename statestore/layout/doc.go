// Package layout names every object weir keeps in its bucket: one function
// per key or prefix, and a parser wherever code picks keys out of a
// listing. Every package that reads or writes the bucket builds its keys
// here, so the layout changes in one place, and the tests pin each key byte
// for byte: buckets written by an earlier weir must stay readable.
//
// Keys are relative to the bucket (and its optional prefix, see
// blob.NewPrefixed) and follow blob.ValidateKey. The whole layout:
//
//	jobs/                                            JobsPrefix: every job
//	  <job>/                                         JobPrefix
//	    spec.json                                    SpecKey: the spec as deployed, written once
//	    status.json                                  StatusKey: the job's status, at each attempt and at its end (no leader epoch)
//	    status/<epoch>.json                          StatusKeyAt: the same, written by the leader of epoch; the highest is read
//	    origin                                       OriginKey: the savepoint manifest key the job started from
//	    checkpoints/                                 CheckpointsPrefix
//	      <n>/manifest.json                          ManifestKey: commit point of checkpoint n, create-only
//	      <n>/...                                    reserved for files only checkpoint n uses (none today)
//	    state/                                       StatePrefix: state files shared by successive checkpoints
//	      <operator>/                                OperatorStatePrefix
//	        <kgStart>-<kgEnd>/
//	          <n>-a<attempt>-<base|delta>.arrow      StateFileKey: written by checkpoint n
//	          <n>-a<attempt>-store-<name>            StoreFileKey: a store's file (a pebble sstable), first uploaded by checkpoint n
//	      _workers/<worker>/
//	        <n>-a<attempt>-<seq>.arrow               StateObjectKey: the state files a worker's subtasks wrote at checkpoint n, packed
//	    savepoints/                                  SavepointsPrefix: never deleted by retention or Delete
//	      <name>/                                    SavepointPrefix
//	        manifest.json                            SavepointManifestKey
//	        state/<operator>/<kgStart>-<kgEnd>/...   SavepointStateKey: copies of the state files
//	    deadletters/
//	      <source>/                                  DeadLetterPrefix
//	        part-<subtask>-a<attempt>-<seq>.jsonl    DeadLetterKey: malformed records (no checkpoints)
//	        part-<subtask>-<job>-a<attempt>-<seq>.jsonl  committed with a checkpoint (a files sink's names)
//	        _staging/<txn>/part-...                  StagedKey: staged until the checkpoint commits
//	coordinator/epochs/<epoch>.json                  EpochKey: one record per leadership, create-only
//	functions/                                       FunctionsPrefix: deployed Wasm functions (docs/wasm-abi.md)
//	  <name>/                                        FunctionPrefix
//	    modules/                                     ModulesPrefix
//	      <sha256>.wasm                              ModuleKey: a module, content-addressed, create-only
//	    versions/                                    VersionsPrefix
//	      <version>.json                             VersionKey: one version's record, create-only
//	    deleted.json                                 FunctionDeletedKey: the last version of a deleted function
//	<sink path>/
//	  <object>                                       SinkObjectKey: a files sink's committed output
//	  _staging/                                      StagingPrefix: staged output, skipped by the files source
//	    <txn>/                                       StagedTxnPrefix: one sink transaction
//	      <object>                                   StagedKey: moved to SinkObjectKey on commit
//
// <job> is a job id (ValidJobID: the job's name, "-" and 8 hex digits), <n>
// a checkpoint id in plain decimal without sign or leading zeros, so
// checkpoint ids do not sort as strings: list CheckpointsPrefix and use
// ParseManifestKey. <operator> and <source> are names from the job spec,
// <seq> is zero-padded to 6 digits. A function's <name> follows
// ValidFunctionName, its <version> counts from 1 zero-padded to 6 digits
// (ParseVersionKey), <sha256> is lower-case hex. A files sink names its
// own objects (part-<subtask>-...); the layout only says where they go.
// The format of the files themselves is in docs/checkpoint-format.md and
// docs/formats.md.
//
// This package imports nothing of weir: it is only names.
package layout
