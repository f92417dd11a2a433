package blob_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/statestore/blob"
)

func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{
		"file://" + filepath.ToSlash(filepath.Join(dir, "a")),
		"file://localhost" + filepath.ToSlash(filepath.Join(dir, "b")),
		filepath.Join(dir, "c"),
	} {
		b, err := blob.Open(t.Context(), u, blob.Options{})
		if err != nil {
			t.Fatalf("open %q: %v", u, err)
		}
		if err := b.Put(t.Context(), "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.Describe(), "file://"+filepath.ToSlash(dir)) {
			t.Errorf("open %q: describe %q", u, b.Describe())
		}
		b.Close()
	}

	// A relative path is a directory relative to the working directory.
	t.Chdir(dir)
	b, err := blob.Open(t.Context(), "rel/dir", blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.ToSlash(filepath.Join(dir, "rel/dir")); b.Describe() != want {
		t.Errorf("relative path: describe %q, want %q", b.Describe(), want)
	}
	b.Close()
}

func TestOpenS3URL(t *testing.T) {
	b, err := blob.Open(t.Context(), "s3://my-bucket/some/prefix/", blob.Options{S3Endpoint: "http://127.0.0.1:1", S3Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Describe() != "s3://my-bucket/some/prefix" {
		t.Errorf("describe: %q", b.Describe())
	}
	if _, ok := b.(*blob.S3); !ok {
		t.Errorf("s3 URL opened a %T", b)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // in the message
	}{
		{"", "empty URL"},
		{"gs://bucket", `unsupported scheme "gs"`},
		{"s3:bucket", `without "//"`},
		{"file://relative/dir", "three slashes"},
		{"file:///", "without a directory"},
		{"s3://", "without a bucket"},
		{"s3://bucket:9000/x", "not a server"},
		{"s3://bucket/x?region=eu", "query parameters"},
		{"s3://bucket/x/../y", "invalid key"},
		{"s3://AKIA:hunter2@bucket/p", "credentials in the URL"},
		{"s3://AKIA:hun/ter2@bucket/p", "s3://bucket/p"},    // does not parse
		{"s3://AKIA:hunter2@bucket/%zz", "s3://bucket/%zz"}, // does not parse
	} {
		_, err := blob.Open(t.Context(), tc.url, blob.Options{S3Endpoint: "http://127.0.0.1:1"})
		if err == nil {
			t.Errorf("open %q: no error", tc.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("open %q: %q does not mention %q", tc.url, msg, tc.want)
		}
		if strings.Contains(msg, "hunter2") || strings.Contains(msg, "ter2") {
			t.Errorf("open %q: message shows the password: %q", tc.url, msg)
		}
		if !strings.Contains(msg, "open bucket") {
			t.Errorf("open %q: %q does not say what failed", tc.url, msg)
		}
	}
}
