package blob

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey is returned, wrapped with the key and the reason, for a key
// that no backend accepts. Every backend applies the same rules so a bucket
// can move between a directory and S3.
var ErrInvalidKey = errors.New("blob: invalid key")

// maxKeyLen is S3's limit on a key, in bytes.
const maxKeyLen = 1024

// tmpPrefix starts the names of the directory store's temporary files; a
// key segment may not start with it, so List never confuses the two.
const tmpPrefix = ".weir-tmp-"

// ValidateKey reports whether key is acceptable to every backend: non-empty
// UTF-8 of at most 1024 bytes, '/'-separated segments that are not empty,
// "." or "..", with no leading or trailing '/', no NUL byte, and no segment
// starting with ".weir-tmp-" (reserved for the directory store's temporary
// files).
func ValidateKey(key string) error {
	if reason := keyProblem(key); reason != "" {
		return fmt.Errorf("key %q: %s: %w", key, reason, ErrInvalidKey)
	}
	return nil
}

func keyProblem(key string) string {
	switch {
	case key == "":
		return "empty"
	case len(key) > maxKeyLen:
		return fmt.Sprintf("longer than %d bytes", maxKeyLen)
	case !utf8.ValidString(key):
		return "not valid UTF-8"
	case strings.IndexByte(key, 0) >= 0:
		return "contains a NUL byte"
	case strings.HasPrefix(key, "/"):
		return "starts with '/' (keys are relative)"
	case strings.HasSuffix(key, "/"):
		return "ends with '/'"
	}
	for seg := range strings.SplitSeq(key, "/") {
		if p := segmentProblem(seg); p != "" {
			return p
		}
	}
	return ""
}

func segmentProblem(seg string) string {
	switch {
	case seg == "":
		return "contains an empty segment (\"//\")"
	case seg == "." || seg == "..":
		return fmt.Sprintf("contains a %q segment", seg)
	case strings.HasPrefix(seg, tmpPrefix):
		return fmt.Sprintf("segment %q starts with the reserved %q", seg, tmpPrefix)
	}
	return ""
}

// validatePrefix checks a List prefix: any string whose complete segments
// (everything up to the last '/') would be valid in a key. The last, partial
// segment is only a filter and may be anything.
func validatePrefix(prefix string) error {
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return nil
	}
	if reason := keyProblem(prefix[:i]); reason != "" {
		return fmt.Errorf("list prefix %q: %s: %w", prefix, reason, ErrInvalidKey)
	}
	return nil
}
