package blob

import (
	"context"
	"sync/atomic"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
)

// Op is a kind of request to the object store, as S3 bills it.
type Op int

// The request kinds. Multipart uploads count each part (and the create
// and complete calls) as a put; DeleteObjects counts one delete per batch
// request, as S3 bills it. weir sends neither multipart uploads nor batch
// deletes today; Copy (a files sink's commit) is one CopyObject.
const (
	OpPut    Op = iota // PutObject (Put, PutIfAbsent), multipart parts
	OpGet              // GetObject (Get, Open)
	OpHead             // HeadObject (Stat, and PutIfAbsent's check after a 412), HeadBucket
	OpList             // one ListObjectsV2 page (up to 1,000 keys)
	OpDelete           // DeleteObject; a DeleteObjects batch counts once
	OpCopy             // CopyObject, UploadPartCopy
	OpOther            // anything else (CreateBucket, ...)
	numOps
)

var opNames = [numOps]string{"put", "get", "head", "list", "delete", "copy", "other"}

// String is the op's label value: put, get, head, list, delete, copy, other.
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return "other"
	}
	return opNames[o]
}

// Requests counts the requests buckets send to the store, by Op. It is
// safe for concurrent use and is a prometheus.Collector of
// weir_store_requests_total{op}. One Requests may be shared by every
// bucket a process opens (Options.Requests, S3Config.Requests), so the
// count is the process's.
type Requests struct {
	n [numOps]atomic.Uint64
}

var _ prometheus.Collector = (*Requests)(nil)

// NewRequests returns a zeroed counter.
func NewRequests() *Requests { return new(Requests) }

// Add counts n requests of op.
func (r *Requests) Add(op Op, n uint64) {
	if op < 0 || op >= numOps {
		op = OpOther
	}
	r.n[op].Add(n)
}

// Counts returns the current counts by op label; every op is present.
func (r *Requests) Counts() map[string]uint64 {
	out := make(map[string]uint64, numOps)
	for op := range numOps {
		out[op.String()] = r.n[op].Load()
	}
	return out
}

var descRequests = prometheus.NewDesc("weir_store_requests_total",
	"Requests this process sent to the object store, by kind (put, get, head, list page, delete, copy, other); retries count each attempt.",
	[]string{"op"}, nil)

// Describe sends the family's description.
func (r *Requests) Describe(ch chan<- *prometheus.Desc) { ch <- descRequests }

// Collect sends one counter per op.
func (r *Requests) Collect(ch chan<- prometheus.Metric) {
	for op := range numOps {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(r.n[op].Load()), op.String())
	}
}

// RequestsOf returns the counter of b (of the bucket under a prefixed
// view), or nil if b does not count its requests.
func RequestsOf(b Bucket) *Requests {
	if c, ok := b.(interface{ requests() *Requests }); ok {
		return c.requests()
	}
	return nil
}

// s3Ops maps the S3 operations to the kinds they are billed as.
var s3Ops = map[string]Op{
	"PutObject":               OpPut,
	"UploadPart":              OpPut,
	"CreateMultipartUpload":   OpPut,
	"CompleteMultipartUpload": OpPut,
	"GetObject":               OpGet,
	"HeadObject":              OpHead,
	"HeadBucket":              OpHead,
	"ListObjectsV2":           OpList,
	"ListObjects":             OpList,
	"DeleteObject":            OpDelete,
	"DeleteObjects":           OpDelete,
	"AbortMultipartUpload":    OpDelete,
	"CopyObject":              OpCopy,
	"UploadPartCopy":          OpCopy,
}

// countS3Requests adds a middleware that counts every attempt that reached
// the server (it has a response, whatever its status), by operation: the
// one place all of the S3 bucket's requests pass. It
// sits in the deserialize step, below the retry loop of the finalize step,
// so each retry counts: S3 bills each.
func countS3Requests(r *Requests) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("weirCountRequests",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				// A request that was never sent (connection refused) has
				// an empty response, status 0: it is not billed.
				if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.StatusCode != 0 {
					op, ok := s3Ops[awsmiddleware.GetOperationName(ctx)]
					if !ok {
						op = OpOther
					}
					r.Add(op, 1)
				}
				return out, md, err
			}), middleware.After)
	}
}
