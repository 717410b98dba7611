// Package objstoretest is the conformance suite every objstore.Store runs:
// fs and mem in this module, and the S3 adapter against a real server. It
// pins down the behaviour the package comment of objstore promises, so
// that the remote tier can rely on it whatever the store.
//
// Use it from a store's test:
//
//	func TestConformance(t *testing.T) {
//		objstoretest.RunConformance(t, func(t *testing.T) objstore.Store {
//			return newStoreForTest(t) // empty, isolated (own bucket or prefix)
//		})
//	}
package objstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// RunConformance runs the suite as subtests. newStore must return an
// empty store that no other subtest shares; the suite closes it.
func RunConformance(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	open := func(t *testing.T) objstore.Store {
		s := newStore(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutGet", testPutGet},
		{"EmptyObject", testEmptyObject},
		{"RangeGet", testRangeGet},
		{"NotExist", testNotExist},
		{"PutSizeMismatch", testPutSizeMismatch},
		{"IfNoneMatch", testIfNoneMatch},
		{"IfNoneMatchRace", testIfNoneMatchRace},
		{"InvalidKeys", testInvalidKeys},
		{"UnusualKeys", testUnusualKeys},
		{"ListOrder", testListOrder},
		{"ListPagination", testListPagination},
		{"ListSmallPages", testListSmallPages},
		{"Delete", testDelete},
		{"ContextCanceledBefore", testContextCanceledBefore},
		{"ContextCanceledDuringPut", testContextCanceledDuringPut},
		{"ContextCanceledDuringGet", testContextCanceledDuringGet},
		{"Concurrent", testConcurrent},
		{"LargeObject", testLargeObject},
		{"PutLarge", testPutLarge},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// payload returns n deterministic pseudo-random bytes.
func payload(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func put(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	require.NoError(t, s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
}

func readAll(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	b, err := objstore.ReadAll(context.Background(), s, key)
	require.NoError(t, err)
	return b
}

// requireOpError checks that err is an *OpError for op and key wrapping want.
func requireOpError(t *testing.T, err error, op, key string, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe, "%v is not an *objstore.OpError", err)
	require.Equal(t, op, oe.Op)
	require.Equal(t, key, oe.Key)
}

func requireAbsent(t *testing.T, s objstore.Store, key string) {
	t.Helper()
	_, err := s.Stat(context.Background(), key)
	require.True(t, objstore.IsNotExist(err), "stat %q: want not-exist, got %v", key, err)
}

func listAll(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, objstore.ListAll(context.Background(), s, prefix, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}))
	return keys
}

func testPutGet(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := payload(1, 1000)
	before := time.Now().Add(-time.Minute) // clock skew with a server
	put(t, s, "seg/1.log", data)
	require.Equal(t, data, readAll(t, s, "seg/1.log"))

	info, err := s.Stat(ctx, "seg/1.log")
	require.NoError(t, err)
	require.Equal(t, "seg/1.log", info.Key)
	require.EqualValues(t, 1000, info.Size)
	require.True(t, info.ModTime.After(before), "mod time %v", info.ModTime)

	// Without IfNoneMatch a Put replaces the object.
	other := payload(2, 10)
	put(t, s, "seg/1.log", other)
	require.Equal(t, other, readAll(t, s, "seg/1.log"))
	info, err = s.Stat(ctx, "seg/1.log")
	require.NoError(t, err)
	require.EqualValues(t, 10, info.Size)

	// The store keeps its own copy: changing the caller's buffer after
	// Put changes nothing.
	buf := payload(3, 64)
	want := slices.Clone(buf)
	put(t, s, "seg/2.log", buf)
	clear(buf)
	require.Equal(t, want, readAll(t, s, "seg/2.log"))
}

func testEmptyObject(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "empty", nil)
	require.Empty(t, readAll(t, s, "empty"))
	info, err := s.Stat(ctx, "empty")
	require.NoError(t, err)
	require.Zero(t, info.Size)
	b, err := objstore.ReadRange(ctx, s, "empty", 0, 0)
	require.NoError(t, err)
	require.Empty(t, b)
	_, err = s.Get(ctx, "empty", 1, -1)
	requireOpError(t, err, objstore.OpGet, "empty", objstore.ErrInvalidRange)
	require.Equal(t, []string{"empty"}, listAll(t, s, ""))
}

func testRangeGet(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := payload(4, 100)
	put(t, s, "r", data)
	cases := []struct {
		offset, length int64
		want           []byte // nil with err set
		err            error
	}{
		{0, -1, data, nil},
		{0, 100, data, nil},
		{0, 1, data[:1], nil},
		{0, 0, []byte{}, nil},
		{50, 10, data[50:60], nil},
		{50, -1, data[50:], nil},
		{99, 1, data[99:], nil},
		{99, -1, data[99:], nil},
		// offset == size: a read at the end is empty, not an error.
		{100, -1, []byte{}, nil},
		{100, 0, []byte{}, nil},
		// Past the end: an error, never a clipped range.
		{100, 1, nil, objstore.ErrInvalidRange},
		{101, -1, nil, objstore.ErrInvalidRange},
		{90, 11, nil, objstore.ErrInvalidRange},
		{0, 101, nil, objstore.ErrInvalidRange},
		{1000, 5, nil, objstore.ErrInvalidRange},
		{-1, 5, nil, objstore.ErrInvalidArgument},
		{0, -2, nil, objstore.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("offset=%d/length=%d", c.offset, c.length), func(t *testing.T) {
			body, err := s.Get(ctx, "r", c.offset, c.length)
			if c.err != nil {
				requireOpError(t, err, objstore.OpGet, "r", c.err)
				require.Nil(t, body)
				if c.length >= 0 {
					_, err := objstore.ReadRange(ctx, s, "r", c.offset, c.length)
					requireOpError(t, err, objstore.OpGet, "r", c.err)
				}
				return
			}
			require.NoError(t, err)
			got, err := io.ReadAll(body)
			require.NoError(t, err)
			require.NoError(t, body.Close())
			require.Equal(t, c.want, got)
			if c.length >= 0 {
				got, err := objstore.ReadRange(ctx, s, "r", c.offset, c.length)
				require.NoError(t, err)
				require.Equal(t, c.want, got)
			}
		})
	}
}

func testNotExist(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	_, err := s.Get(ctx, "missing/key", 0, -1)
	requireOpError(t, err, objstore.OpGet, "missing/key", objstore.ErrNotExist)
	require.True(t, objstore.IsNotExist(err))
	_, err = s.Get(ctx, "missing/key", 10, 5)
	require.True(t, objstore.IsNotExist(err), "ranged get of a missing key: %v", err)
	_, err = s.Stat(ctx, "missing/key")
	requireOpError(t, err, objstore.OpStat, "missing/key", objstore.ErrNotExist)
	_, err = objstore.ReadAll(ctx, s, "missing")
	require.True(t, objstore.IsNotExist(err))

	// A key that is only a prefix of other keys does not exist.
	put(t, s, "dir/file", []byte("x"))
	_, err = s.Stat(ctx, "dir")
	require.True(t, objstore.IsNotExist(err), "stat of a prefix: %v", err)
	_, err = s.Get(ctx, "dir", 0, -1)
	require.True(t, objstore.IsNotExist(err), "get of a prefix: %v", err)
}

func testPutSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	data := payload(5, 100)
	err := s.Put(ctx, "short", bytes.NewReader(data[:60]), 100, objstore.PutOptions{})
	requireOpError(t, err, objstore.OpPut, "short", objstore.ErrShortRead)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	requireAbsent(t, s, "short")

	err = s.Put(ctx, "long", bytes.NewReader(data), 60, objstore.PutOptions{})
	requireOpError(t, err, objstore.OpPut, "long", objstore.ErrSizeMismatch)
	requireAbsent(t, s, "long")

	err = s.Put(ctx, "negative", bytes.NewReader(nil), -1, objstore.PutOptions{})
	requireOpError(t, err, objstore.OpPut, "negative", objstore.ErrInvalidArgument)

	// A failed replacement leaves the old object.
	put(t, s, "kept", data)
	err = s.Put(ctx, "kept", bytes.NewReader(data[:10]), 100, objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrShortRead)
	require.Equal(t, data, readAll(t, s, "kept"))
	require.Equal(t, []string{"kept"}, listAll(t, s, ""))
}

func testIfNoneMatch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	first, second := payload(6, 50), payload(7, 70)
	opts := objstore.PutOptions{IfNoneMatch: true}
	require.NoError(t, s.Put(ctx, "once", bytes.NewReader(first), 50, opts))
	err := s.Put(ctx, "once", bytes.NewReader(second), 70, opts)
	requireOpError(t, err, objstore.OpPut, "once", objstore.ErrPreconditionFailed)
	require.True(t, objstore.IsPreconditionFailed(err))
	require.Equal(t, first, readAll(t, s, "once"))

	// After a delete the key is free again.
	require.NoError(t, s.Delete(ctx, "once"))
	require.NoError(t, s.Put(ctx, "once", bytes.NewReader(second), 70, opts))
	require.Equal(t, second, readAll(t, s, "once"))
}

func testIfNoneMatchRace(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const n = 8
	var wins atomic.Int32
	winner := -1
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			data := payload(uint64(100+i), 1000+i)
			err := s.Put(ctx, "race/obj", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfNoneMatch: true})
			switch {
			case err == nil:
				wins.Add(1)
				mu.Lock()
				winner = i
				mu.Unlock()
			case !objstore.IsPreconditionFailed(err):
				t.Errorf("put %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load(), "exactly one IfNoneMatch put wins")
	require.Equal(t, payload(uint64(100+winner), 1000+winner), readAll(t, s, "race/obj"))
}

// InvalidKeys lists keys every store refuses with ErrInvalidKey.
var InvalidKeys = []string{
	"",
	"/leading",
	"a/../b",
	"..",
	"a/..",
	"./a",
	"a/./b",
	"a//b",
	"trailing/",
	"nul\x00byte",
	"bad-utf8-\xff",
	strings.Repeat("k", objstore.MaxKeyLen+1),
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, key := range InvalidKeys {
		name := key
		if len(name) > 20 {
			name = name[:20] + "..."
		}
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			require.ErrorIs(t, objstore.ValidateKey(key), objstore.ErrInvalidKey)
			err := s.Put(ctx, key, bytes.NewReader([]byte("x")), 1, objstore.PutOptions{})
			requireOpError(t, err, objstore.OpPut, key, objstore.ErrInvalidKey)
			_, err = s.Get(ctx, key, 0, -1)
			requireOpError(t, err, objstore.OpGet, key, objstore.ErrInvalidKey)
			_, err = s.Stat(ctx, key)
			requireOpError(t, err, objstore.OpStat, key, objstore.ErrInvalidKey)
			err = s.Delete(ctx, key)
			requireOpError(t, err, objstore.OpDelete, key, objstore.ErrInvalidKey)
		})
	}
	for _, prefix := range []string{"/x", "nul\x00", "\xff", strings.Repeat("p", objstore.MaxKeyLen+1)} {
		_, _, err := s.List(ctx, prefix, "", 0)
		requireOpError(t, err, objstore.OpList, prefix, objstore.ErrInvalidKey)
	}
	require.Empty(t, listAll(t, s, ""))
}

// UnusualKeys are valid keys that a naive mapping to file names or URLs
// gets wrong.
var UnusualKeys = []string{
	"a..b",
	"...",
	".hidden",
	"dir/.hidden",
	"UPPER/Case",
	"upper/case",
	"with space/and+plus",
	"percent%41/%2F",
	"tilde~/x~",
	"unicode/ключ/ü",
	"q?x=1&y=2#frag",
	"ends.with.tmp",
	".tmp-looks-like-a-temp-file",
	strings.Repeat("s", 100) + "/" + strings.Repeat("t", 100),
	// Exactly MaxKeyLen bytes, in segments short enough for any file system.
	strings.TrimSuffix(strings.Repeat(strings.Repeat("m", 99)+"/", 11), "/")[:objstore.MaxKeyLen-4] + "/end",
}

func testUnusualKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for i, key := range UnusualKeys {
		require.NoError(t, objstore.ValidateKey(key), "key %q", key)
		put(t, s, key, payload(uint64(i), i+1))
	}
	for i, key := range UnusualKeys {
		require.Equal(t, payload(uint64(i), i+1), readAll(t, s, key), "key %q", key)
		info, err := s.Stat(ctx, key)
		require.NoError(t, err)
		require.EqualValues(t, i+1, info.Size, "key %q", key)
	}
	want := slices.Sorted(slices.Values(UnusualKeys))
	require.Equal(t, want, listAll(t, s, ""))
	for _, key := range UnusualKeys {
		require.NoError(t, s.Delete(ctx, key))
	}
	require.Empty(t, listAll(t, s, ""))
}

func testListOrder(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	// "a" and "a/..." coexist; '-' (0x2d) sorts before '/' (0x2f) before
	// '0' (0x30), so a store that walks directories naively misorders.
	keys := []string{"b", "a/c", "a0", "a/b/c", "a", "a-b", "a/b", "a/b-c", "a/b/c/d", "ab"}
	for i, k := range keys {
		put(t, s, k, payload(uint64(i), i))
	}
	sorted := slices.Sorted(slices.Values(keys))
	require.Equal(t, sorted, listAll(t, s, ""))

	page, next, err := s.List(ctx, "", "", 0)
	require.NoError(t, err)
	require.Empty(t, next)
	for i, o := range page {
		require.Equal(t, sorted[i], o.Key)
		require.EqualValues(t, slices.Index(keys, o.Key), o.Size, "size of %q", o.Key)
	}

	require.Equal(t, []string{"a/b", "a/b-c", "a/b/c", "a/b/c/d", "a/c"}, listAll(t, s, "a/"))
	require.Equal(t, []string{"a/b", "a/b-c", "a/b/c", "a/b/c/d"}, listAll(t, s, "a/b"))
	require.Equal(t, []string{"a/b/c", "a/b/c/d"}, listAll(t, s, "a/b/"))
	require.Equal(t, []string{"a", "a-b", "a/b", "a/b-c", "a/b/c", "a/b/c/d", "a/c", "a0", "ab"}, listAll(t, s, "a"))
	require.Empty(t, listAll(t, s, "zz"))
	require.Empty(t, listAll(t, s, "a/zz/"))
	require.Empty(t, listAll(t, s, "a//"))

	// startAfter need not be a stored key.
	page, next, err = s.List(ctx, "", "a/b/", 3)
	require.NoError(t, err)
	require.Equal(t, []string{"a/b/c", "a/b/c/d", "a/c"}, keysOf(page))
	if next != "" {
		require.Equal(t, "a/c", next)
	}
	page, next, err = s.List(ctx, "a/", "a/b/c/d", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a/c"}, keysOf(page))
	require.Empty(t, next)
	page, next, err = s.List(ctx, "", "zzz", 0)
	require.NoError(t, err)
	require.Empty(t, page)
	require.Empty(t, next)
}

func keysOf(objs []objstore.ObjectInfo) []string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

// putMany stores the keys with a few goroutines (each key's value is the
// key itself).
func putMany(t *testing.T, s objstore.Store, keys []string) {
	t.Helper()
	ctx := context.Background()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for k := range work {
				if err := s.Put(ctx, k, strings.NewReader(k), int64(len(k)), objstore.PutOptions{}); err != nil {
					t.Errorf("put %q: %v", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	require.False(t, t.Failed())
}

// pages lists prefix page by page and checks each page's promises.
func pages(t *testing.T, s objstore.Store, prefix string, limit int) (keys []string, count int) {
	t.Helper()
	ctx := context.Background()
	startAfter := ""
	for {
		page, next, err := s.List(ctx, prefix, startAfter, limit)
		require.NoError(t, err)
		effective := limit
		if effective <= 0 {
			effective = objstore.DefaultListLimit
		}
		require.LessOrEqual(t, len(page), effective)
		for _, o := range page {
			require.True(t, strings.HasPrefix(o.Key, prefix))
			require.Greater(t, o.Key, startAfter)
			require.EqualValues(t, len(o.Key), o.Size)
			keys = append(keys, o.Key)
		}
		count++
		require.Less(t, count, 10_000, "listing does not end")
		if next == "" {
			return keys, count
		}
		require.Greater(t, next, startAfter, "next must advance")
		startAfter = next
	}
}

func testListPagination(t *testing.T, s objstore.Store) {
	const n = 2500
	var keys []string
	for i := range n {
		// Mostly one flat prefix; every tenth key one level deeper.
		if i%10 == 0 {
			keys = append(keys, fmt.Sprintf("part/%05d/idx", i))
		} else {
			keys = append(keys, fmt.Sprintf("part/%05d", i))
		}
	}
	keys = append(keys, "other/x", "parts") // outside the prefix "part/"
	putMany(t, s, keys)

	want := slices.Sorted(slices.Values(keys[:n]))
	got, count := pages(t, s, "part/", 1000)
	require.Equal(t, want, got)
	require.GreaterOrEqual(t, count, 3)
	got, _ = pages(t, s, "part/", 0)
	require.Equal(t, want, got)
	got, _ = pages(t, s, "", 1000)
	require.Equal(t, slices.Sorted(slices.Values(keys)), got)
}

func testListSmallPages(t *testing.T, s objstore.Store) {
	var keys []string
	for i := range 6 {
		for j := range 5 {
			keys = append(keys, fmt.Sprintf("t%d/p%d/seg", i, j), fmt.Sprintf("t%d/p%d", i, j), fmt.Sprintf("t%d/p%d-x/y", i, j))
		}
	}
	putMany(t, s, keys)
	want := slices.Sorted(slices.Values(keys))
	for _, limit := range []int{1, 2, 7, 89, 90, 91} {
		got, _ := pages(t, s, "", limit)
		require.Equal(t, want, got, "limit %d", limit)
	}
	var wantT3 []string
	for _, k := range want {
		if strings.HasPrefix(k, "t3/p") {
			wantT3 = append(wantT3, k)
		}
	}
	got, _ := pages(t, s, "t3/p", 4)
	require.Equal(t, wantT3, got)
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, k := range []string{"a", "a/b", "a/c", "a/b/c/d"} {
		put(t, s, k, []byte(k))
	}
	require.NoError(t, s.Delete(ctx, "a/b/c/d"))
	requireAbsent(t, s, "a/b/c/d")
	require.NoError(t, s.Delete(ctx, "a/b/c/d"), "deleting again succeeds")
	require.NoError(t, s.Delete(ctx, "never/was"))
	require.Equal(t, []string{"a", "a/b", "a/c"}, listAll(t, s, ""))

	require.NoError(t, s.Delete(ctx, "a/b"))
	require.Equal(t, []string{"a", "a/c"}, listAll(t, s, ""))
	require.Equal(t, []byte("a/c"), readAll(t, s, "a/c"))
	require.NoError(t, s.Delete(ctx, "a"))
	require.NoError(t, s.Delete(ctx, "a/c"))
	require.Empty(t, listAll(t, s, ""))

	// The key is usable again, under the emptied prefixes too.
	put(t, s, "a/b/c/d", []byte("again"))
	require.Equal(t, []byte("again"), readAll(t, s, "a/b/c/d"))
}

func testContextCanceledBefore(t *testing.T, s objstore.Store) {
	put(t, s, "present", []byte("data"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.PutOptions{})
	requireOpError(t, err, objstore.OpPut, "k", context.Canceled)
	_, err = s.Get(ctx, "present", 0, -1)
	requireOpError(t, err, objstore.OpGet, "present", context.Canceled)
	_, err = s.Stat(ctx, "present")
	requireOpError(t, err, objstore.OpStat, "present", context.Canceled)
	_, _, err = s.List(ctx, "", "", 0)
	requireOpError(t, err, objstore.OpList, "", context.Canceled)
	err = s.Delete(ctx, "present")
	requireOpError(t, err, objstore.OpDelete, "present", context.Canceled)
	_, err = objstore.ReadRange(ctx, s, "present", 0, 1)
	require.ErrorIs(t, err, context.Canceled)

	deadline, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, err = s.Stat(deadline, "present")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	requireAbsent(t, s, "k")
	require.Equal(t, []byte("data"), readAll(t, s, "present"))
}

// cancelingReader cancels its context once it has yielded after bytes,
// and keeps yielding data: the store must notice the context, not the
// reader.
type cancelingReader struct {
	r      io.Reader
	after  int
	n      int
	cancel context.CancelFunc
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	if c.n >= c.after {
		c.cancel()
	}
	if len(p) > 32<<10 {
		p = p[:32<<10]
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func testContextCanceledDuringPut(t *testing.T, s objstore.Store) {
	data := payload(8, 4<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &cancelingReader{r: bytes.NewReader(data), after: 64 << 10, cancel: cancel}
	err := s.Put(ctx, "canceled", r, int64(len(data)), objstore.PutOptions{})
	require.ErrorIs(t, err, context.Canceled)
	requireAbsent(t, s, "canceled")
	require.Empty(t, listAll(t, s, ""))
}

func testContextCanceledDuringGet(t *testing.T, s objstore.Store) {
	data := payload(9, 4<<20)
	put(t, s, "big", data)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, err := s.Get(ctx, "big", 0, -1)
	require.NoError(t, err)
	defer body.Close()
	head := make([]byte, 1024)
	_, err = io.ReadFull(body, head)
	require.NoError(t, err)
	require.Equal(t, data[:1024], head)
	cancel()
	rest, err := io.ReadAll(body)
	require.Error(t, err, "a body read after its context ended must fail")
	require.Less(t, len(rest), len(data)-1024, "not the whole object after cancel")
}

func testConcurrent(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprintf("c/%d/%d", g, i)
				data := payload(uint64(g*1000+i), 1+(g*31+i*17)%5000)
				if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				got, err := objstore.ReadAll(ctx, s, key)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("read %s: %v (equal %v)", key, err, bytes.Equal(got, data))
					return
				}
				if i%2 == 0 {
					if err := s.Delete(ctx, key); err != nil {
						t.Errorf("delete %s: %v", key, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, listAll(t, s, "c/"), 8*10)
}

func testLargeObject(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const size = 16 << 20
	data := payload(10, size)
	want := sha256.Sum256(data)
	require.NoError(t, s.Put(ctx, "large", bytes.NewReader(data), size, objstore.PutOptions{}))
	data = nil // the store must not keep using the caller's buffer

	body, err := s.Get(ctx, "large", 0, -1)
	require.NoError(t, err)
	h := sha256.New()
	n, err := io.Copy(h, body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	require.EqualValues(t, size, n)
	require.Equal(t, want[:], h.Sum(nil))

	tail, err := objstore.ReadRange(ctx, s, "large", size-(1<<20), 1<<20)
	require.NoError(t, err)
	require.Equal(t, payload(10, size)[size-(1<<20):], tail)
}

func testPutLarge(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const size = 11 << 20 // three parts of 5 MiB (S3's minimum part size)
	data := payload(11, size)
	opts := objstore.MultipartOptions{PutOptions: objstore.PutOptions{IfNoneMatch: true}, PartBytes: 5 << 20, Concurrency: 2}
	require.NoError(t, objstore.PutLarge(ctx, s, "mp/obj", bytes.NewReader(data), size, opts))
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(readAll(t, s, "mp/obj")))
	err := objstore.PutLarge(ctx, s, "mp/obj", bytes.NewReader(data[:10]), 10, opts)
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)

	// A reader that fails leaves no object.
	err = objstore.PutLarge(ctx, s, "mp/failed", failingReaderAt{data: data, failAt: 7 << 20}, size, opts)
	require.Error(t, err)
	requireAbsent(t, s, "mp/failed")
	require.Equal(t, []string{"mp/obj"}, listAll(t, s, "mp/"))
}

type failingReaderAt struct {
	data   []byte
	failAt int64
}

var errReaderAt = errors.New("objstoretest: reader failed")

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		return 0, errReaderAt
	}
	return copy(p, f.data[off:]), nil
}

func testClosed(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "k", []byte("v"))
	require.NoError(t, s.Close())
	err := s.Put(ctx, "k2", strings.NewReader("x"), 1, objstore.PutOptions{})
	requireOpError(t, err, objstore.OpPut, "k2", objstore.ErrClosed)
	_, err = s.Get(ctx, "k", 0, -1)
	requireOpError(t, err, objstore.OpGet, "k", objstore.ErrClosed)
	_, err = s.Stat(ctx, "k")
	requireOpError(t, err, objstore.OpStat, "k", objstore.ErrClosed)
	_, _, err = s.List(ctx, "", "", 0)
	requireOpError(t, err, objstore.OpList, "", objstore.ErrClosed)
	err = s.Delete(ctx, "k")
	requireOpError(t, err, objstore.OpDelete, "k", objstore.ErrClosed)
	require.NoError(t, s.Close(), "Close may be called again")
}
