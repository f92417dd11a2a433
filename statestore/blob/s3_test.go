package blob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
	"github.com/weirstream/weir/statestore/blob/blobtest"
)

// newS3 opens a client for cfg and closes it when the test ends.
func newS3(t testing.TB, cfg blob.S3Config) *blob.S3 {
	t.Helper()
	s, err := blob.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new s3: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// freshBucket returns cfg for a new, empty bucket on m.
func freshBucket(t testing.TB, m *testenv.MinIO, n *atomic.Int64) blob.S3Config {
	t.Helper()
	cfg := m.S3Config()
	cfg.Bucket = fmt.Sprintf("weir-t%d", n.Add(1))
	if err := newS3(t, cfg).EnsureBucket(context.Background()); err != nil {
		t.Fatalf("ensure bucket: %v", err)
	}
	return cfg
}

func TestS3(t *testing.T) {
	m := testenv.StartMinIO(t)
	var n atomic.Int64

	t.Run("Plain", func(t *testing.T) {
		blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
			return newS3(t, freshBucket(t, m, &n))
		})
	})
	t.Run("UnsignedPayload", func(t *testing.T) {
		blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
			cfg := freshBucket(t, m, &n)
			cfg.UnsignedPayload = true
			return newS3(t, cfg)
		})
	})
	// Objects just outside the prefix must stay invisible; "tenant/weir-x"
	// catches a prefix applied without its '/'.
	decoys := func(t *testing.T, cfg blob.S3Config) {
		raw := newS3(t, cfg)
		for _, k := range []string{"decoy", "tenant/decoy", "tenant/weir-x/decoy", "tenant/weirdecoy"} {
			if err := raw.Put(t.Context(), k, []byte("decoy")); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("ConfigPrefix", func(t *testing.T) {
		blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
			cfg := freshBucket(t, m, &n)
			decoys(t, cfg)
			cfg.Prefix = "/tenant/weir/"
			return newS3(t, cfg)
		})
	})
	t.Run("NewPrefixed", func(t *testing.T) {
		blobtest.TestBucket(t, func(t *testing.T) blob.Bucket {
			cfg := freshBucket(t, m, &n)
			decoys(t, cfg)
			return blob.NewPrefixed(newS3(t, cfg), "tenant/weir")
		})
	})
}

func TestS3Describe(t *testing.T) {
	for _, tc := range []struct {
		cfg  blob.S3Config
		want string
	}{
		{blob.S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:1"}, "s3://b"},
		{blob.S3Config{Bucket: "b", Prefix: "/p/q/", Endpoint: "http://127.0.0.1:1"}, "s3://b/p/q"},
	} {
		if got := newS3(t, tc.cfg).Describe(); got != tc.want {
			t.Errorf("describe %+v: %q, want %q", tc.cfg, got, tc.want)
		}
	}
	got := blob.NewPrefixed(newS3(t, blob.S3Config{Bucket: "b", Prefix: "p", Endpoint: "http://127.0.0.1:1"}), "/q/").Describe()
	if got != "s3://b/p/q" {
		t.Errorf("describe prefixed: %q, want s3://b/p/q", got)
	}
}

func TestS3ConfigValidate(t *testing.T) {
	err := blob.S3Config{
		Bucket:    "a/b",
		Prefix:    "x/../y",
		Endpoint:  "ftp://host",
		AccessKey: "only-the-key",
	}.Validate()
	if err == nil {
		t.Fatal("no error for a bad config")
	}
	for _, want := range []string{`bucket "a/b"`, "prefix", `scheme "ftp"`, "set both or neither"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if err := (blob.S3Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "bucket: empty") {
		t.Errorf("empty config: %v", err)
	}
	_, err = blob.NewS3(context.Background(), blob.S3Config{Bucket: "b", Endpoint: "http://user:hunter2@127.0.0.1:9000"})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "credentials in the URL") {
		t.Errorf("endpoint with credentials: %v", err)
	}
}

func TestS3Errors(t *testing.T) {
	m := testenv.StartMinIO(t)
	ctx := t.Context()

	// A wrong secret fails loudly, and the error never shows it.
	cfg := m.S3Config()
	cfg.SecretKey = "wrong-secret-" + strings.Repeat("z", 20)
	bad := newS3(t, cfg)
	err := bad.Put(ctx, "k", []byte("x"))
	if err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("put with a wrong secret: %v", err)
	}
	for _, secret := range []string{cfg.SecretKey, m.SecretKey} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows a secret: %v", err)
		}
	}
	t.Logf("wrong secret: %v", err)

	// A missing bucket is an error, not an empty listing or a missing key:
	// recovery must not mistake it for "no checkpoints yet".
	cfg = m.S3Config()
	cfg.Bucket = "no-such-bucket"
	missing := newS3(t, cfg)
	if _, err := missing.List(ctx, ""); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("list a missing bucket: %v, want an error other than ErrNotFound", err)
	}
	if _, err := missing.Get(ctx, "k"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get from a missing bucket: %v, want an error other than ErrNotFound", err)
	}

	// EnsureBucket is idempotent.
	good := newS3(t, m.S3Config())
	for range 2 {
		if err := good.EnsureBucket(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestS3Restart checks that data survives a server restart and that a
// client keeps working across it (its pooled connections are dead).
func TestS3Restart(t *testing.T) {
	m := testenv.StartMinIO(t)
	b := newS3(t, m.S3Config())
	if err := b.PutIfAbsent(t.Context(), "cp/1/manifest.json", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	m.Restart()
	got, err := b.Get(t.Context(), "cp/1/manifest.json")
	if err != nil || string(got) != "v1" {
		t.Fatalf("get after restart: %q, %v", got, err)
	}
	if err := b.PutIfAbsent(t.Context(), "cp/1/manifest.json", []byte("v2")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second create after restart: %v, want ErrExists", err)
	}
}

// TestOpenS3FromEnv opens s3:// through the standard AWS environment, the
// way a weir child process does with MinIO.Env.
func TestOpenS3FromEnv(t *testing.T) {
	m := testenv.StartMinIO(t)
	home := t.TempDir() // no developer ~/.aws
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	b, err := blob.Open(t.Context(), "s3://"+m.Bucket+"/from/env", blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Describe(); got != "s3://"+m.Bucket+"/from/env" {
		t.Errorf("describe: %q", got)
	}
	if err := b.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	raw := newS3(t, m.S3Config())
	if got, err := raw.Get(t.Context(), "from/env/k"); err != nil || string(got) != "v" {
		t.Fatalf("object under the URL's prefix: %q, %v", got, err)
	}
}

func TestS3ConfigRedacts(t *testing.T) {
	cfg := blob.S3Config{Bucket: "b", AccessKey: "AKIAEXAMPLE", SecretKey: "hunter2-secret"}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "s3", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), buf.String()} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "AKIAEXAMPLE") {
			t.Errorf("formatted config %q: shows the secret or hides the access key", s)
		}
	}
}
