package objstore

import (
	"context"
	"io"
	"time"
)

// DefaultListLimit is the page size List uses when limit <= 0, and the
// most S3 returns in one page.
const DefaultListLimit = 1000

// Store is an object store. See the package comment for the model and the
// guarantees. All methods are safe for concurrent use; every error is an
// *OpError.
type Store interface {
	// Put stores the size bytes read from r under key, atomically: readers
	// see the previous state or the whole new object. r must yield
	// exactly size bytes: fewer fail with ErrShortRead, more with
	// ErrSizeMismatch, and nothing is stored then. Without
	// opts.IfNoneMatch an existing object is replaced; with it, Put fails
	// with ErrPreconditionFailed and leaves the existing object alone.
	//
	// A Put that returns an error may still have stored the object (a
	// lost response); callers that retry use IfNoneMatch and treat
	// ErrPreconditionFailed after a failed attempt as "maybe mine", or
	// write each attempt under a fresh key.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error

	// Get returns the bytes [offset, offset+length) of the object; length
	// -1 means to the end. offset == size is valid and yields an empty
	// body; ranges past the end fail with ErrInvalidRange and a missing
	// key with ErrNotExist, both before any body is returned.
	//
	// The body yields exactly the range, then io.EOF. If the store
	// delivers fewer bytes, the body's Read fails with an error wrapping
	// ErrShortRead instead of io.EOF; never a short successful read. The
	// caller must Close the body (also after reading to EOF). A body
	// fails once ctx is done. Use ReadRange or ReadAll unless streaming.
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's size and modification time, or
	// ErrNotExist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// List returns objects whose keys start with prefix and sort after
	// startAfter ("" starts at the beginning), in ascending byte order,
	// at most limit of them (DefaultListLimit when limit <= 0). next is
	// "" when the listing is complete; otherwise pass it as startAfter to
	// get the following page. A page may hold fewer than limit objects
	// even when more follow: only next == "" ends a listing. ListAll
	// walks every page.
	List(ctx context.Context, prefix, startAfter string, limit int) (objects []ObjectInfo, next string, err error)

	// Delete removes the object. Deleting a missing key succeeds.
	Delete(ctx context.Context, key string) error

	// Close releases the store's resources. Every later call fails with
	// ErrClosed; Close may be called more than once. Bodies returned
	// by Get before Close stay readable in fs and mem; an S3 adapter may
	// fail them.
	io.Closer
}

// PutOptions modify a Put. The zero value is an unconditional Put.
type PutOptions struct {
	// IfNoneMatch makes the Put fail with ErrPreconditionFailed when an
	// object already exists under the key. S3: If-None-Match: *.
	IfNoneMatch bool
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key     string
	Size    int64     // bytes
	ModTime time.Time // when the object was stored, as the store reports it
}

// MultipartStore is the optional capability of uploading a large object in
// parts, possibly concurrently, from an io.ReaderAt. The object becomes
// visible atomically once every part is stored; a failed upload leaves no
// object and cleans up its parts (best effort: S3 needs a lifecycle rule
// for parts a crash leaves behind). Errors follow Put.
type MultipartStore interface {
	Store
	PutMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, opts MultipartOptions) error
}

// MultipartOptions modify a PutMultipart.
type MultipartOptions struct {
	PutOptions
	// PartBytes is the size of every part but the last. Default (0) is
	// the store's choice; S3 requires at least 5 MiB.
	PartBytes int64
	// Concurrency is how many parts are uploaded at once. Default (0) is
	// the store's choice.
	Concurrency int
}

// PutLarge uploads size bytes of r under key through PutMultipart when the
// store implements MultipartStore, and through a single Put otherwise.
func PutLarge(ctx context.Context, s Store, key string, r io.ReaderAt, size int64, opts MultipartOptions) error {
	if m, ok := s.(MultipartStore); ok {
		return m.PutMultipart(ctx, key, r, size, opts)
	}
	if size < 0 {
		return NewOpError(OpPut, key, ErrInvalidArgument)
	}
	return s.Put(ctx, key, io.NewSectionReader(r, 0, size), size, opts.PutOptions)
}
