package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tierlog/tierlog/remote/objstore"
)

// Store is an objstore.Store on an S3 bucket. It is safe for concurrent use.
type Store struct {
	opts      Options       // with defaults; holds the secrets: never print it whole
	client    *minio.Client // no streaming trailers: single PUTs and everything else
	mpClient  *minio.Client // CRC32C trailers on TLS: multipart uploads
	core      minio.Core
	transport *http.Transport
	layout    layout
	closed    atomic.Bool
}

var (
	_ objstore.Store          = (*Store)(nil)
	_ objstore.MultipartStore = (*Store)(nil)
)

// Open returns a store on opts.Bucket. It checks that the bucket exists
// (creating it when opts.CreateBucket is set), so a wrong endpoint,
// credentials or bucket fail here rather than at the first upload.
func Open(ctx context.Context, opts Options) (*Store, error) {
	o, host, secure, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3: transport: %w", err)
	}
	transport.ResponseHeaderTimeout = o.RequestTimeout
	transport.MaxIdleConnsPerHost = max(64, 4*o.PartConcurrency)
	if secure {
		switch {
		case o.TLSConfig != nil:
			transport.TLSClientConfig = o.TLSConfig.Clone()
		case o.RootCAs != nil:
			transport.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
		}
	}
	newClient := func(trailers bool) (*minio.Client, error) {
		return minio.New(host, &minio.Options{
			Creds:           credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, o.SessionToken),
			Secure:          secure,
			Transport:       transport,
			Region:          o.Region,
			BucketLookup:    minio.BucketLookupPath,
			TrailingHeaders: trailers,
			MaxRetries:      1, // this adapter retries; see RetryPolicy
		})
	}
	// Single PUTs go without streaming trailers, with Content-Length
	// framing and Content-MD5 (see the package comment); multipart parts
	// carry CRC32C trailers, which need TLS.
	client, err := newClient(false)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", redact(&o, err))
	}
	mpClient, err := newClient(secure)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", redact(&o, err))
	}
	s := &Store{
		opts: o, client: client, mpClient: mpClient, core: minio.Core{Client: client}, transport: transport,
		layout: layout{prefix: o.KeyPrefix, saltDigit: o.SaltHexDigits, pathSafe: o.PathSafeKeys},
	}
	if err := s.checkBucket(ctx); err != nil {
		transport.CloseIdleConnections()
		return nil, fmt.Errorf("s3: bucket %q at %s: %w", o.Bucket, host, err)
	}
	return s, nil
}

func (s *Store) checkBucket(ctx context.Context) error {
	var exists bool
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		var err error
		exists, err = s.client.BucketExists(ctx, s.opts.Bucket)
		return err
	})
	if err != nil {
		return s.mapErr(err)
	}
	if exists {
		return nil
	}
	if !s.opts.CreateBucket {
		return objstore.ErrNotExist
	}
	err = s.retry(ctx, func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		err := s.client.MakeBucket(ctx, s.opts.Bucket, minio.MakeBucketOptions{Region: s.opts.Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" {
			return nil
		}
		return err
	})
	return s.mapErr(err)
}

// String describes the store without secrets.
func (s *Store) String() string {
	return fmt.Sprintf("s3.Store{%s}", s.opts)
}

// Close closes idle connections; every later call fails with ErrClosed.
// Close is idempotent. Bodies still open may fail.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

// begin runs the checks every operation on a key starts with and returns
// the key's S3 object name.
func (s *Store) begin(ctx context.Context, key string) (string, error) {
	if s.closed.Load() {
		return "", objstore.ErrClosed
	}
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	name, ok := s.layout.name(key)
	if !ok {
		return "", fmt.Errorf("%w: %d bytes as an S3 object name under this layout, more than %d",
			objstore.ErrInvalidKey, len(name), maxNameLen)
	}
	return name, ctx.Err()
}

// errReader marks an error of the caller's Put reader: never retried.
var errReader = errors.New("s3: reader failed")

// trackingReader remembers the first error of the reader it wraps, so a
// failed upload can tell the caller's reader from the network.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// Put implements objstore.Store. A Put of MultipartThresholdBytes or more
// uploads in parts. It is retried only when r is an io.Seeker.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	name, err := s.begin(ctx, key)
	if err != nil {
		return objstore.NewOpError(objstore.OpPut, key, err)
	}
	if size < 0 {
		return objstore.NewOpError(objstore.OpPut, key, fmt.Errorf("%w: size %d", objstore.ErrInvalidArgument, size))
	}
	seeker, canRetry := r.(io.Seeker)
	var start int64
	if canRetry {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			canRetry = false
		}
	}
	attempts := s.opts.Retry.MaxAttempts
	if !canRetry {
		attempts = 1
	}
	var lost bool // an earlier attempt may have stored the object
	err = s.retryN(ctx, attempts, func(ctx context.Context, n int) error {
		if n > 0 {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("%w: rewinding for a retry: %w", errReader, err)
			}
		}
		tr := &trackingReader{r: objstore.NewExactReader(ctx, r, size)}
		po := s.putOptions(size, opts.IfNoneMatch)
		client := s.mpClient
		if po.DisableMultipart {
			client = s.client
			po.SendContentMd5 = true
		}
		_, err := client.PutObject(ctx, s.opts.Bucket, name, tr, size, po)
		switch {
		case err == nil:
			return nil
		case tr.err != nil:
			// The reader's own failure (short, long, canceled) explains it.
			return fmt.Errorf("%w: %w", errReader, tr.err)
		}
		if isPreconditionFailed(err) && lost {
			return fmt.Errorf("%w (an earlier attempt's response was lost: the stored object may be this put's)", objstore.ErrPreconditionFailed)
		}
		lost = lost || mayHaveApplied(err)
		return err
	})
	return objstore.NewOpError(objstore.OpPut, key, s.mapErr(err))
}

// putOptions returns minio's options for an upload of size bytes.
func (s *Store) putOptions(size int64, ifNoneMatch bool) minio.PutObjectOptions {
	po := minio.PutObjectOptions{
		DisableMultipart: size < s.opts.MultipartThresholdBytes,
		PartSize:         uint64(s.opts.PartBytes),
		NumThreads:       uint(s.opts.PartConcurrency),
	}
	if ifNoneMatch {
		po.SetMatchETagExcept("*")
	}
	return po
}

// PutMultipart implements objstore.MultipartStore: minio-go uploads the
// parts concurrently from r and completes the upload with If-None-Match
// when asked; a failed upload is aborted, so it leaves no object.
func (s *Store) PutMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, opts objstore.MultipartOptions) error {
	name, err := s.begin(ctx, key)
	if err != nil {
		return objstore.NewOpError(objstore.OpPutMultipart, key, err)
	}
	if size < 0 || opts.PartBytes < 0 || opts.Concurrency < 0 || (opts.PartBytes > 0 && opts.PartBytes < minPartBytes) {
		return objstore.NewOpError(objstore.OpPutMultipart, key, fmt.Errorf("%w: size %d, part bytes %d (minimum %d), concurrency %d",
			objstore.ErrInvalidArgument, size, opts.PartBytes, minPartBytes, opts.Concurrency))
	}
	po := s.putOptions(size, opts.IfNoneMatch)
	po.DisableMultipart = false
	if opts.PartBytes > 0 {
		po.PartSize = uint64(opts.PartBytes)
	}
	if opts.Concurrency > 0 {
		po.NumThreads = uint(opts.Concurrency)
	}
	client := s.mpClient
	if size <= int64(po.PartSize) {
		// One part: a single PUT, framed and checked as Put's are (streaming
		// trailers would risk versitygw's truncated objects).
		client = s.client
		po.DisableMultipart = true
		po.SendContentMd5 = true
	}
	var lost bool
	err = s.retry(ctx, func(ctx context.Context, _ int) error {
		tr := &trackingReaderAt{r: r}
		_, err := client.PutObject(ctx, s.opts.Bucket, name, io.NewSectionReader(tr, 0, size), size, po)
		switch {
		case err == nil:
			return nil
		case tr.failed():
			if rerr := tr.error(); rerr == io.EOF {
				return fmt.Errorf("%w: %w: reader ended before %d bytes", errReader, objstore.ErrShortRead, size)
			}
			return fmt.Errorf("%w: %w", errReader, tr.error())
		}
		if isPreconditionFailed(err) && lost {
			return fmt.Errorf("%w (an earlier attempt's response was lost: the stored object may be this put's)", objstore.ErrPreconditionFailed)
		}
		lost = lost || mayHaveApplied(err)
		return err
	})
	return objstore.NewOpError(objstore.OpPutMultipart, key, s.mapErr(err))
}

// trackingReaderAt remembers the first error of the ReaderAt it wraps
// (minio-go reads parts concurrently).
type trackingReaderAt struct {
	r   io.ReaderAt
	err atomic.Pointer[error]
}

func (t *trackingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := t.r.ReadAt(p, off)
	if err != nil && !(err == io.EOF && n == len(p)) {
		t.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

func (t *trackingReaderAt) failed() bool { return t.err.Load() != nil }
func (t *trackingReaderAt) error() error { return *t.err.Load() }

// Get implements objstore.Store. See the package comment for how ranges
// are checked.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	name, err := s.begin(ctx, key)
	if err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	if err := objstore.ValidateRangeArgs(offset, length); err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	if length == 0 {
		// An empty range needs no body, only the size.
		info, err := s.stat(ctx, name, key)
		if err == nil {
			_, err = objstore.ValidateRange(offset, 0, info.Size)
		}
		if err != nil {
			return nil, objstore.NewOpError(objstore.OpGet, key, err)
		}
		return objstore.NewExactBody(ctx, io.NopCloser(strings.NewReader("")), 0), nil
	}
	var body io.ReadCloser
	err = s.retry(ctx, func(ctx context.Context, _ int) error {
		var err error
		body, err = s.getOnce(ctx, name, key, offset, length)
		return err
	})
	if errors.Is(err, errBadResponse) {
		err = fmt.Errorf("%w: %w", objstore.ErrSizeMismatch, err)
	}
	if err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, s.mapErr(err))
	}
	return body, nil
}

// getOnce is one attempt of a Get with length != 0.
func (s *Store) getOnce(ctx context.Context, name, key string, offset, length int64) (io.ReadCloser, error) {
	var gopts minio.GetObjectOptions
	ranged := offset > 0 || length > 0
	switch {
	case length > 0:
		_ = gopts.SetRange(offset, offset+length-1)
	case offset > 0:
		_ = gopts.SetRange(offset, 0) // bytes=offset-
	default:
		// The whole object: minio-go verifies the full-object checksum
		// when the server advertises one.
		gopts.Checksum = true
	}
	// RequestTimeout bounds the wait for the headers only; the body
	// lives as long as the caller's context.
	attemptCtx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(s.opts.RequestTimeout, cancel)
	rc, info, hdr, err := s.core.GetObject(attemptCtx, s.opts.Bucket, name, gopts)
	timedOut := !timer.Stop()
	if err != nil {
		cancel()
		if timedOut && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: no response within %v", context.DeadlineExceeded, s.opts.RequestTimeout)
		}
		if er := minio.ToErrorResponse(err); er.StatusCode == http.StatusRequestedRangeNotSatisfiable || er.Code == "InvalidRange" {
			return s.emptyTailOrInvalid(ctx, name, key, offset, length)
		}
		return nil, err
	}
	n, err := checkRange(ranged, offset, length, info.Size, hdr)
	if err != nil {
		rc.Close()
		cancel()
		return nil, err
	}
	body := &getBody{r: rc, cancel: cancel}
	if !ranged && !s.opts.DisableETagCheck {
		body.wantMD5 = etagMD5(info.ETag)
		if body.wantMD5 != nil {
			body.md5 = md5.New()
		}
	}
	return &opErrBody{ReadCloser: objstore.NewExactBody(ctx, body, n), key: key}, nil
}

// emptyTailOrInvalid answers a 416: offset == size (and length -1) is an
// empty read at the end, anything else past the end is ErrInvalidRange.
// A HEAD tells the two apart.
func (s *Store) emptyTailOrInvalid(ctx context.Context, name, key string, offset, length int64) (io.ReadCloser, error) {
	info, err := s.stat(ctx, name, key)
	if err != nil {
		return nil, err
	}
	if _, err := objstore.ValidateRange(offset, length, info.Size); err != nil {
		return nil, err
	}
	if offset != info.Size {
		// The server refused a range the object's size allows: the object
		// changed between the GET and the HEAD, or the server is wrong.
		return nil, fmt.Errorf("%w: 416 for [%d, +%d) of a %d-byte object", errBadResponse, offset, length, info.Size)
	}
	return objstore.NewExactBody(ctx, io.NopCloser(strings.NewReader("")), 0), nil
}

// checkRange compares a GET response with the range asked for and returns
// the body length to expect. A range the server clipped at the end of the
// object is ErrInvalidRange; any other disagreement is errBadResponse.
func checkRange(ranged bool, offset, length, contentLength int64, hdr http.Header) (int64, error) {
	if !ranged {
		if contentLength < 0 {
			return 0, fmt.Errorf("%w: no Content-Length", errBadResponse)
		}
		return contentLength, nil
	}
	cr := hdr.Get("Content-Range")
	first, last, total, ok := parseContentRange(cr)
	if !ok {
		if offset == 0 && length > 0 && contentLength == length {
			return length, nil // the whole object, exactly the range asked for
		}
		return 0, fmt.Errorf("%w: asked for [%d, +%d), got Content-Range %q", errBadResponse, offset, length, cr)
	}
	wantLast := offset + length - 1
	if length < 0 {
		wantLast = total - 1
	}
	if first != offset || last != wantLast || (total >= 0 && last >= total) {
		if total >= 0 && first == offset && length > 0 && offset+length > total {
			return 0, fmt.Errorf("%w: [%d, %d) beyond size %d (server clipped it to %q)",
				objstore.ErrInvalidRange, offset, offset+length, total, cr)
		}
		return 0, fmt.Errorf("%w: asked for [%d, +%d), got Content-Range %q", errBadResponse, offset, length, cr)
	}
	n := last - first + 1
	if contentLength >= 0 && contentLength != n {
		return 0, fmt.Errorf("%w: Content-Range %q with Content-Length %d", errBadResponse, cr, contentLength)
	}
	return n, nil
}

// etagMD5 returns the MD5 a single-part upload's ETag holds, or nil for
// other ETags (multipart "<hex>-<parts>", or not hex at all).
func etagMD5(etag string) []byte {
	etag = strings.Trim(etag, `"`)
	if len(etag) != 2*md5.Size {
		return nil
	}
	b, err := hex.DecodeString(etag)
	if err != nil {
		return nil
	}
	return b
}

// parseContentRange parses "bytes first-last/total" (total "*" is -1).
func parseContentRange(s string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	total = -1
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

// getBody is a GET response body: a connection that ends early is
// ErrShortRead, and Close releases the attempt's context.
type getBody struct {
	r       io.ReadCloser
	cancel  context.CancelFunc
	md5     hash.Hash // of the body so far, when wantMD5 is set
	wantMD5 []byte
}

// ErrChecksum means a body's bytes do not match the checksum the server
// stored for the object: corruption, never returned as data.
var ErrChecksum = errors.New("s3: checksum mismatch")

func (b *getBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.md5 != nil {
		b.md5.Write(p[:n])
		if err == io.EOF {
			if got := b.md5.Sum(nil); !bytes.Equal(got, b.wantMD5) {
				return n, fmt.Errorf("%w: body MD5 %x, ETag %x", ErrChecksum, got, b.wantMD5)
			}
		}
	}
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// minio-go's full-object checksum check has no sentinel of its own.
		if strings.Contains(err.Error(), "checksum mismatch") {
			return n, fmt.Errorf("%w: %w", ErrChecksum, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || isConnError(err) {
			err = fmt.Errorf("%w: %w", objstore.ErrShortRead, err)
		}
	}
	return n, err
}

func (b *getBody) Close() error {
	err := b.r.Close()
	b.cancel()
	return err
}

// opErrBody names the operation and key in a body's read errors.
type opErrBody struct {
	io.ReadCloser
	key string
}

func (b *opErrBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = objstore.NewOpError(objstore.OpGet, b.key, err)
	}
	return n, err
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	name, err := s.begin(ctx, key)
	if err != nil {
		return objstore.ObjectInfo{}, objstore.NewOpError(objstore.OpStat, key, err)
	}
	info, err := s.stat(ctx, name, key)
	return info, objstore.NewOpError(objstore.OpStat, key, err)
}

// stat is Stat without the checks; its error is mapped but not an OpError.
func (s *Store) stat(ctx context.Context, name, key string) (objstore.ObjectInfo, error) {
	var info minio.ObjectInfo
	err := s.retry(ctx, func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		var err error
		info, err = s.client.StatObject(ctx, s.opts.Bucket, name, minio.StatObjectOptions{})
		return err
	})
	if err != nil {
		return objstore.ObjectInfo{}, s.mapErr(err)
	}
	return objstore.ObjectInfo{Key: key, Size: info.Size, ModTime: info.LastModified}, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.begin(ctx, key)
	if err != nil {
		return objstore.NewOpError(objstore.OpDelete, key, err)
	}
	err = s.retry(ctx, func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		err := s.client.RemoveObject(ctx, s.opts.Bucket, name, minio.RemoveObjectOptions{})
		if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
			return nil // idempotent
		}
		return err
	})
	return objstore.NewOpError(objstore.OpDelete, key, s.mapErr(err))
}

// List implements objstore.Store with ListObjectsV2 (StartAfter, MaxKeys
// at most 1000). Each listed salt is asked for one key more than the page
// holds, so a page that is not the last is known without a second request;
// a page therefore holds at most 999 objects.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	if s.closed.Load() {
		return nil, "", objstore.NewOpError(objstore.OpList, prefix, objstore.ErrClosed)
	}
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, "", objstore.NewOpError(objstore.OpList, prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", objstore.NewOpError(objstore.OpList, prefix, err)
	}
	if limit <= 0 || limit > objstore.DefaultListLimit-1 {
		limit = objstore.DefaultListLimit - 1
	}
	var all []objstore.ObjectInfo
	for _, salt := range s.layout.listSalts(prefix) {
		var page []objstore.ObjectInfo
		err := s.retry(ctx, func(ctx context.Context, _ int) error {
			var err error
			page, err = s.listSalt(ctx, salt, prefix, startAfter, limit+1)
			return err
		})
		if err != nil {
			return nil, "", objstore.NewOpError(objstore.OpList, prefix, s.mapErr(err))
		}
		all = append(all, page...)
	}
	slices.SortFunc(all, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	if len(all) > limit {
		return all[:limit], all[limit-1].Key, nil
	}
	return all, "", nil
}

// listSalt lists up to n objects of one salt with one ListObjectsV2
// request (more only when the server returns short pages).
func (s *Store) listSalt(ctx context.Context, salt, prefix, startAfter string, n int) ([]objstore.ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	lo := minio.ListObjectsOptions{
		Prefix:    s.layout.prefix + salt + s.layout.encodePrefix(prefix),
		Recursive: true,
		MaxKeys:   n,
	}
	if startAfter != "" {
		head := s.layout.prefix + salt
		lo.StartAfter = head + s.layout.encodeKey(len(head), startAfter)
	}
	var out []objstore.ObjectInfo
	for obj := range s.client.ListObjectsIter(ctx, s.opts.Bucket, lo) {
		if obj.Err != nil {
			return nil, obj.Err
		}
		key, ok := s.layout.key(obj.Key, salt)
		if !ok || !strings.HasPrefix(key, prefix) || key <= startAfter {
			continue // not an object of this layout
		}
		out = append(out, objstore.ObjectInfo{Key: key, Size: obj.Size, ModTime: obj.LastModified})
		if len(out) == n {
			break
		}
	}
	return out, nil
}

func isPreconditionFailed(err error) bool {
	er := minio.ToErrorResponse(err)
	return er.StatusCode == http.StatusPreconditionFailed || er.Code == "PreconditionFailed"
}

// mapErr turns minio-go's errors into objstore's sentinels and removes
// the credentials from any message. Errors already in objstore's terms
// (and context errors) pass through.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, objstore.ErrNotExist) || errors.Is(err, objstore.ErrPreconditionFailed) ||
		errors.Is(err, objstore.ErrInvalidRange) {
		return redact(&s.opts, err) // mapped already
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.StatusCode == http.StatusNotFound || er.Code == "NoSuchKey" || er.Code == "NoSuchBucket":
			return redact(&s.opts, fmt.Errorf("%w: %w", objstore.ErrNotExist, err))
		case er.StatusCode == http.StatusPreconditionFailed || er.Code == "PreconditionFailed":
			return redact(&s.opts, fmt.Errorf("%w: %w", objstore.ErrPreconditionFailed, err))
		case er.StatusCode == http.StatusRequestedRangeNotSatisfiable || er.Code == "InvalidRange":
			return redact(&s.opts, fmt.Errorf("%w: %w", objstore.ErrInvalidRange, err))
		}
	}
	return redact(&s.opts, err)
}
