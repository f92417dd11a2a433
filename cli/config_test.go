package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/statestore/offheap"
)

// inConfigDir makes a fresh directory the working directory and the home,
// so that only the config files the test writes there are found.
func inConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	t.Setenv("WEIR_CONFIG", "")
	return dir
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConfigIgnoresTheBinary runs weir where `go build -o weir ./cli/weir`
// leaves the binary: a file named weir is not a config file.
func TestConfigIgnoresTheBinary(t *testing.T) {
	inConfigDir(t)
	writeFile(t, "weir", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00\x01\x00\x00\x00")
	stdout, _ := weir(t, "version")
	if stdout != "weir "+Version+"\n" {
		t.Errorf("version printed %q", stdout)
	}
}

// TestConfigUnknownKey checks that a misspelt key is an error naming the
// file, the key, a suggestion and the accepted keys, not silently ignored.
func TestConfigUnknownKey(t *testing.T) {
	for _, tc := range []struct {
		file, text string
		args       []string
		want       []string
	}{
		{file: "weir.yaml", text: "stroe: x\n",
			want: []string{`read config weir.yaml: unknown key "stroe" (did you mean "store"?); accepted: cluster, coordinator, huge-pages, log-level, output, redis-addr, s3-endpoint, s3-region, state-dir, store, wasm-cache`}},
		{file: "weir.json", text: `{"redis_addr": "127.0.0.1:1", "config": "x"}`,
			want: []string{`weir.json: unknown key "config", unknown key "redis_addr" (did you mean "redis-addr"?); accepted: `}},
		{file: ".config/weir/config.yaml", text: "store:\n  url: x\n",
			want: []string{`config.yaml: unknown key "store.url" (store takes a single value, not a mapping)`}},
		{file: "other.yaml", text: "bogus: 1\n", args: []string{"--config", "other.yaml"},
			want: []string{`read config other.yaml: unknown key "bogus"; accepted: `}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			inConfigDir(t)
			writeFile(t, tc.file, tc.text)
			stderr := weirFails(t, append([]string{"version"}, tc.args...)...)
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q\nwant it to contain %q", stderr, w)
				}
			}
		})
	}
}

// TestConfigRead checks that each config file name is still read, first
// found first, and that a flag still wins over it.
func TestConfigRead(t *testing.T) {
	for _, tc := range []struct {
		files map[string]string
		args  []string
		want  string
	}{
		{files: map[string]string{"weir.yaml": "output: json\n"}, want: `"version": "` + Version + `"`},
		{files: map[string]string{"weir.yml": "output: json\n"}, want: `"version": "` + Version + `"`},
		{files: map[string]string{"weir.json": `{"output": "json"}`}, want: `"version": "` + Version + `"`},
		{files: map[string]string{".config/weir/config.yaml": "output: json\n"}, want: `"version": "` + Version + `"`},
		{files: map[string]string{"weir.yaml": "output: json\n", ".config/weir/config.yaml": "output: bad\n"}, want: `"version": "` + Version + `"`},
		{files: map[string]string{"weir.yaml": "output: json\n"}, args: []string{"-o", "text"}, want: "weir " + Version + "\n"},
		{files: map[string]string{"weir.yaml": "output: bad\n", "c.yaml": "output: json\n"}, args: []string{"--config", "c.yaml"}, want: `"version": "` + Version + `"`},
	} {
		inConfigDir(t)
		for name, text := range tc.files {
			writeFile(t, name, text)
		}
		stdout, _ := weir(t, append([]string{"version"}, tc.args...)...)
		if !strings.Contains(stdout, tc.want) {
			t.Errorf("files %v, args %v: version printed %q, want %q", tc.files, tc.args, stdout, tc.want)
		}
	}
}

// TestConfigHugePages checks that --huge-pages, WEIR_HUGE_PAGES and the
// config file's huge-pages reach the process's off-heap memory
// (offheap.SetHugePages), and that without them it asks for none.
func TestConfigHugePages(t *testing.T) {
	defer offheap.SetHugePages(offheap.SetHugePages(false))
	for _, tc := range []struct {
		name, env, file string
		args            []string
		want            bool
	}{
		{name: "default", want: false},
		{name: "flag", args: []string{"--huge-pages"}, want: true},
		{name: "flag off", args: []string{"--huge-pages=false"}, env: "true", want: false},
		{name: "env", env: "true", want: true},
		{name: "file", file: "huge-pages: true\n", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inConfigDir(t)
			t.Setenv("WEIR_HUGE_PAGES", tc.env)
			if tc.file != "" {
				writeFile(t, "weir.yaml", tc.file)
			}
			offheap.SetHugePages(!tc.want)
			weir(t, append([]string{"version"}, tc.args...)...)
			if got := offheap.SetHugePages(false); got != tc.want {
				t.Errorf("huge pages after weir version %v: %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}
