package layout

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// JobsPrefix is the prefix of every job's objects.
const JobsPrefix = "jobs/"

// jobIDRE is the rule for job ids: a job name (a letter, then up to 62
// letters, digits, '_' or '-') plus "-" and 8 hex digits.
var jobIDRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,71}$`)

// ValidJobID reports whether id can be a job id, and so a segment of the
// keys below.
func ValidJobID(id string) bool { return jobIDRE.MatchString(id) }

// JobPrefix is the prefix of every object of one job: jobs/<job>/.
func JobPrefix(job string) string { return JobsPrefix + job + "/" }

// SpecKey is where a job's spec lives: jobs/<job>/spec.json.
func SpecKey(job string) string { return JobPrefix(job) + "spec.json" }

// ParseSpecKey is the inverse of SpecKey: it picks the job specs out of a
// listing of JobsPrefix. It does not check the job id's syntax, so that a
// coordinator lists every job it stored.
func ParseSpecKey(key string) (job string, ok bool) {
	rest, ok := strings.CutPrefix(key, JobsPrefix)
	if !ok {
		return "", false
	}
	job, file, ok := strings.Cut(rest, "/")
	if !ok || file != "spec.json" {
		return "", false
	}
	return job, true
}

// StatusKey is where a job's status lives when no leader epoch wrote it
// (an embedded coordinator, or a bucket of an earlier weir):
// jobs/<job>/status.json.
func StatusKey(job string) string { return JobPrefix(job) + "status.json" }

// StatusKeyAt is where the coordinator leading with epoch (> 0) writes a
// job's status: jobs/<job>/status/<epoch>.json, the epoch in 20 digits so
// keys sort as numbers. Readers take the highest epoch's (StatusPrefix
// lists them all, with StatusKey), so a deposed leader's late write is
// never read.
func StatusKeyAt(job string, epoch int64) string {
	if epoch <= 0 {
		return StatusKey(job)
	}
	return fmt.Sprintf("%sstatus/%020d.json", JobPrefix(job), epoch)
}

// StatusPrefix lists every status of a job: StatusKey and StatusKeyAt's.
func StatusPrefix(job string) string { return JobPrefix(job) + "status" }

// ParseStatusKey is the inverse of StatusKeyAt (and StatusKey, epoch 0)
// for a key of job's.
func ParseStatusKey(job, key string) (epoch int64, ok bool) {
	if key == StatusKey(job) {
		return 0, true
	}
	return parseEpochFile(key, JobPrefix(job)+"status/")
}

// parseEpochFile parses prefix + <epoch in 20 digits, > 0> + ".json".
func parseEpochFile(key, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// EpochsPrefix holds one record per coordinator leadership: coordinator/epochs/.
func EpochsPrefix() string { return "coordinator/epochs/" }

// EpochKey records that a coordinator led with epoch, created once when
// it took the lease: coordinator/epochs/<epoch>.json (20 digits). A new
// leader's epoch is above every recorded one, even when Redis lost its
// counter.
func EpochKey(epoch int64) string { return fmt.Sprintf("%s%020d.json", EpochsPrefix(), epoch) }

// ParseEpochKey is the inverse of EpochKey.
func ParseEpochKey(key string) (int64, bool) { return parseEpochFile(key, EpochsPrefix()) }

// OriginKey holds the manifest key a job was started from (a savepoint):
// jobs/<job>/origin.
func OriginKey(job string) string { return JobPrefix(job) + "origin" }

// CheckpointsPrefix is the prefix of a job's checkpoints:
// jobs/<job>/checkpoints/.
func CheckpointsPrefix(job string) string { return JobPrefix(job) + "checkpoints/" }

// ManifestKey is the key of a checkpoint's manifest:
// jobs/<job>/checkpoints/<checkpoint>/manifest.json, with the checkpoint in
// plain decimal (so list results sort as strings, not numbers: use
// ParseManifestKey).
func ManifestKey(job string, checkpoint int64) string {
	return CheckpointsPrefix(job) + strconv.FormatInt(checkpoint, 10) + "/manifest.json"
}

// ParseManifestKey is the inverse of ManifestKey. It reports ok only for a
// key ManifestKey returns for a valid job id (ValidJobID) and a checkpoint
// > 0 (no sign, no leading zeros), so a listing of CheckpointsPrefix can
// pick manifests out safely. A savepoint's manifest is not a checkpoint's:
// it is refused.
func ParseManifestKey(key string) (job string, checkpoint int64, ok bool) {
	rest, ok := strings.CutPrefix(key, JobsPrefix)
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, "/manifest.json")
	if !ok {
		return "", 0, false
	}
	job, n, ok := strings.Cut(rest, "/checkpoints/")
	if !ok || !ValidJobID(job) || n == "" || n[0] == '0' {
		return "", 0, false
	}
	for _, c := range []byte(n) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	checkpoint, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return job, checkpoint, true
}

// StatePrefix is the prefix of a job's state files: jobs/<job>/state/.
func StatePrefix(job string) string { return JobPrefix(job) + "state/" }

// OperatorStatePrefix is the prefix of one operator's state files:
// jobs/<job>/state/<operator>/.
func OperatorStatePrefix(job, operator string) string { return StatePrefix(job) + operator + "/" }

// StateFileKey is where a state file goes: the state of operator over key
// groups [kgStart, kgEnd) written by attempt attempt at checkpoint
// checkpoint, kind "base" or "delta":
// jobs/<job>/state/<operator>/<kgStart>-<kgEnd>/<checkpoint>-a<attempt>-<kind>.arrow.
func StateFileKey(job, operator string, kgStart, kgEnd int, checkpoint int64, attempt int, kind string) string {
	return OperatorStatePrefix(job, operator) + fmt.Sprintf("%d-%d/%d-a%d-%s.arrow", kgStart, kgEnd, checkpoint, attempt, kind)
}

// storeFileRE matches what follows the checkpoint of a StoreFileKey.
var storeFileRE = regexp.MustCompile(`^a[0-9]+-store-.`)

// StoreFileKey is the key of the file name of an operator's store
// captured as files (a pebble sstable, say) at checkpoint checkpoint of
// attempt attempt, by the subtask owning key groups [kgStart, kgEnd):
// jobs/<job>/state/<operator>/<kgStart>-<kgEnd>/<checkpoint>-a<attempt>-store-<name>.
// Later checkpoints list an unchanged file under the key it was first
// uploaded to, also those of a subtask that, after a rescale, kept the
// files of a store over other key groups.
func StoreFileKey(job, operator string, kgStart, kgEnd int, checkpoint int64, attempt int, name string) string {
	return OperatorStatePrefix(job, operator) + fmt.Sprintf("%d-%d/%d-a%d-store-%s", kgStart, kgEnd, checkpoint, attempt, name)
}

// StateObjectKey is where a worker writes the state files its subtasks of
// one job attempt took at one checkpoint, packed into one object (package
// statepack): jobs/<job>/state/_workers/<worker>/<n>-a<attempt>-<seq>.arrow,
// seq numbering the worker's objects of the attempt. Characters of the
// worker's id other than letters, digits, '.', '_' and '-' become '_'.
// Operator names start with a letter, so _workers is no operator's.
func StateObjectKey(job, worker string, checkpoint int64, attempt, seq int) string {
	return StatePrefix(job) + "_workers/" + keySegment(worker) + fmt.Sprintf("/%d-a%d-%d.arrow", checkpoint, attempt, seq)
}

// keySegment makes s one key segment: no '/', nothing a key refuses.
func keySegment(s string) string {
	b := []byte(s)
	if len(b) > 128 {
		b = b[:128]
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// StateFileCheckpoint returns the checkpoint that wrote a state file key
// (StateFileKey), store file (StoreFileKey) or state object
// (StateObjectKey), ok=false for a key of another shape. It reads only the
// last segment, so it also parses the state files a savepoint copied
// (SavepointStateKey).
func StateFileCheckpoint(key string) (int64, bool) {
	name := key[strings.LastIndexByte(key, '/')+1:]
	n, rest, ok := strings.Cut(name, "-")
	if !ok || !strings.HasSuffix(name, ".arrow") && !storeFileRE.MatchString(rest) {
		return 0, false
	}
	id, err := strconv.ParseInt(n, 10, 64)
	return id, err == nil && id > 0
}

// SavepointsPrefix is the prefix of a job's savepoints:
// jobs/<job>/savepoints/.
func SavepointsPrefix(job string) string { return JobPrefix(job) + "savepoints/" }

// SavepointPrefix is the prefix of one savepoint's objects:
// jobs/<job>/savepoints/<name>/.
func SavepointPrefix(job, name string) string { return SavepointsPrefix(job) + name + "/" }

// SavepointManifestKey is the key of a savepoint's manifest:
// jobs/<job>/savepoints/<name>/manifest.json.
func SavepointManifestKey(job, name string) string {
	return SavepointPrefix(job, name) + "manifest.json"
}

// SavepointStateKey is where a savepoint keeps its copy of the state file
// stateKey: what follows the first "/state/" of stateKey (all of it if
// there is none) under jobs/<job>/savepoints/<name>/state/. A state file
// of a job restored from a savepoint maps to the same relative key.
func SavepointStateKey(job, name, stateKey string) string {
	rest := stateKey
	if i := strings.Index(rest, "/state/"); i >= 0 {
		rest = rest[i+len("/state/"):]
	}
	return SavepointPrefix(job, name) + "state/" + rest
}

// DeadLetterPrefix is where a job's dead letters of one source are
// written: jobs/<job>/deadletters/<source>/.
func DeadLetterPrefix(job, source string) string {
	return JobPrefix(job) + "deadletters/" + source + "/"
}

// DeadLetterKey is the seq-th dead-letter object that attempt attempt of
// subtask subtask of source wrote:
// jobs/<job>/deadletters/<source>/part-<subtask>-a<attempt>-<seq>.jsonl,
// seq zero-padded to 6 digits.
func DeadLetterKey(job, source string, subtask, attempt, seq int) string {
	return DeadLetterPrefix(job, source) + fmt.Sprintf("part-%d-a%d-%06d.jsonl", subtask, attempt, seq)
}

// SinkObjectKey is where a files sink writing under path puts its object
// name: <path>/<name> (a trailing '/' of path is dropped).
func SinkObjectKey(path, name string) string { return strings.TrimRight(path, "/") + "/" + name }

// StagingPrefix is where a files sink writing under path stages its
// transactions: <path>/_staging/. The files source skips it.
func StagingPrefix(path string) string { return strings.TrimRight(path, "/") + "/_staging/" }

// StagedTxnPrefix is the prefix of one sink transaction's staged objects:
// <path>/_staging/<txn>/.
func StagedTxnPrefix(path, txn string) string { return StagingPrefix(path) + txn + "/" }

// StagedKey is where transaction txn of a files sink writing under path
// stages object name until it commits to SinkObjectKey(path, name):
// <path>/_staging/<txn>/<name>.
func StagedKey(path, txn, name string) string { return StagedTxnPrefix(path, txn) + name }

// ParseStagedKey splits a key under StagingPrefix(path) into its
// transaction and the rest of the key (the object name, which may hold
// further '/'); ok=false for a key that is not under a transaction there.
func ParseStagedKey(path, key string) (txn, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, StagingPrefix(path))
	if !ok {
		return "", "", false
	}
	txn, name, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	return txn, name, true
}

// FunctionsPrefix is the prefix of every deployed Wasm function's
// objects.
const FunctionsPrefix = "functions/"

// functionNameRE is the rule for a deployed function's name: a lower-case
// letter, then up to 62 lower-case letters, digits, '_' or '-'. Lower case
// only, so that two names never share a directory on a case-insensitive
// file system; no '@', which separates a version in a job spec's
// reference (NAME@VERSION).
var functionNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// ValidFunctionName reports whether name can be a deployed function's
// name, and so a segment of the keys below.
func ValidFunctionName(name string) bool { return functionNameRE.MatchString(name) }

// FunctionPrefix is the prefix of every object of one deployed function:
// functions/<name>/.
func FunctionPrefix(name string) string { return FunctionsPrefix + name + "/" }

// ModulesPrefix is the prefix of a function's modules:
// functions/<name>/modules/.
func ModulesPrefix(name string) string { return FunctionPrefix(name) + "modules/" }

// ModuleKey is where a function's module is stored, named by the
// lower-case hex SHA-256 of its bytes: functions/<name>/modules/<sha256>.wasm.
func ModuleKey(name, sha256 string) string { return ModulesPrefix(name) + sha256 + ".wasm" }

// VersionsPrefix is the prefix of a function's version records:
// functions/<name>/versions/.
func VersionsPrefix(name string) string { return FunctionPrefix(name) + "versions/" }

// VersionKey is the record of one version of a function:
// functions/<name>/versions/<version>.json, the version zero-padded to 6
// digits (a version past 999999 has more, so use ParseVersionKey rather
// than the listing's order).
func VersionKey(name string, version int) string {
	return VersionsPrefix(name) + fmt.Sprintf("%06d.json", version)
}

// ParseVersionKey is the inverse of VersionKey. It reports ok only for a
// valid function name (ValidFunctionName) and a version > 0 of at least 6
// digits with no more leading zeros than the padding needs, so a listing
// of FunctionsPrefix can pick version records out safely.
func ParseVersionKey(key string) (name string, version int, ok bool) {
	rest, ok := strings.CutPrefix(key, FunctionsPrefix)
	if !ok {
		return "", 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	if !ok {
		return "", 0, false
	}
	name, n, ok := strings.Cut(rest, "/versions/")
	if !ok || !ValidFunctionName(name) || len(n) < 6 || len(n) > 6 && n[0] == '0' {
		return "", 0, false
	}
	for _, c := range []byte(n) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	v, err := strconv.Atoi(n)
	if err != nil || v <= 0 || int64(v) > 1<<31-1 {
		return "", 0, false
	}
	return name, v, true
}

// FunctionDeletedKey marks a function that was deleted, with the last
// version it had, so that deploying the name again continues the count
// (versions are never reused): functions/<name>/deleted.json.
func FunctionDeletedKey(name string) string { return FunctionPrefix(name) + "deleted.json" }
