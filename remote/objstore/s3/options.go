package s3

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tierlog/tierlog/remote/objstore"
)

// Options configure Open. Zero values mean the default.
type Options struct {
	// Endpoint is the server's host:port, or a URL "https://host:port"
	// (the scheme then decides TLS). Required.
	Endpoint string
	// Bucket holds every object. Required.
	Bucket string
	// Region is the bucket's region. Default $AWS_REGION, then
	// $AWS_DEFAULT_REGION, then "us-east-1".
	Region string
	// AccessKeyID and SecretAccessKey sign requests. When both are empty
	// they come from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and
	// $AWS_SESSION_TOKEN. They never appear in errors or in String.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// DisableTLS talks plain HTTP. Default false: TLS. (Plain HTTP also
	// turns off minio-go's streaming checksum trailers, see the package
	// comment.)
	DisableTLS bool
	// RootCAs, when set, is the pool of certificates the client trusts
	// (tests trust a self-signed server certificate through it). TLSConfig,
	// when set, is used as is instead (RootCAs is then ignored).
	RootCAs   *x509.CertPool
	TLSConfig *tls.Config

	// RequestTimeout bounds each attempt of Stat, List and Delete, and of
	// a Get up to its response headers; it is also the transport's
	// response-header timeout, so a server that took a request and never
	// answers (a lost response) is retried. Put and PutMultipart attempts
	// are bounded by the caller's context only, since their duration
	// grows with the size. Default 30 s.
	RequestTimeout time.Duration
	// Retry is the retry policy; see RetryPolicy.
	Retry RetryPolicy

	// MultipartThresholdBytes: a Put of at least this many bytes uploads
	// in parts of PartBytes. Default 64 MiB. A smaller Put is one PUT with
	// Content-MD5, for which minio-go reads the whole body into memory
	// first (the reader is wrapped, so it never sees an io.ReaderAt): this
	// is also the most memory one Put holds. PutMultipart reads its
	// io.ReaderAt twice instead and holds at most PartConcurrency parts.
	MultipartThresholdBytes int64
	// PartBytes is the multipart part size, at least 5 MiB (S3's minimum).
	// Default 16 MiB.
	PartBytes int64
	// PartConcurrency is how many parts upload at once. Default 4.
	PartConcurrency int

	// KeyPrefix is prepended to every object name, verbatim (end it with
	// '/' for a directory-like prefix). Default none.
	KeyPrefix string
	// SaltHexDigits, 1 to 4, inserts a hashed salt of the key's first
	// segment after KeyPrefix against hot prefixes (see the package
	// comment for the layout and its List cost). Default 0: no salt.
	SaltHexDigits int
	// PathSafeKeys escapes keys so that "a" and "a/b" can both be stored
	// on servers that map object names to file paths (versitygw posix,
	// single-drive file-system gateways). Default false: names are keys.
	PathSafeKeys bool

	// CreateBucket makes Open create the bucket when it does not exist.
	CreateBucket bool
	// DisableETagCheck turns off the MD5 check of whole-object reads
	// against a single-part object's ETag. Set it for servers whose ETags
	// are not the MD5 of the bytes (AWS SSE-KMS and SSE-C objects).
	DisableETagCheck bool
}

// RetryPolicy bounds the retries of one store operation. The adapter
// retries, not minio-go (its own retries are turned off), so that one
// policy covers every request and the tests can shorten it.
//
// Retried: HTTP 5xx, 408, 429 and S3's SlowDown/Throttling codes,
// connection errors (refused, reset, closed before a response), and an
// attempt that ran into RequestTimeout while the caller's context is
// still live. Never retried: other 4xx, the caller's context ending,
// errors of the caller's reader, and anything after a Get has returned
// its body (the body fails with a typed error instead). A Put is retried
// only when its reader is an io.Seeker (it is rewound); PutMultipart
// always (it reads an io.ReaderAt).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included. 1
	// disables retries. Default 5.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; each later one
	// doubles it up to MaxDelay, and a random jitter of up to half the
	// delay is subtracted. Defaults 100 ms and 5 s.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

const (
	minPartBytes            = 5 << 20
	defaultPartBytes        = 16 << 20
	defaultMultipartBytes   = 64 << 20
	defaultPartConcurrency  = 4
	defaultRequestTimeout   = 30 * time.Second
	defaultMaxAttempts      = 5
	defaultBaseDelay        = 100 * time.Millisecond
	defaultMaxDelay         = 5 * time.Second
	defaultRegion           = "us-east-1"
	maxSaltHexDigits        = 4
	envAccessKeyID          = "AWS_ACCESS_KEY_ID"
	envSecretAccessKey      = "AWS_SECRET_ACCESS_KEY"
	envSessionToken         = "AWS_SESSION_TOKEN"
	envRegion               = "AWS_REGION"
	envDefaultRegion        = "AWS_DEFAULT_REGION"
	errPrefixInvalidOptions = "s3: invalid options"
)

// withDefaults returns a validated copy of o with defaults filled in,
// and the endpoint's host:port and whether it uses TLS.
func (o Options) withDefaults() (Options, string, bool, error) {
	bad := func(format string, args ...any) (Options, string, bool, error) {
		return o, "", false, fmt.Errorf("%w: %s: %s", objstore.ErrInvalidArgument, errPrefixInvalidOptions, fmt.Sprintf(format, args...))
	}
	host, secure := o.Endpoint, !o.DisableTLS
	if strings.Contains(o.Endpoint, "://") {
		u, err := url.Parse(o.Endpoint)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return bad("endpoint %q is not host:port or scheme://host:port", o.Endpoint)
		}
		switch u.Scheme {
		case "https":
			secure = true
		case "http":
			secure = false
		default:
			return bad("endpoint scheme %q", u.Scheme)
		}
		host = u.Host
	}
	if host == "" {
		return bad("no endpoint")
	}
	if o.Bucket == "" {
		return bad("no bucket")
	}
	if o.Region == "" {
		o.Region = os.Getenv(envRegion)
	}
	if o.Region == "" {
		o.Region = os.Getenv(envDefaultRegion)
	}
	if o.Region == "" {
		o.Region = defaultRegion
	}
	if o.AccessKeyID == "" && o.SecretAccessKey == "" {
		o.AccessKeyID = os.Getenv(envAccessKeyID)
		o.SecretAccessKey = os.Getenv(envSecretAccessKey)
		if o.SessionToken == "" {
			o.SessionToken = os.Getenv(envSessionToken)
		}
	}
	if o.AccessKeyID == "" || o.SecretAccessKey == "" {
		return bad("no credentials (set AccessKeyID and SecretAccessKey, or %s and %s)", envAccessKeyID, envSecretAccessKey)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = defaultRequestTimeout
	}
	if o.RequestTimeout < 0 {
		return bad("negative request timeout")
	}
	if o.Retry.MaxAttempts == 0 {
		o.Retry.MaxAttempts = defaultMaxAttempts
	}
	if o.Retry.BaseDelay == 0 {
		o.Retry.BaseDelay = defaultBaseDelay
	}
	if o.Retry.MaxDelay == 0 {
		o.Retry.MaxDelay = defaultMaxDelay
	}
	if o.Retry.MaxAttempts < 0 || o.Retry.BaseDelay < 0 || o.Retry.MaxDelay < o.Retry.BaseDelay {
		return bad("retry policy %+v", o.Retry)
	}
	if o.PartBytes == 0 {
		o.PartBytes = defaultPartBytes
	}
	if o.PartBytes < minPartBytes {
		return bad("part size %d below S3's minimum %d", o.PartBytes, minPartBytes)
	}
	if o.MultipartThresholdBytes == 0 {
		o.MultipartThresholdBytes = defaultMultipartBytes
	}
	if o.MultipartThresholdBytes < 0 {
		return bad("negative multipart threshold")
	}
	if o.PartConcurrency == 0 {
		o.PartConcurrency = defaultPartConcurrency
	}
	if o.PartConcurrency < 0 {
		return bad("negative part concurrency")
	}
	if o.SaltHexDigits < 0 || o.SaltHexDigits > maxSaltHexDigits {
		return bad("salt hex digits %d not in [0, %d]", o.SaltHexDigits, maxSaltHexDigits)
	}
	if err := objstore.ValidatePrefix(o.KeyPrefix); err != nil {
		return bad("key prefix: %v", err)
	}
	return o, host, secure, nil
}

// String describes the options without secrets: the secret key and
// session token are never shown, the access key ID only by its first four
// characters.
func (o Options) String() string {
	return fmt.Sprintf("s3.Options{Endpoint: %q, Bucket: %q, Region: %q, AccessKeyID: %q, SecretAccessKey: %s, SessionToken: %s, "+
		"DisableTLS: %v, RequestTimeout: %v, Retry: %+v, MultipartThresholdBytes: %d, PartBytes: %d, PartConcurrency: %d, "+
		"KeyPrefix: %q, SaltHexDigits: %d, PathSafeKeys: %v, CreateBucket: %v, DisableETagCheck: %v}",
		o.Endpoint, o.Bucket, o.Region, redactID(o.AccessKeyID), redacted(o.SecretAccessKey), redacted(o.SessionToken),
		o.DisableTLS, o.RequestTimeout, o.Retry, o.MultipartThresholdBytes, o.PartBytes, o.PartConcurrency,
		o.KeyPrefix, o.SaltHexDigits, o.PathSafeKeys, o.CreateBucket, o.DisableETagCheck)
}

// GoString keeps %#v from printing the secrets too.
func (o Options) GoString() string { return o.String() }

func redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "<redacted>"
}

func redactID(id string) string {
	if len(id) <= 4 {
		return strings.Repeat("*", len(id))
	}
	return id[:4] + "..."
}
