package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/objstoretest"
)

func open(t *testing.T, root string, opts Options) *Store {
	t.Helper()
	s, err := Open(root, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func put(t *testing.T, s *Store, key, data string) {
	t.Helper()
	require.NoError(t, s.Put(context.Background(), key, strings.NewReader(data), int64(len(data)), objstore.PutOptions{}))
}

// tree returns every path under root, relative, with a trailing '/' on
// directories.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		paths = append(paths, rel)
		return nil
	}))
	return paths
}

func TestConformanceNoSync(t *testing.T) {
	objstoretest.RunConformance(t, func(t *testing.T) objstore.Store {
		return open(t, t.TempDir(), Options{NoSync: true})
	})
}

func TestEscape(t *testing.T) {
	for seg, want := range map[string]string{
		"00000000000000000000.log": "00000000000000000000.log",
		"Orders":                   "%4Frders",
		".hidden":                  "%2Ehidden",
		"a..b":                     "a..b",
		"...":                      "%2E..",
		"a~":                       "a%7E",
		"100%":                     "100%25",
		"ü":                        "%C3%BC",
		"with space":               "with%20space",
	} {
		require.Equal(t, want, escape(seg), "escape(%q)", seg)
		got, ok := unescape(want)
		require.True(t, ok, "unescape(%q)", want)
		require.Equal(t, seg, got)
	}
	// Names escape cannot produce are foreign and skipped by List.
	for _, name := range []string{"README", ".tmp-1", "%4frders", "%4", "%ZZ", "a%2Db", "", "%2E", "x~"} {
		_, ok := unescape(name)
		require.False(t, ok, "unescape(%q)", name)
	}
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	s := open(t, root, Options{})
	put(t, s, "Orders-3/00000000000000000000.log", "seg")
	put(t, s, "a", "file a")
	put(t, s, "a/b", "file a/b")
	put(t, s, ".x/..y", "dots")
	require.Equal(t, []string{
		"%2Ex~/", "%2Ex~/%2E.y",
		"%4Frders-3~/", "%4Frders-3~/00000000000000000000.log",
		"a", "a~/", "a~/b",
	}, tree(t, root))
}

func TestKeysStayUnderRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	s := open(t, root, Options{})
	keys := append(slices.Clone(objstoretest.UnusualKeys), "..a/b", "a/..b", "%2E%2E/x", "~/x", "-/x")
	for _, k := range keys {
		put(t, s, k, k)
	}
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the root in its parent")
	for _, p := range tree(t, root) {
		require.False(t, strings.HasPrefix(p, "."), "a hidden name %q under the root", p)
	}
	for _, k := range objstoretest.InvalidKeys {
		err := s.Put(context.Background(), k, strings.NewReader("x"), 1, objstore.PutOptions{})
		require.ErrorIs(t, err, objstore.ErrInvalidKey)
	}
}

func TestLongSegment(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	ctx := context.Background()
	ok := strings.Repeat("s", 255)
	put(t, s, ok, "fits")
	put(t, s, strings.Repeat("d", 254)+"/x", "fits with the directory suffix")

	for _, k := range []string{strings.Repeat("s", 256), strings.Repeat("d", 255) + "/x", strings.Repeat("Ü", 50)} {
		err := s.Put(ctx, k, strings.NewReader("x"), 1, objstore.PutOptions{})
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "key of %d bytes", len(k))
		_, err = s.Stat(ctx, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey)
	}
}

func TestDeleteRemovesEmptyDirectories(t *testing.T) {
	root := t.TempDir()
	s := open(t, root, Options{})
	ctx := context.Background()
	put(t, s, "t/p/1/seg", "x")
	put(t, s, "t/q", "y")
	require.NoError(t, s.Delete(ctx, "t/p/1/seg"))
	require.Equal(t, []string{"t~/", "t~/q"}, tree(t, root))
	require.NoError(t, s.Delete(ctx, "t/q"))
	require.Empty(t, tree(t, root))
}

func TestFailedPutLeavesNoTempFile(t *testing.T) {
	root := t.TempDir()
	s := open(t, root, Options{})
	ctx := context.Background()
	err := s.Put(ctx, "k", strings.NewReader("short"), 10, objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrShortRead)
	put(t, s, "k", "v")
	err = s.Put(ctx, "k", strings.NewReader("w"), 1, objstore.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)
	err = s.Put(ctx, "k", iotestErrReader{}, 10, objstore.PutOptions{})
	require.ErrorIs(t, err, errReader)
	require.Equal(t, []string{"k"}, tree(t, root))
}

var errReader = errors.New("reader broke")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errReader }

func TestOpenRemovesStaleTempFiles(t *testing.T) {
	root := t.TempDir()
	s := open(t, root, Options{})
	put(t, s, "k", "v")
	old := filepath.Join(root, tempPrefix+"old")
	fresh := filepath.Join(root, tempPrefix+"fresh")
	require.NoError(t, os.WriteFile(old, []byte("torn"), 0o644))
	require.NoError(t, os.WriteFile(fresh, []byte("in flight"), 0o644))
	past := processStart.Add(-time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))

	// List skips temp files.
	page, _, err := s.List(context.Background(), "", "", 0)
	require.NoError(t, err)
	require.Len(t, page, 1)

	// A temp file from before this process is a crashed Put's; one from
	// this process may belong to another Store on the same root.
	open(t, root, Options{})
	require.Equal(t, []string{tempPrefix + "fresh", "k"}, tree(t, root))
	open(t, root, Options{RemoveAllTemps: true})
	require.Equal(t, []string{"k"}, tree(t, root))
}

func TestListSkipsForeignFiles(t *testing.T) {
	root := t.TempDir()
	s := open(t, root, Options{})
	put(t, s, "a/b", "x")
	require.NoError(t, os.WriteFile(filepath.Join(root, "README"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a~", "x~"), nil, 0o644)) // a file named like a directory
	require.NoError(t, os.Mkdir(filepath.Join(root, "dir-without-suffix"), 0o755))
	var keys []string
	require.NoError(t, objstore.ListAll(context.Background(), s, "", func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}))
	require.Equal(t, []string{"a/b"}, keys)
}

// TestPutDeleteSameDirectory races Puts against Deletes whose cleanup
// removes the directories the Puts need.
func TestPutDeleteSameDirectory(t *testing.T) {
	s := open(t, t.TempDir(), Options{NoSync: true})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("t/p/%d/%d", g%2, g)
				data := []byte(fmt.Sprint(i))
				if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfNoneMatch: i%2 == 0}); err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("delete %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestGetBodyClosesFile(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	put(t, s, "k", "0123456789")
	body, err := s.Get(context.Background(), "k", 2, 3)
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.Equal(t, "234", string(b))
	require.NoError(t, body.Close())
	_, err = body.Read(make([]byte, 1))
	require.Error(t, err, "read after close")
}
