package blob_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/integration/testenv"
	"github.com/weirstream/weir/statestore/blob"
)

// What a user reads when the store is misconfigured: one line that says
// what failed and what to do, never the SDK's chain of operation, identity
// and retry wrappers. The SDK's error stays inside for errors.As.
func TestS3ErrorMessages(t *testing.T) {
	m := testenv.StartMinIO(t)
	ctx := context.Background()

	t.Run("no bucket", func(t *testing.T) {
		cfg := m.S3Config()
		cfg.Bucket, cfg.Prefix = "weir-nobucket", "p"
		_, err := newS3(t, cfg).List(ctx, "jobs/x/")
		want := `list "jobs/x/" in s3://weir-nobucket/p: bucket "weir-nobucket" does not exist: create it with weir bucket create --store s3://weir-nobucket/p`
		if err == nil || err.Error() != want {
			t.Fatalf("List error\n got %v\nwant %s", err, want)
		}
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "NoSuchBucket" {
			t.Errorf("the SDK's error is not inside: %#v", err)
		}
	})
	t.Run("bad credentials", func(t *testing.T) {
		cfg := m.S3Config()
		cfg.Bucket = "weir-badcreds"
		cfg.SecretKey = "wrong-secret"
		_, err := newS3(t, cfg).Get(ctx, "k")
		want := `get "k" in s3://weir-badcreds: access denied by the S3 endpoint ` + cfg.Endpoint +
			` (SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. Check your key and signing method.):` +
			` check the credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE for a profile of ~/.aws/credentials) and the bucket's policy`
		if err == nil || err.Error() != want {
			t.Fatalf("Get error\n got %v\nwant %s", err, want)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		t.Setenv("AWS_PROFILE", "")
		t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
		cfg := m.S3Config()
		cfg.Bucket, cfg.AccessKey, cfg.SecretKey = "weir-nocreds", "", ""
		err := newS3(t, cfg).Put(ctx, "k", []byte("v"))
		want := `put "k" in s3://weir-nocreds: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE for a profile of ~/.aws/credentials`
		if err == nil || err.Error() != want {
			t.Fatalf("Put error\n got %v\nwant %s", err, want)
		}
	})
	t.Run("unreachable endpoint", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		cfg := m.S3Config()
		cfg.Bucket, cfg.Endpoint = "weir-unreachable", "http://"+addr
		err = newS3(t, cfg).EnsureBucket(ctx)
		want := `check bucket s3://weir-unreachable: cannot reach the S3 endpoint http://` + addr +
			`: connection refused: check --s3-endpoint (or AWS_ENDPOINT_URL) and that the server is up`
		if err == nil || err.Error() != want {
			t.Fatalf("EnsureBucket error\n got %v\nwant %s", err, want)
		}
	})
	// Not found stays the sentinel, with no explanation added.
	t.Run("not found", func(t *testing.T) {
		cfg := m.S3Config()
		cfg.Bucket = "weir-notfound"
		b := newS3(t, cfg)
		if err := b.EnsureBucket(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := b.Get(ctx, "missing")
		if !errors.Is(err, blob.ErrNotFound) || err.Error() != `get "missing" in s3://weir-notfound: `+blob.ErrNotFound.Error() {
			t.Errorf("Get of a missing key: %v", err)
		}
	})
}
