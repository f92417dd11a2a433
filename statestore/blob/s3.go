package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// DefaultRegion is used when neither S3Config.Region nor the environment
// (AWS_REGION, the shared config file) names one.
const DefaultRegion = "us-east-1"

// S3Config configures an S3 bucket (AWS S3, or MinIO and other S3-compatible
// servers through Endpoint).
type S3Config struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix, if set, is prepended (with a '/') to every key, so several
	// deployments can share a bucket. Keys passed to and returned by the
	// Bucket methods never include it. Leading and trailing '/' are ignored.
	Prefix string
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:9000".
	// Empty: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL if set, else AWS.
	Endpoint string
	// Region is the signing region. Empty: $AWS_REGION or the shared config
	// file, else DefaultRegion.
	Region string
	// ForcePathStyle addresses the bucket as <endpoint>/<bucket> instead of
	// <bucket>.<endpoint>. It is implied whenever a custom endpoint is used
	// (from Endpoint or the environment), as MinIO needs.
	ForcePathStyle bool
	// AccessKey and SecretKey, if set, are static credentials (tests, or
	// explicit configuration). Empty: the standard AWS credential chain
	// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, shared files, SSO, IMDS...).
	AccessKey string
	SecretKey string
	// UnsignedPayload sends PUT bodies as UNSIGNED-PAYLOAD instead of signing
	// their SHA-256, which saves a pass over every byte (noticeable above a
	// few MiB). The body is then protected only by TCP checksums, or TLS on
	// https: use it over https or on loopback and trusted networks. Default
	// false.
	UnsignedPayload bool
	// Requests, if set, counts the requests the bucket sends (shared by
	// the buckets of a process). Nil: the bucket counts into its own.
	Requests *Requests
}

// String shows the configuration without the secret key, so logging it
// with %v or %+v is safe.
func (c S3Config) String() string {
	secret := ""
	if c.SecretKey != "" {
		secret = "<redacted>"
	}
	return fmt.Sprintf("{Bucket:%s Prefix:%s Endpoint:%s Region:%s ForcePathStyle:%t AccessKey:%s SecretKey:%s UnsignedPayload:%t}",
		c.Bucket, c.Prefix, redactURL(c.Endpoint), c.Region, c.ForcePathStyle, c.AccessKey, secret, c.UnsignedPayload)
}

// GoString redacts the secret key for %#v too.
func (c S3Config) GoString() string { return "blob.S3Config" + c.String() }

// LogValue redacts the secret key for slog.
func (c S3Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Validate reports every problem with the configuration at once.
func (c S3Config) Validate() error {
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("s3 config: bucket: empty; want a bucket name"))
	} else if strings.ContainsAny(c.Bucket, "/ ") {
		errs = append(errs, fmt.Errorf("s3 config: bucket %q: contains '/' or a space; want a bucket name such as \"weir-state\" (put paths in Prefix)", c.Bucket))
	}
	if p := strings.Trim(c.Prefix, "/"); p != "" {
		if err := ValidateKey(p); err != nil {
			errs = append(errs, fmt.Errorf("s3 config: prefix: %w", err))
		}
	}
	if c.Endpoint != "" {
		if err := validateEndpoint(c.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("s3 config: %w", err))
		}
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		errs = append(errs, errors.New("s3 config: access key and secret key: set both or neither"))
	}
	return errors.Join(errs...)
}

func validateEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error would repeat the raw string, which may hold a password.
		return fmt.Errorf("endpoint %q: not a URL; want e.g. http://127.0.0.1:9000", redactURL(raw))
	}
	switch {
	case u.User != nil:
		return fmt.Errorf("endpoint %q: credentials in the URL are not accepted; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", redactURL(raw))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("endpoint %q: scheme %q; want http:// or https://", raw, u.Scheme)
	case u.Host == "":
		return fmt.Errorf("endpoint %q: no host; want e.g. http://127.0.0.1:9000", raw)
	}
	return nil
}

// S3 is a Bucket in an S3 bucket. Use NewS3.
type S3 struct {
	client    *s3.Client
	transport *http.Transport // ours, so Close can drop idle connections
	bucket    string
	prefix    string // "" or ends in '/'
	unsigned  bool
	reqs      *Requests

	closeOnce sync.Once
}

var (
	_ Bucket       = (*S3)(nil)
	_ ReaderPutter = (*S3)(nil)
)

// NewS3 creates a client for cfg.Bucket; it does not contact the server
// (see EnsureBucket). Credentials come from cfg or the standard AWS chain.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []func(*config.LoadOptions) error{
		// Checksums beyond what an operation requires cost a pass over the
		// body and, for unsigned payloads, chunked encoding.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		// The SDK's own logger writes lines such as "SDK ... WARN falling
		// back to IMDSv1" straight to stderr, into the user's terminal;
		// what matters reaches the caller as an error.
		config.WithLogger(logging.Nop{}),
	}
	if cfg.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != "" {
		// A custom endpoint (MinIO, another S3-compatible server) is
		// not on EC2's metadata service: asking it for credentials only
		// adds a timeout and a confusing error.
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 bucket %q: load aws config: %w", cfg.Bucket, err)
	}
	awsCfg.Credentials = credentialsProvider{awsCfg.Credentials}
	if awsCfg.Region == "" {
		awsCfg.Region = DefaultRegion
	}
	if cfg.Endpoint == "" && awsCfg.BaseEndpoint != nil {
		if err := validateEndpoint(*awsCfg.BaseEndpoint); err != nil {
			return nil, fmt.Errorf("s3 bucket %q: endpoint from the environment (AWS_ENDPOINT_URL): %w", cfg.Bucket, err)
		}
	}
	// Own the transport (keeping what the config applied to it, such as
	// AWS_CA_BUNDLE), so Close can drop its idle connections.
	var tr *http.Transport
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	} else {
		tr = awshttp.NewBuildableClient().GetTransport()
	}
	tr.MaxIdleConnsPerHost = 64
	awsCfg.HTTPClient = &http.Client{
		Transport: tr,
		// S3 answers with redirects the SDK handles itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	reqs := cfg.Requests
	if reqs == nil {
		reqs = NewRequests()
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle || o.BaseEndpoint != nil
		o.APIOptions = append(o.APIOptions, countS3Requests(reqs))
	})
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &S3{client: client, transport: tr, bucket: cfg.Bucket, prefix: prefix, unsigned: cfg.UnsignedPayload, reqs: reqs}, nil
}

// Requests returns the counter of the requests the bucket sent.
func (s *S3) Requests() *Requests { return s.reqs }

func (s *S3) requests() *Requests { return s.reqs }

// Describe returns "s3://bucket" or "s3://bucket/prefix".
func (s *S3) Describe() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// Close drops idle connections; safe to call twice. The client must not be
// used afterwards.
func (s *S3) Close() error {
	s.closeOnce.Do(s.transport.CloseIdleConnections)
	return nil
}

// EnsureBucket creates the bucket if it does not exist; it is idempotent.
func (s *S3) EnsureBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	if !isCode(err, "NotFound", "NoSuchBucket") {
		return fmt.Errorf("check bucket %s: %w", s.Describe(), s.explain(err))
	}
	in := &s3.CreateBucketInput{Bucket: &s.bucket}
	if r := s.client.Options().Region; r != DefaultRegion {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(r),
		}
	}
	_, err = s.client.CreateBucket(ctx, in)
	if err != nil && !isCode(err, "BucketAlreadyOwnedByYou") {
		return fmt.Errorf("create bucket %s: %w", s.Describe(), s.explain(err))
	}
	return nil
}

// isCode reports whether err is an S3 API error with one of the codes.
func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}

// isNoSuchKey reports whether err says the object is missing. A missing
// bucket (NoSuchBucket) is deliberately not: it must not look like an empty
// checkpoint directory. HEAD has no body to tell them apart, so a HEAD on a
// missing bucket does read as a missing key.
func isNoSuchKey(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || isCode(err, "NoSuchKey", "NotFound")
}

func (s *S3) key(op, key string) (*string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return aws.String(s.prefix + key), nil
}

func (s *S3) errorf(op, key string, err error) error {
	return fmt.Errorf("%s %q in %s: %w", op, key, s.Describe(), s.explain(err))
}

// Get returns the whole object, or ErrNotFound.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.getObject(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	if n := aws.ToInt64(out.ContentLength); n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, s.errorf("get", key, err)
	}
	return buf.Bytes(), nil
}

// GetRange returns n bytes of the object from off (fewer where it ends)
// with a ranged GET.
func (s *S3) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get range %q: offset %d, length %d: want both >= 0", key, off, n)
	}
	if n == 0 {
		// A range cannot be empty; the object must still exist.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	k, err := s.key("get range", key)
	if err != nil {
		return nil, err
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: k, Range: &rng})
	if err != nil {
		switch {
		case isNoSuchKey(err):
			err = ErrNotFound
		case isCode(err, "InvalidRange"):
			// The object ends before off.
			if _, serr := s.Stat(ctx, key); serr != nil {
				return nil, serr
			}
			return []byte{}, nil
		}
		return nil, s.errorf("get range", key, err)
	}
	defer out.Body.Close()
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(out.Body, n)); err != nil {
		return nil, s.errorf("get range", key, err)
	}
	return buf.Bytes(), nil
}

// Open streams the object, or returns ErrNotFound.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.getObject(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (s *S3) getObject(ctx context.Context, op, key string) (*s3.GetObjectOutput, error) {
	k, err := s.key(op, key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		if isNoSuchKey(err) {
			err = ErrNotFound
		}
		return nil, s.errorf(op, key, err)
	}
	return out, nil
}

// Stat returns the object's info, or ErrNotFound.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := s.key("stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		if isNoSuchKey(err) {
			err = ErrNotFound
		}
		return ObjectInfo{}, s.errorf("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified)}, nil
}

// List returns every object whose key starts with prefix, sorted by key.
// Keys ending in '/' (the empty "folder" objects some S3 consoles create)
// are skipped, as no Bucket can hold them.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	p := s.paginator(prefix)
	var out []ObjectInfo
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", prefix, s.Describe(), s.explain(err))
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok || k == "" || strings.HasSuffix(k, "/") {
				continue // "folder" markers that consoles create are not objects
			}
			out = append(out, ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	// S3 lists in UTF-8 byte order already; sorting keeps the contract
	// independent of the server.
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *S3) paginator(prefix string) *s3.ListObjectsV2Paginator {
	return s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + prefix),
	})
}

// putIDMeta is user metadata naming the PutIfAbsent call that wrote an
// object, so a create that the SDK retried after its first attempt landed
// (the retry then gets 412) is still recognised as ours.
const putIDMeta = "weir-put-id"

// Put creates or replaces the object; S3 PUTs are atomic.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	k, err := s.key("put", key)
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, s.putInput(k, data), s.putOptions)
	if err != nil {
		return s.errorf("put", key, err)
	}
	return nil
}

// PutReader is Put with the body read from r (ReaderPutter); the SDK
// seeks r back to retry.
func (s *S3) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	k, err := s.key("put", key)
	if err != nil {
		return err
	}
	if err := checkSize(key, r, size); err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: k, Body: r, ContentLength: aws.Int64(size)}
	if _, err := s.client.PutObject(ctx, in, s.putOptions); err != nil {
		return s.errorf("put", key, err)
	}
	return nil
}

// PutIfAbsent creates the object with If-None-Match: *, which S3 and MinIO
// enforce atomically: a second create gets 412 Precondition Failed, reported
// as ErrExists. A 409 ConditionalRequestConflict (a concurrent create still
// in flight) is retried with backoff until the outcome is known; if it
// persists it is reported as ErrExists too.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.key("put-if-absent", key)
	if err != nil {
		return err
	}
	id := randomHex(16)
	for attempt := 0; ; attempt++ {
		in := s.putInput(k, data)
		in.IfNoneMatch = aws.String("*")
		in.Metadata = map[string]string{putIDMeta: id}
		_, err = s.client.PutObject(ctx, in, s.putOptions)
		if err == nil {
			return nil
		}
		switch conditionalOutcome(err) {
		case conflict:
			// Another create of the key is in flight and may yet fail:
			// ask again until one of them has won.
			if attempt < 8 {
				if err := sleepCtx(ctx, time.Duration(10<<attempt)*time.Millisecond); err != nil {
					return s.errorf("put-if-absent", key, err)
				}
				continue
			}
			return s.errorf("put-if-absent", key, ErrExists)
		case preconditionFailed:
			// Did an earlier attempt of this very call win?
			head, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: k})
			if herr == nil && head.Metadata[putIDMeta] == id {
				return nil
			}
			return s.errorf("put-if-absent", key, ErrExists)
		default:
			return s.errorf("put-if-absent", key, err)
		}
	}
}

type conditionalResult int

const (
	otherError conditionalResult = iota
	preconditionFailed
	conflict
)

// conditionalOutcome classifies a failed If-None-Match PUT: 412 means the
// key exists; 409 ConditionalRequestConflict means a concurrent create is
// in flight.
func conditionalOutcome(err error) conditionalResult {
	switch {
	case isCode(err, "PreconditionFailed"):
		return preconditionFailed
	case isCode(err, "ConditionalRequestConflict"):
		return conflict
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusPreconditionFailed:
			return preconditionFailed
		case http.StatusConflict:
			return conflict
		}
	}
	return otherError
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *S3) putInput(k *string, data []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           k,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
}

func (s *S3) putOptions(o *s3.Options) {
	if s.unsigned {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	}
}

// Copy copies the object src to dst on the server (CopyObject: the bytes
// never pass through this process), replacing dst; ErrNotFound if src is
// missing. S3 copies objects of up to 5 GiB this way.
func (s *S3) Copy(ctx context.Context, src, dst string) error {
	from, err := s.key("copy", src)
	if err != nil {
		return err
	}
	to, err := s.key("copy", dst)
	if err != nil {
		return err
	}
	// CopySource is "bucket/key", URL-encoded ('/' kept).
	source := (&url.URL{Path: s.bucket + "/" + *from}).EscapedPath()
	_, err = s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: to, CopySource: &source})
	if err != nil {
		if isNoSuchKey(err) {
			return s.errorf("copy", src, ErrNotFound)
		}
		return s.errorf("copy to "+dst+" from", src, err)
	}
	return nil
}

// Delete removes the object; deleting a missing key is not an error.
func (s *S3) Delete(ctx context.Context, key string) error {
	k, err := s.key("delete", key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: k})
	if err != nil && !isNoSuchKey(err) {
		return s.errorf("delete", key, err)
	}
	return nil
}
