package spec_test

import (
	"testing"
	"time"

	"github.com/weirstream/weir/functions/spec"
)

func TestEffectiveRestart(t *testing.T) {
	ms := func(n int) spec.Duration { return spec.Duration(time.Duration(n) * time.Millisecond) }
	ckpt := &spec.Checkpoint{Interval: ms(1000)}
	for _, tc := range []struct {
		name    string
		ckpt    *spec.Checkpoint
		restart *spec.Restart
		want    spec.Restart
	}{
		{"neither: no restarts", nil, nil, spec.Restart{}},
		{"checkpointed: unlimited, immediate, then 100ms up to 10s", ckpt, nil,
			spec.Restart{Attempts: -1, Backoff: ms(100), MaxBackoff: ms(10000), ResetAfter: ms(60000), Immediate: true}},
		{"uncheckpointed section: today's defaults", nil, &spec.Restart{},
			spec.Restart{Attempts: 10, Backoff: ms(1000), MaxBackoff: ms(30000), ResetAfter: ms(60000)}},
		{"checkpointed with attempts: the rest is the default sequence", ckpt, &spec.Restart{Attempts: 2},
			spec.Restart{Attempts: 2, Backoff: ms(100), MaxBackoff: ms(10000), ResetAfter: ms(60000), Immediate: true}},
		{"a backoff the user set is the first delay", ckpt, &spec.Restart{Backoff: ms(2000)},
			spec.Restart{Attempts: -1, Backoff: ms(2000), MaxBackoff: ms(10000), ResetAfter: ms(60000)}},
		{"maxBackoff follows a larger backoff", ckpt, &spec.Restart{Backoff: ms(20000)},
			spec.Restart{Attempts: -1, Backoff: ms(20000), MaxBackoff: ms(20000), ResetAfter: ms(60000)}},
		{"unlimited without checkpoints", nil, &spec.Restart{Attempts: spec.UnlimitedAttempts},
			spec.Restart{Attempts: -1, Backoff: ms(1000), MaxBackoff: ms(30000), ResetAfter: ms(60000)}},
		{"Immediate in a section is ignored", nil, &spec.Restart{Attempts: 1, Immediate: true},
			spec.Restart{Attempts: 1, Backoff: ms(1000), MaxBackoff: ms(30000), ResetAfter: ms(60000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &spec.Job{Checkpoint: tc.ckpt, Restart: tc.restart}
			if got := j.EffectiveRestart(); got != tc.want {
				t.Errorf("EffectiveRestart() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRestartAttemptsValidate(t *testing.T) {
	for _, ok := range []string{"-1", "0", "3"} {
		job, err := spec.Parse([]byte(valid+"restart: {attempts: "+ok+"}\n"), "job.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Validate(); err != nil {
			t.Errorf("attempts %s: %v", ok, err)
		}
	}
	_, err := spec.Parse([]byte(valid+"restart: {attempts: -2}\n"), "job.yaml")
	p := problemAt(t, problems(t, err), "restart.attempts")
	if p.Error() != "job.yaml:20: restart.attempts: -2: want a number of restarts, 0 for the default or -1 for unlimited" {
		t.Errorf("problem %q", p.Error())
	}
}
