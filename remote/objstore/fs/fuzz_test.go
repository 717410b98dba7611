package fs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// FuzzKeyPath checks the key-to-path mapping: every valid key maps to a
// path strictly under the root whose names decode back to the key, no
// name is hidden (temp files) and only directories end in '~'.
func FuzzKeyPath(f *testing.F) {
	for _, k := range []string{"a", "a/b", "..", "a/../b", ".x/..y", "Orders/00.log", "~/x~", "%2E", "ü/\u00a0", "a//b"} {
		f.Add(k)
	}
	root := filepath.Join(string(filepath.Separator), "objstore-root")
	s := &Store{root: root}
	f.Fuzz(func(t *testing.T, key string) {
		path, err := s.path(key)
		if err != nil {
			require.ErrorIs(t, err, objstore.ErrInvalidKey)
			return
		}
		require.NoError(t, objstore.ValidateKey(key))
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		require.False(t, rel == "." || strings.HasPrefix(rel, ".."), "key %q escapes to %q", key, rel)
		names := strings.Split(filepath.ToSlash(rel), "/")
		segs := make([]string, len(names))
		for i, name := range names {
			require.False(t, strings.HasPrefix(name, "."), "hidden name %q", name)
			base, isDir := strings.CutSuffix(name, dirSuffix)
			require.Equal(t, i < len(names)-1, isDir, "name %q", name)
			seg, ok := unescape(base)
			require.True(t, ok, "name %q", name)
			segs[i] = seg
		}
		require.Equal(t, key, strings.Join(segs, "/"))
	})
}

// TestListPrefixCannotEscape lists with prefixes that would leave the
// root if joined naively.
func TestListPrefixCannotEscape(t *testing.T) {
	parent := t.TempDir()
	s := open(t, filepath.Join(parent, "root"), Options{})
	put(t, s, "a/b", "x")
	for _, prefix := range []string{"../", "../root/", "a/../", "./a", "a/./", "..", "a//"} {
		page, next, err := s.List(context.Background(), prefix, "", 0)
		require.NoError(t, err, "prefix %q", prefix)
		require.Empty(t, page, "prefix %q", prefix)
		require.Empty(t, next)
	}
}
