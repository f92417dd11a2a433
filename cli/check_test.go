package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckCommand(t *testing.T) {
	for _, ok := range [][]string{
		{"coordinator", "--listen", "0.0.0.0:8081", "--id", "$(POD_NAME)", "--lease-ttl=10s", "--config", "/etc/weir/weir.yaml"},
		{"worker", "--slots=4", "--metrics-addr", ":9090", "--log-level", "debug"},
		{"bucket", "create"},
	} {
		if err := CheckCommand(ok); err != nil {
			t.Errorf("CheckCommand(%q) = %v", ok, err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinatr"}, `unknown command "coordinatr"`},
		{[]string{"jobs"}, `"weir jobs" is not a command that runs`},
		{[]string{}, `"weir" is not a command that runs`},
		{[]string{"worker", "--slotz", "4"}, "unknown flag: --slotz"},
		{[]string{"worker", "--slots=four"}, `invalid argument "four" for "--slots"`},
		{[]string{"coordinator", "--lease-ttl", "10"}, `invalid argument "10" for "--lease-ttl"`},
		{[]string{"worker", "extra"}, `unknown command "extra"`},
	} {
		err := CheckCommand(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckCommand(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestConfigEnv(t *testing.T) {
	env := ConfigEnv()
	for _, want := range []string{"WEIR_STORE", "WEIR_REDIS_ADDR", "WEIR_S3_ENDPOINT", "WEIR_LOG_LEVEL"} {
		if !slices.Contains(env, want) {
			t.Errorf("ConfigEnv() = %q, lacks %s", env, want)
		}
	}
}
