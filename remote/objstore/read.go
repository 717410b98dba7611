package objstore

import (
	"context"
	"fmt"
	"io"
)

// ReadRange reads exactly length bytes at offset of the object. It checks
// the count itself, so a body that ends early without an error (a store
// or server that lies) is still an error wrapping ErrShortRead, and a body
// with bytes beyond the range one wrapping ErrSizeMismatch. length must be
// >= 0; use ReadAll for a whole object.
func ReadRange(ctx context.Context, s Store, key string, offset, length int64) ([]byte, error) {
	if length < 0 {
		return nil, NewOpError(OpGet, key, fmt.Errorf("%w: ReadRange length %d", ErrInvalidArgument, length))
	}
	body, err := s.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	buf := make([]byte, length)
	n, err := io.ReadFull(body, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return nil, NewOpError(OpGet, key, fmt.Errorf("%w: [%d, %d): got %d of %d bytes",
			ErrShortRead, offset, offset+length, n, length))
	case err != nil:
		return nil, NewOpError(OpGet, key, err)
	}
	// The range is complete; anything more is a store returning a
	// different range than asked for.
	var one [1]byte
	if m, err := body.Read(one[:]); m > 0 {
		return nil, NewOpError(OpGet, key, fmt.Errorf("%w: [%d, %d): body holds more than %d bytes",
			ErrSizeMismatch, offset, offset+length, length))
	} else if err != nil && err != io.EOF {
		return nil, NewOpError(OpGet, key, err)
	}
	return buf, nil
}

// ReadAll reads the whole object. It relies on the store's own check of
// the body length (every store in this module checks it); use Stat and
// ReadRange to check on the caller's side as well.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	body, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if eb, ok := body.(*exactBody); ok {
		// The store declared the length (NewExactBody): read into one
		// buffer of that size instead of growing one.
		b := make([]byte, eb.size)
		if _, err := io.ReadFull(eb, b); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				err = fmt.Errorf("%w: got fewer than %d bytes", ErrShortRead, eb.size)
			}
			return nil, NewOpError(OpGet, key, err)
		}
		var one [1]byte
		if _, err := eb.Read(one[:]); err != io.EOF {
			return nil, NewOpError(OpGet, key, err)
		}
		return b, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, NewOpError(OpGet, key, err)
	}
	return b, nil
}

// ListAll calls fn for every object whose key starts with prefix, in
// ascending key order, fetching pages of DefaultListLimit. It stops at the
// first error, from the store or from fn, and returns it.
func ListAll(ctx context.Context, s Store, prefix string, fn func(ObjectInfo) error) error {
	startAfter := ""
	for {
		page, next, err := s.List(ctx, prefix, startAfter, DefaultListLimit)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		startAfter = next
	}
}
