package integration

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// layers ranks weir's top-level folders: a package may import packages of
// its own folder and of folders ranked lower, never higher, so no two
// folders import each other (docs/architecture.md draws the same picture).
var layers = map[string]int{
	"arrowfmt":    0,
	"statestore":  1,
	"exchange":    2,
	"functions":   3,
	"coordinator": 4,
	"deploy":      4,
	"examples":    4,
	"cli":         5,
	"integration": 6,
}

// testSupport are test helpers the contract suites of lower folders use
// (exchangetest polls); they import nothing of weir, so they cannot close
// a cycle.
var testSupport = map[string]bool{
	module + "integration/poll":      true,
	module + "integration/tracetest": true,
}

const module = "github.com/weirstream/weir/"

// TestFolderLayers checks every package's imports (tests excluded) against
// layers.
func TestFolderLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		from := folderOf(t, p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if testSupport[p.ImportPath] {
				t.Errorf("%s imports %s: a test-support package must import nothing of weir", p.ImportPath, imp)
			}
			to := folderOf(t, imp)
			if from != to && layers[to] >= layers[from] && !testSupport[imp] {
				t.Errorf("%s imports %s: %s/ may not import %s/", p.ImportPath, imp, from, to)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d imports checked: go list found too little", checked)
	}
}

func folderOf(t *testing.T, path string) string {
	rest, ok := strings.CutPrefix(path, module)
	if !ok {
		t.Fatalf("%s is not in module %s", path, module)
	}
	top, _, _ := strings.Cut(rest, "/")
	if _, ok := layers[top]; !ok {
		t.Errorf("%s: top-level folder %s/ has no layer; add it to layers and docs/architecture.md", path, top)
	}
	return top
}

// TestEveryTestPackageChecksLeaks: a package with tests checks, after
// them, that no goroutine is left (goleak), so a component that forgets
// one of its goroutines fails its own tests.
func TestEveryTestPackageChecksLeaks(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files := append(p.TestGoFiles, p.XTestGoFiles...)
		if len(files) == 0 {
			continue
		}
		checked++
		found := false
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			// exchangetest.RunWithoutLeaks is goleak with a grace
			// period for go-redis's dial probe.
			if strings.Contains(string(data), "goleak.") || strings.Contains(string(data), "exchangetest.RunWithoutLeaks(") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s has tests but no goleak check: add a main_test.go with goleak.VerifyTestMain", p.ImportPath)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d test packages found", checked)
	}
}
