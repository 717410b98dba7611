package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// crashDisk is a disk with synced and unsynced files: in /d0 and /d1 (both
// synced into /), files f00..f09 of which the even ones were synced
// into their directory; each holds "synced" durably and "+unsynced"
// after it.
func crashDisk(t *testing.T) *vfs.MemFS {
	fs := vfs.NewCrashableMem()
	syncDir := func(dir string) {
		d, err := fs.OpenDir(dir)
		require.NoError(t, err)
		require.NoError(t, d.Sync())
		require.NoError(t, d.Close())
	}
	for _, dir := range []string{"/d0", "/d1"} {
		require.NoError(t, fs.MkdirAll(dir, 0o755))
		syncDir("/")
		for i := range 10 {
			f, err := fs.Create(fmt.Sprintf("%s/f%02d", dir, i), vfs.WriteCategoryUnspecified)
			require.NoError(t, err)
			_, err = f.Write([]byte("synced"))
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			_, err = f.Write([]byte("+unsynced"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			if i%2 == 0 {
				syncDir(dir)
			}
		}
	}
	return fs
}

// TestCrashImageDeterministic: a crash image keeping half the unsynced
// data is the same for the same rng on the same disk, keeps all that was
// synced, and keeps each file's unsynced data whole or not at all.
func TestCrashImageDeterministic(t *testing.T) {
	img := func() *vfs.MemFS { return crashImage(crashDisk(t), 50, rand.New(rand.NewPCG(1, 2))) }
	first := img()
	for range 5 {
		require.Equal(t, first.String(), img().String())
	}
	kept := map[string]int{}
	for _, dir := range []string{"/d0", "/d1"} {
		for i := range 10 {
			f, err := first.Open(fmt.Sprintf("%s/f%02d", dir, i))
			if i%2 == 0 {
				require.NoError(t, err, "a synced entry is kept")
			}
			if err != nil {
				kept["entry lost"]++
				continue
			}
			b, err := io.ReadAll(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Contains(t, []string{"synced", "synced+unsynced"}, string(b))
			kept[string(b)]++
		}
	}
	// This rng keeps the unsynced data of some files, not of others, and
	// loses an entry not synced.
	require.Len(t, kept, 3, "%v", kept)
}
