package spec_test

import (
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

func TestAutoscaleParse(t *testing.T) {
	job, err := spec.Parse([]byte(valid+`autoscale:
  enabled: true
  maxParallelism: 4
  targetUtilization: 0.6
  window: 10s
  scaleToZero: 2m
`), "job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, on := job.EffectiveAutoscale()
	want := spec.Autoscale{Enabled: true, MinParallelism: 1, MaxParallelism: 4, TargetUtilization: 0.6,
		Window: spec.Duration(10 * time.Second), Stabilization: spec.Duration(30 * time.Second),
		CatchUp: spec.Duration(time.Minute), ScaleToZero: spec.Duration(2 * time.Minute)}
	if !on || got != want {
		t.Errorf("EffectiveAutoscale() = %+v, %v; want %+v, true", got, on, want)
	}
}

func TestEffectiveAutoscale(t *testing.T) {
	if _, on := (&spec.Job{}).EffectiveAutoscale(); on {
		t.Error("a job without an autoscale section is autoscaled")
	}
	j := &spec.Job{Autoscale: &spec.Autoscale{}}
	a, on := j.EffectiveAutoscale()
	if on {
		t.Error("a section without enabled: true turns the autoscaler on")
	}
	if a != spec.DefaultAutoscale {
		t.Errorf("defaults = %+v, want %+v", a, spec.DefaultAutoscale)
	}
	// The default maximum never exceeds the job's key groups.
	j = &spec.Job{MaxParallelism: 4, Autoscale: &spec.Autoscale{Enabled: true}}
	if a, _ := j.EffectiveAutoscale(); a.MaxParallelism != 4 {
		t.Errorf("maxParallelism = %d with 4 key groups, want 4", a.MaxParallelism)
	}
}

func TestAutoscaleValidate(t *testing.T) {
	for _, tc := range []struct {
		section, field, want string
	}{
		{"{maxParallelism: 200}", "autoscale.maxParallelism",
			"job.yaml:20: autoscale.maxParallelism: 200 is out of range: want 1..maxParallelism (128, the key groups), or 0 for the default (8)"},
		{"{minParallelism: 4, maxParallelism: 2}", "autoscale.maxParallelism",
			"job.yaml:20: autoscale.maxParallelism: 2 is less than minParallelism 4"},
		{"{minParallelism: -1}", "autoscale.minParallelism",
			"job.yaml:20: autoscale.minParallelism: -1 is out of range: want 1..maxParallelism (128), or 0 for the default (1)"},
		{"{targetUtilization: 1.5}", "autoscale.targetUtilization",
			"job.yaml:20: autoscale.targetUtilization: 1.5 is out of range: want a share in (0, 1], e.g. 0.7"},
		{"{catchUp: -1s}", "autoscale.catchUp",
			"job.yaml:20: autoscale.catchUp: -1s is negative: want a duration such as 30s"},
		{"{scaleToZero: 5s}", "autoscale.scaleToZero",
			"job.yaml:20: autoscale.scaleToZero: 5s is shorter than the window 20s: want at least the window, or leave it out to never suspend"},
		{"{window: soon}", "autoscale.window",
			`job.yaml:20: autoscale.window: "soon" is not a duration: want e.g. 500ms, 5s, 1m30s, 2h or 7d`},
		{"{enabled: yes}", "autoscale.enabled",
			`job.yaml:20: autoscale.enabled: "yes" is not a boolean: want true or false`},
		{"{minParalelism: 2}", "autoscale.minParalelism",
			`job.yaml:20: autoscale.minParalelism: unknown field "minParalelism" (did you mean "minParallelism"?); accepted: catchUp, enabled, maxParallelism, minParallelism, scaleToZero, stabilization, targetUtilization, window`},
	} {
		_, err := spec.Parse([]byte(valid+"autoscale: "+tc.section+"\n"), "job.yaml")
		if got := problemAt(t, problems(t, err), tc.field).Error(); got != tc.want {
			t.Errorf("autoscale: %s:\n got %s\nwant %s", tc.section, got, tc.want)
		}
	}
}
