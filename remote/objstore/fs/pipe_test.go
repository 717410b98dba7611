package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// failingReader yields data and then, at failAt, fails with err (after
// calling before, if set).
type failingReader struct {
	data   []byte
	off    int
	failAt int
	err    error
	before func()
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.off >= r.failAt {
		if r.before != nil {
			r.before()
			r.before = nil
			return 0, nil
		}
		return 0, r.err
	}
	n := copy(p, r.data[r.off:min(len(r.data), r.failAt)])
	r.off += n
	return n, nil
}

// TestPutPipelinedBody: a body of several copy buffers, written while the
// next one is read, is stored exactly; one that ends early, goes on too
// long, fails or is canceled in its middle leaves no object and no temp
// file, with the error of its cause.
func TestPutPipelinedBody(t *testing.T) {
	ctx := context.Background()
	const size = 3<<20 + 12345
	data := bytes.Repeat([]byte("0123456789abcdef"), (size+4<<20)/16)
	s := open(t, t.TempDir(), Options{NoSync: true})

	require.NoError(t, s.Put(ctx, "whole", bytes.NewReader(data[:size]), size, objstore.PutOptions{}))
	got, err := objstore.ReadAll(ctx, s, "whole")
	require.NoError(t, err)
	require.Equal(t, data[:size], got)

	err = s.Put(ctx, "short", bytes.NewReader(data[:size-(1<<20)]), size, objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrShortRead)
	err = s.Put(ctx, "long", bytes.NewReader(data), size, objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)

	boom := errors.New("source failed")
	err = s.Put(ctx, "failed", &failingReader{data: data, failAt: 2<<20 + 7, err: boom}, size, objstore.PutOptions{})
	require.ErrorIs(t, err, boom)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = s.Put(cctx, "canceled", &failingReader{data: data, failAt: 3 << 19, err: io.EOF, before: cancel}, size, objstore.PutOptions{})
	require.ErrorIs(t, err, context.Canceled)

	for _, key := range []string{"short", "long", "failed", "canceled"} {
		_, err := s.Stat(ctx, key)
		require.True(t, objstore.IsNotExist(err), "%s: %v", key, err)
	}
	require.Equal(t, []string{"whole"}, tree(t, s.Root()))
}

// TestJoinPath: the one-allocation path builder gives what joining the
// escaped names with filepath.Join gives, and refuses a name too long.
func TestJoinPath(t *testing.T) {
	for _, key := range []string{"a", "A/b", "orders-3/00000000000000000000.log", "x.y/.z/Q~%/f", "é/ü"} {
		segs := strings.Split(key, "/")
		parts := []string{"/root"}
		for i, seg := range segs {
			require.Equal(t, len(escape(seg)), escapedLen(seg), "%q", seg)
			name := escape(seg)
			if i < len(segs)-1 {
				name += dirSuffix
			}
			parts = append(parts, name)
		}
		got, err := joinPath("/root", key)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(parts...), got, "%q", key)
	}
	_, err := joinPath("/root", strings.Repeat("A", 100))
	require.ErrorIs(t, err, objstore.ErrInvalidKey, "300 bytes as a name")
	_, err = joinPath("/root", strings.Repeat("a", 255)+"/b")
	require.ErrorIs(t, err, objstore.ErrInvalidKey, "255 bytes and the directory suffix")
}

// TestPathCache: a key's path is the same built or cached, also when many
// keys share slots; an invalid key is refused every time, never cached.
func TestPathCache(t *testing.T) {
	s := open(t, t.TempDir(), Options{NoSync: true})
	keys := make([]string, 0, 4*pathCacheSlots)
	for i := range cap(keys) {
		keys = append(keys, fmt.Sprintf("Topic-%d/%05d/data-%d", i%7, i, i))
	}
	for range 2 {
		for _, k := range keys {
			want, err := joinPath(s.Root(), k)
			require.NoError(t, err)
			got, err := s.path(k)
			require.NoError(t, err)
			require.Equal(t, want, got, "%q", k)
		}
	}
	for range 2 {
		_, err := s.path("a/../b")
		require.ErrorIs(t, err, objstore.ErrInvalidKey)
	}
}
