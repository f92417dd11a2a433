package spec_test

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/functions/spec"
)

// lineOf returns the 1-based line of the first line of src containing
// marker; a test names where a problem should point by quoting that line.
func lineOf(t *testing.T, src, marker string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("marker %q not in spec:\n%s", marker, src)
	return 0
}

// problems returns the spec.Problems in err, failing the test if err holds
// none.
func problems(t *testing.T, err error) spec.Problems {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want problems")
	}
	ps, ok := spec.AsProblems(err)
	if !ok {
		t.Fatalf("error %v (%T) holds no spec.Problems", err, err)
	}
	if len(ps) == 0 {
		t.Fatalf("error %v holds an empty Problems", err)
	}
	return ps
}

// problemAt returns the problem with the given field, failing the test
// (and listing every problem) when there is none.
func problemAt(t *testing.T, ps spec.Problems, field string) spec.Problem {
	t.Helper()
	for _, p := range ps {
		if p.Field == field {
			return p
		}
	}
	t.Fatalf("no problem at field %q; got:\n%s", field, ps.Error())
	return spec.Problem{}
}

// wantMsg fails unless msg contains every one of subs.
func wantMsg(t *testing.T, p spec.Problem, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(p.Msg, s) {
			t.Errorf("problem %q: message lacks %q", p.Error(), s)
		}
	}
}
