// Package s3 is the objstore.Store on S3 and S3-compatible servers, through
// minio-go v7 (the only package of tierlog that imports it). It passes the
// objstoretest conformance suite against a real server (versitygw, started
// by internal/harness/s3test).
//
// # Key layout
//
//	S3 name = KeyPrefix + salt + key'
//
// KeyPrefix is verbatim; salt is empty or d hex digits of FNV-1a-64 of the
// key's first '/'-separated segment and a '/' (SaltHexDigits = d), so one
// partition's objects share a salt and partitions spread over 16^d S3
// prefixes; key' is the key, or with PathSafeKeys an order-preserving
// escape that ends in '!' so "a" and "a/b" can coexist on servers that map
// names to files. With salt "3/", prefix "c1/" and PathSafeKeys:
//
//	key                                     S3 name
//	orders-0/00000000000000000000-u.log     c1/3/orders-0/00000000000000000000-u.log!
//	orders-0                                c1/3/orders-0!
//	orders-0/with space                     c1/3/orders-0/with"`space!
//
// Names sort as their keys do, so List pages straight from ListObjectsV2
// (StartAfter, MaxKeys <= 1000). A List prefix holding a '/' fixes the
// salt and costs one request per page; a prefix without '/' asks every one
// of the 16^d salts for each page and merges them. S3 names are at most
// 1024 bytes: the layout's overhead shortens the longest key, and a key
// that does not fit fails with ErrInvalidKey (see layout.go).
//
// # What the adapter guarantees
//
//   - Errors: every error is an *objstore.OpError. 404 is ErrNotExist, 412
//     ErrPreconditionFailed (Put with If-None-Match: *, on single PUTs and
//     on CompleteMultipartUpload), 416 and ranges the server clipped are
//     ErrInvalidRange. Credentials never appear in an error or in String.
//   - Retries (RetryPolicy): 5xx, 408, 429, SlowDown and connection
//     failures, with exponential backoff and jitter, a bounded number of
//     times; minio-go's own retries are off. A response lost after the
//     server applied a Put makes the retry of an IfNoneMatch Put fail with
//     ErrPreconditionFailed saying so: the caller decides whether the
//     object is its own (objstore.Store's Put contract).
//   - Ranges: a Get asks for bytes=offset-(offset+length-1) and compares the
//     answer's Content-Range and Content-Length with it. A clipped range is
//     ErrInvalidRange; any other mismatch is retried and then ErrSizeMismatch.
//     offset == size returns an empty body: on a 416 a HEAD tells offset ==
//     size from offset > size; a length-0 Get is a HEAD only. Bodies are
//     objstore.NewExactBody: a cut connection is ErrShortRead, and a body
//     read after its context ends fails.
//   - Uploads: the reader is wrapped in objstore.NewExactReader, so a
//     shorter reader fails with ErrShortRead and a longer one with
//     ErrSizeMismatch before the upload completes, and nothing is stored.
//     Single PUTs (below MultipartThresholdBytes) carry Content-Length
//     framing and Content-MD5: the server checks the bytes, and a PUT cut
//     short is an incomplete body it rejects. They do not use minio-go's
//     streaming checksum trailers, because versitygw v1.8.0 stores a
//     truncated object when an aws-chunked upload is cut at a chunk
//     boundary (a canceled Put left a 96 KiB prefix of a 4 MiB object).
//     Multipart uploads (PutMultipart, and Put from the threshold up) send
//     CRC32C trailers per part over TLS; a failed upload is aborted, so a
//     cut part can never become an object.
//   - Checksums on reads: a whole-object Get is checked against the
//     server's full-object checksum when it advertises one (minio-go), and
//     against the ETag when that is a single-part MD5 (unless
//     DisableETagCheck); a mismatch fails the body's last Read with
//     ErrChecksum. Ranged Gets are not checked (S3 has no range checksums):
//     the remote tier's own chunk checksums cover them.
//   - Context: every request runs under the caller's context;
//     RequestTimeout bounds each attempt (for Get, until the headers).
//
// # Concurrency
//
// A Store is safe for concurrent use; Close is idempotent and later calls
// fail with ErrClosed.
package s3
