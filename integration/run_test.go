package integration

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/integration/testenv"
)

// TestRunExitStatus: `weir run` tells FINISHED (0, see TestEmbeddedWindows)
// from FAILED (1) and from a spec it refuses (2).
func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	port := testenv.FreePort(t) // nothing listens there
	failing := writeSpec(t, `
job: fails
sources:
  - {name: in, type: redis, addr: "127.0.0.1:`+strconv.Itoa(port)+`", stream: s, schema: {id: int64}}
sinks:
  - {name: out, input: in, type: stdout}
`)
	_, err := runWeir(os.Environ(), "run", failing, "--store", "file://"+dir)
	if code := exitCode(err); code != 1 {
		t.Errorf("a failing job: exit %d, want 1 (%v)", code, err)
	}
	if err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "in[0]") {
		t.Errorf("the failure should name the job state and the failing subtask: %v", err)
	}
	_, err = runWeir(os.Environ(), "run", "testdata/bad/wrong-type.yaml", "--store", "file://"+dir)
	if code := exitCode(err); code != 2 {
		t.Errorf("a refused spec: exit %d, want 2 (%v)", code, err)
	}
	if err == nil || !strings.Contains(err.Error(), "wrong-type.yaml:") {
		t.Errorf("the refusal should name the file and line: %v", err)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
