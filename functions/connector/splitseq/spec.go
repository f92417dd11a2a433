package splitseq

import (
	"fmt"
	"strconv"

	"github.com/weirstream/weir/functions/connector"
	"github.com/weirstream/weir/functions/spec"
)

// DefaultSplits is the number of splits of a source whose spec gives
// none. 120 is divisible by every parallelism up to 6 and by 8, 10, 12,
// 15, 20, 24, 30, 40 and 60: at those, every subtask owns as many splits
// (equal shares of the rate) and a position from before splits (event i
// on subtask i % p) converts exactly. It allows rescaling up to 120
// subtasks, near the default 128 key groups, and keeps a position small
// (at most 120 entries).
const DefaultSplits = 120

// MaxSplits bounds the splits field, so a position (one entry a split)
// stays small.
const MaxSplits = 4096

// Splits returns the number of splits of src: its splits field, or
// DefaultSplits.
func Splits(src *spec.Source) int {
	if src.Splits > 0 {
		return src.Splits
	}
	return DefaultSplits
}

// Check reports a splits field out of range (for SourceType.Check;
// spec.Validate reports a negative one).
func Check(src *spec.Source) spec.Problems {
	var ps spec.Problems
	if src.Splits > MaxSplits {
		ps.Add(fmt.Sprintf("sources[%s].splits", src.Name), "%d is above the most, %d: a position holds every split", src.Splits, MaxSplits)
	}
	return ps
}

// Plan reports splits below the source's parallelism, with the job's
// defaults filled in (for SourceType.Plan): every subtask owns a split.
func Plan(src *spec.Source) spec.Problems {
	var ps spec.Problems
	if k := Splits(src); src.Parallelism > k {
		what := fmt.Sprintf("%d", k)
		if src.Splits == 0 {
			what += " (the default)"
		}
		ps.Add(fmt.Sprintf("sources[%s].splits", src.Name), "%s is below the parallelism %d: each subtask generates at least one split; set splits to at least %d", what, src.Parallelism, src.Parallelism)
	}
	return ps
}

// Owned returns the splits subtask of parallelism owns of k
// (connector.OwnsSplit), each at its first event under l.
func (l Layout) Owned(subtask, parallelism int) []Split {
	var sp []Split
	for j := range int(l.K) {
		if connector.OwnsSplit(j, subtask, parallelism) {
			sp = append(sp, Split{ID: j, Next: l.AtOrAfter(j, 0)})
		}
	}
	return sp
}

// Share is the part of the events of src's k splits that subtask of
// parallelism generates (connector.SourceType.Share).
func Share(src *spec.Source, subtask, parallelism int) float64 {
	k := Splits(src)
	n := 0
	for j := range k {
		if connector.OwnsSplit(j, subtask, parallelism) {
			n++
		}
	}
	return float64(n) / float64(k)
}

// ID returns the id of split j of k in a position: j zero-padded to the
// width of k-1, so that the ids sort as the splits do ("007" of 120).
func ID(j, k int) string {
	return fmt.Sprintf("%0*d", len(strconv.Itoa(k-1)), j)
}

// ParseID returns the split an id of one of k splits names.
func ParseID(id string, k int) (int, error) {
	j, err := strconv.Atoi(id)
	if err != nil || j < 0 || j >= k || id != ID(j, k) {
		return 0, fmt.Errorf("%q is not a split id: want %s to %s (of %d splits)", id, ID(0, k), ID(k-1, k), k)
	}
	return j, nil
}
