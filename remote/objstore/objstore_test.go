package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

func TestValidateKey(t *testing.T) {
	valid := []string{"a", "a/b", "a..b", "...", ".a", "a/.b", "a b", "ü", strings.Repeat("k", objstore.MaxKeyLen)}
	for _, k := range valid {
		require.NoError(t, objstore.ValidateKey(k), "%q", k)
	}
	invalid := []string{"", "/a", "a/", "a//b", ".", "..", "a/.", "a/../b", "./a", "a\x00", "\xff", strings.Repeat("k", objstore.MaxKeyLen+1)}
	for _, k := range invalid {
		require.ErrorIs(t, objstore.ValidateKey(k), objstore.ErrInvalidKey, "%q", k)
	}
	for _, p := range []string{"", "a", "a/", "a/.", "a//", "a/.."} {
		require.NoError(t, objstore.ValidatePrefix(p), "%q", p)
	}
	for _, p := range []string{"/", "/a", "a\x00", "\xff"} {
		require.ErrorIs(t, objstore.ValidatePrefix(p), objstore.ErrInvalidKey, "%q", p)
	}
}

func TestValidateRange(t *testing.T) {
	cases := []struct {
		offset, length, size, n int64
		err                     error
	}{
		{0, -1, 10, 10, nil},
		{0, 10, 10, 10, nil},
		{3, 4, 10, 4, nil},
		{10, -1, 10, 0, nil},
		{10, 0, 10, 0, nil},
		{0, -1, 0, 0, nil},
		{10, 1, 10, 0, objstore.ErrInvalidRange},
		{11, -1, 10, 0, objstore.ErrInvalidRange},
		{5, 6, 10, 0, objstore.ErrInvalidRange},
		{1, 1 << 62, 10, 0, objstore.ErrInvalidRange}, // no overflow
		{-1, 1, 10, 0, objstore.ErrInvalidArgument},
		{0, -2, 10, 0, objstore.ErrInvalidArgument},
	}
	for _, c := range cases {
		n, err := objstore.ValidateRange(c.offset, c.length, c.size)
		if c.err != nil {
			require.ErrorIs(t, err, c.err, "%+v", c)
			continue
		}
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c.n, n, "%+v", c)
	}
}

func TestOpError(t *testing.T) {
	err := objstore.NewOpError(objstore.OpGet, "a/b", objstore.ErrNotExist)
	require.EqualError(t, err, `get "a/b": objstore: object does not exist`)
	require.True(t, objstore.IsNotExist(err))
	require.Same(t, err, objstore.NewOpError(objstore.OpPut, "other", err), "never wrapped twice")
	require.NoError(t, objstore.NewOpError(objstore.OpGet, "k", nil))
	require.ErrorIs(t, objstore.ErrShortRead, io.ErrUnexpectedEOF)
}

func readAllExact(r io.Reader, n int64) ([]byte, error) {
	return io.ReadAll(objstore.NewExactReader(context.Background(), r, n))
}

func TestExactReader(t *testing.T) {
	b, err := readAllExact(strings.NewReader("hello"), 5)
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))

	// Byte at a time and with io.EOF together with the last bytes.
	b, err = readAllExact(iotest.OneByteReader(strings.NewReader("hello")), 5)
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
	b, err = readAllExact(iotest.DataErrReader(strings.NewReader("hello")), 5)
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))

	_, err = readAllExact(strings.NewReader("hel"), 5)
	require.ErrorIs(t, err, objstore.ErrShortRead)
	_, err = readAllExact(strings.NewReader("hello!"), 5)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	// A consumer that stops at exactly n bytes (an HTTP client sending
	// Content-Length bytes) still sees the surplus before the last bytes.
	buf := make([]byte, 5)
	n, err := io.ReadFull(objstore.NewExactReader(context.Background(), strings.NewReader("hello!"), 5), buf)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	require.Less(t, n, 5)
	_, err = readAllExact(strings.NewReader(""), 0)
	require.NoError(t, err)
	_, err = readAllExact(strings.NewReader("x"), 0)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	_, err = readAllExact(iotest.ErrReader(io.ErrClosedPipe), 5)
	require.ErrorIs(t, err, io.ErrClosedPipe)

	ctx, cancel := context.WithCancel(context.Background())
	r := objstore.NewExactReader(ctx, strings.NewReader("hello"), 5)
	_, err = r.Read(make([]byte, 2))
	require.NoError(t, err)
	cancel()
	_, err = r.Read(make([]byte, 2))
	require.ErrorIs(t, err, context.Canceled)
	_, err = r.Read(make([]byte, 2))
	require.ErrorIs(t, err, context.Canceled, "sticky")
}

// wrongBodyStore returns a fixed body for every Get, whatever the range:
// a server that ignores or misreads the range header.
type wrongBodyStore struct {
	objstore.Store
	body string
}

func (w wrongBodyStore) Get(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(w.body)), nil
}

func TestReadRangeChecksLength(t *testing.T) {
	ctx := context.Background()
	b, err := objstore.ReadRange(ctx, wrongBodyStore{body: "12345"}, "k", 0, 5)
	require.NoError(t, err)
	require.Equal(t, "12345", string(b))

	_, err = objstore.ReadRange(ctx, wrongBodyStore{body: "123"}, "k", 10, 5)
	require.ErrorIs(t, err, objstore.ErrShortRead)
	require.ErrorContains(t, err, "got 3 of 5 bytes")
	_, err = objstore.ReadRange(ctx, wrongBodyStore{body: "123456"}, "k", 10, 5)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	_, err = objstore.ReadRange(ctx, wrongBodyStore{body: ""}, "k", 0, 1)
	require.ErrorIs(t, err, objstore.ErrShortRead)
	_, err = objstore.ReadRange(ctx, wrongBodyStore{}, "k", 0, -1)
	require.ErrorIs(t, err, objstore.ErrInvalidArgument)
}

func TestListAllStopsAtError(t *testing.T) {
	ctx := context.Background()
	m := mem.New(mem.Options{})
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, m.Put(ctx, k, strings.NewReader(k), 1, objstore.PutOptions{}))
	}
	stop := errors.New("stop")
	var seen []string
	err := objstore.ListAll(ctx, m, "", func(o objstore.ObjectInfo) error {
		seen = append(seen, o.Key)
		if o.Key == "b" {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []string{"a", "b"}, seen)
}

// plainStore hides the mem store's MultipartStore capability.
type plainStore struct{ objstore.Store }

func TestPutLargeFallsBackToPut(t *testing.T) {
	ctx := context.Background()
	m := mem.New(mem.Options{})
	data := bytes.Repeat([]byte("x"), 1000)
	require.NoError(t, objstore.PutLarge(ctx, plainStore{m}, "k", bytes.NewReader(data), 1000, objstore.MultipartOptions{}))
	got, err := objstore.ReadAll(ctx, m, "k")
	require.NoError(t, err)
	require.Equal(t, data, got)
	err = objstore.PutLarge(ctx, plainStore{m}, "k", bytes.NewReader(data), 1, objstore.MultipartOptions{
		PutOptions: objstore.PutOptions{IfNoneMatch: true}})
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)
}

// exactBodyStore returns its body through NewExactBody with a declared
// length, as fs and the S3 adapter do.
type exactBodyStore struct {
	objstore.Store
	body     string
	declared int64
}

func (e exactBodyStore) Get(ctx context.Context, _ string, _, _ int64) (io.ReadCloser, error) {
	return objstore.NewExactBody(ctx, io.NopCloser(strings.NewReader(e.body)), e.declared), nil
}

func TestReadAllChecksDeclaredLength(t *testing.T) {
	ctx := context.Background()
	b, err := objstore.ReadAll(ctx, exactBodyStore{body: "12345", declared: 5}, "k")
	require.NoError(t, err)
	require.Equal(t, "12345", string(b))
	b, err = objstore.ReadAll(ctx, exactBodyStore{body: "", declared: 0}, "k")
	require.NoError(t, err)
	require.Empty(t, b)
	_, err = objstore.ReadAll(ctx, exactBodyStore{body: "123", declared: 5}, "k")
	require.ErrorIs(t, err, objstore.ErrShortRead)
	_, err = objstore.ReadAll(ctx, exactBodyStore{body: "123456", declared: 5}, "k")
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
}
