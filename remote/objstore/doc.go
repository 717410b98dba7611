// Package objstore is the object-storage interface the remote tier writes
// segments to: a small, standard-library-only contract that a directory
// (package fs), memory (package mem) and S3 (package s3) all satisfy.
//
// # Model
//
// A store holds immutable objects under flat keys. '/' is only a separator
// by convention: there are no directories, a key "a" and a key "a/b" may
// both exist, and listing is by plain string prefix in byte order.
//
//	key                                          object
//	topic-0/00000000000000000000-<uuid>.log      segment bytes
//	topic-0/00000000000000000000-<uuid>.index    offset index
//
// Keys are valid UTF-8, 1 to MaxKeyLen bytes, hold no NUL byte, do not start
// with '/', and have no empty, "." or ".." segment between the '/'
// separators (ValidateKey). This is stricter than S3 on purpose: every key
// accepted here maps to a path under the fs store's root and can never
// escape it. ".." inside a segment ("a..b") is allowed.
//
// # What a Store guarantees
//
//   - Put is atomic: a reader sees no object or the whole object, never a
//     prefix. Put reads exactly the declared size from its reader; fewer
//     bytes fail with ErrShortRead, more with ErrSizeMismatch, and nothing
//     is stored in either case.
//   - Put with PutOptions.IfNoneMatch never replaces an existing object: it
//     fails with ErrPreconditionFailed instead. The remote tier writes each
//     upload attempt under a fresh key and uses it so that a retried or
//     concurrent attempt can never overwrite another attempt's object.
//   - A ranged Get returns exactly the bytes asked for or an error. A body
//     that ends early fails with ErrShortRead (which wraps
//     io.ErrUnexpectedEOF); it is never a short successful read. ReadRange
//     checks this again on the caller's side, so even a store that lies is
//     caught.
//   - Delete is idempotent: deleting a missing key succeeds.
//   - Every error a Store method returns is an *OpError naming the
//     operation and key, wrapping one of this package's sentinels, a
//     context error, or the store's own I/O error. IsNotExist tests for a
//     missing object.
//   - Every method takes a context.Context and returns its error (wrapped)
//     once it is done; reading a Get body after its context ends fails.
//
// # What a Store does not guarantee
//
//   - No rename, no append, no partial overwrite: objects are written once.
//   - List may be eventually consistent on some stores (a just-written or
//     just-deleted key may be missing or still present); fs and mem are
//     strongly consistent, as is AWS S3 today. Callers that need to know
//     what they wrote keep their own record (the remote tier records object
//     keys before uploading).
//   - No transactions across keys, and no ordering between concurrent
//     operations on different keys.
//
// # Ranges
//
// Get(ctx, key, offset, length) reads [offset, offset+length); length -1
// means to the end. Valid ranges satisfy 0 <= offset <= size and, for
// length >= 0, offset+length <= size. offset == size is valid and returns an
// empty body (like a read at the end of a file). Anything past the end fails
// with ErrInvalidRange; a range is never clipped to the object silently.
//
// # Optional capabilities
//
// Stores may implement more than Store. Callers find a capability by type
// assertion, as database/sql/driver does: MultipartStore uploads a large
// object in parts from an io.ReaderAt; PutLarge uses it when present and
// falls back to Put.
//
// # Concurrency
//
// A Store is safe for concurrent use by multiple goroutines. A Get body is
// used by one goroutine at a time.
package objstore
