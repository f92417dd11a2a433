package blob

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// credentialsHint says where weir (through the AWS SDK) looks for
// credentials.
const credentialsHint = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE for a profile of ~/.aws/credentials"

// credentialsProvider marks the errors of the credential chain, so an
// operation that fails for want of credentials can say so (the SDK wraps
// them in text only).
type credentialsProvider struct{ aws.CredentialsProvider }

func (p credentialsProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := p.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return c, &credentialsError{err: err}
	}
	return c, nil
}

type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return "get credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// explained is an SDK error said in a line a user can act on; the SDK's
// error stays inside for errors.Is and errors.As.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// explain turns an error of the SDK into what failed and what to do:
// missing credentials, access denied, a missing bucket, an unreachable
// endpoint, or else the server's code and message, without the SDK's
// chain of operation, middleware and retry wrappers. Errors that are not
// the SDK's (ErrNotFound, ErrExists, context errors) are returned as they
// are.
func (s *S3) explain(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ce *credentialsError
	if errors.As(err, &ce) {
		return &explained{msg: "no S3 credentials: " + credentialsHint, err: err}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		said := code
		if m := ae.ErrorMessage(); m != "" {
			said += ": " + m
		}
		switch code {
		case "NoSuchBucket":
			return &explained{msg: fmt.Sprintf("bucket %q does not exist: create it with weir bucket create --store %s", s.bucket, s.Describe()), err: err}
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled":
			return &explained{msg: fmt.Sprintf("access denied by %s (%s): check the credentials (%s) and the bucket's policy", s.endpoint(), said, credentialsHint), err: err}
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			said += fmt.Sprintf(" (HTTP %d)", re.HTTPStatusCode())
		}
		return &explained{msg: fmt.Sprintf("%s said %s", s.endpoint(), said), err: err}
	}
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		cause := error(se)
		if u := errors.Unwrap(se); u != nil {
			cause = u
			for errors.Unwrap(cause) != nil {
				cause = errors.Unwrap(cause) // the innermost: "connection refused"
			}
		}
		return &explained{msg: fmt.Sprintf("cannot reach %s: %v: check --s3-endpoint (or AWS_ENDPOINT_URL) and that the server is up", s.endpoint(), cause), err: err}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return &explained{msg: fmt.Sprintf("%s answered HTTP %d", s.endpoint(), re.HTTPStatusCode()), err: err}
	}
	return err
}

// endpoint names the server for messages.
func (s *S3) endpoint() string {
	if e := s.client.Options().BaseEndpoint; e != nil && *e != "" {
		return "the S3 endpoint " + *e
	}
	return "AWS S3"
}
