package worker

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUsageMeter burns some CPU between two samples: the second says how
// many cores that was, and the process's memory.
func TestUsageMeter(t *testing.T) {
	var m usageMeter
	t0 := time.Now()
	first := m.sample(t0, 3)
	if first.Tasks != 3 || first.CPUCores != 0 || !first.At.Equal(t0) {
		t.Fatalf("first sample %+v: want 3 tasks, no CPU rate yet", first)
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
	}
	second := m.sample(time.Now(), 1)
	if second.CPUSeconds <= first.CPUSeconds || second.CPUCores <= 0.05 || second.CPUCores > float64(runtime.NumCPU())+0.5 {
		t.Errorf("after 200ms of spinning: %+v (first %+v), want about a core", second, first)
	}
	if runtime.GOOS == "linux" && second.RSSBytes < 1<<20 {
		t.Errorf("resident memory %d bytes", second.RSSBytes)
	}
}
