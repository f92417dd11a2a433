package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Options carries settings for Open that a bucket URL does not hold.
type Options struct {
	// S3Endpoint is the S3 server's base URL for s3:// URLs, e.g.
	// "http://127.0.0.1:9000". Empty: $AWS_ENDPOINT_URL, else AWS.
	S3Endpoint string
	// S3Region is the signing region. Empty: the environment, else
	// DefaultRegion.
	S3Region string
	// S3UnsignedPayload: see S3Config.UnsignedPayload.
	S3UnsignedPayload bool
	// Requests, if set, counts the bucket's requests (one counter for a
	// process's buckets); nil: the bucket counts into its own. RequestsOf
	// returns it.
	Requests *Requests
}

const acceptedURLs = "want file:///absolute/dir, s3://bucket[/prefix], or a directory path"

// looksLikeScheme matches "name:" at the start, as in "s3:bucket", which is
// almost certainly a mistyped URL rather than a directory.
var looksLikeScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// Open opens the bucket a URL names:
//
//	file:///abs/dir         a directory store (NewDir)
//	/abs/dir, rel/dir       the same, for a plain path
//	s3://bucket[/prefix]    an S3 bucket (NewS3), credentials from the
//	                        standard AWS chain, endpoint and region from opts
//	                        or the environment
//
// Credentials in the URL are refused; error messages never repeat them.
// Open does not create an S3 bucket; see (*S3).EnsureBucket.
func Open(ctx context.Context, rawURL string, opts Options) (Bucket, error) {
	b, err := open(ctx, rawURL, opts)
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", redactURL(rawURL), err)
	}
	return b, nil
}

func open(ctx context.Context, raw string, opts Options) (Bucket, error) {
	if raw == "" {
		return nil, errors.New("empty URL; " + acceptedURLs)
	}
	if !strings.Contains(raw, "://") {
		if looksLikeScheme.MatchString(raw) {
			return nil, errors.New("looks like a URL without \"//\"; " + acceptedURLs)
		}
		return newDir(raw, opts.Requests)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not %w: url.Error repeats the raw URL.
		return nil, errors.New("not a valid URL; " + acceptedURLs)
	}
	if u.User != nil {
		return nil, errors.New("credentials in the URL are not accepted; use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS config files")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("query parameters and fragments are not accepted; " + acceptedURLs)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("file URL with host %q; want file:///absolute/dir (three slashes)", u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return nil, errors.New("file URL without a directory; want file:///absolute/dir")
		}
		return newDir(u.Path, opts.Requests)
	case "s3":
		if u.Host == "" {
			return nil, errors.New("s3 URL without a bucket; want s3://bucket[/prefix]")
		}
		if u.Port() != "" {
			return nil, errors.New("s3 URL names a bucket, not a server; want s3://bucket[/prefix] and the server in the S3 endpoint option or AWS_ENDPOINT_URL")
		}
		s, err := NewS3(ctx, S3Config{
			Bucket:          u.Host,
			Prefix:          strings.Trim(u.Path, "/"),
			Endpoint:        opts.S3Endpoint,
			Region:          opts.S3Region,
			UnsignedPayload: opts.S3UnsignedPayload,
			Requests:        opts.Requests,
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("unsupported scheme %q; %s", u.Scheme, acceptedURLs)
	}
}

// redactURL removes any userinfo ("user:password@") from a URL for
// messages, even when the URL does not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.User == nil {
			return raw
		}
		u.User = nil
		return u.String()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	// A password may hold '/', so cut at the last '@' anywhere.
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		return scheme + "://" + rest[at+1:]
	}
	return raw
}
