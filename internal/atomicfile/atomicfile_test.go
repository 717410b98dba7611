package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, fsys vfs.FS, path string) (string, bool) {
	t.Helper()
	f, err := fsys.Open(path)
	if errors.Is(err, errNotExist) {
		return "", false
	}
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b), true
}

var errNotExist = vfs.NewMem().Remove("missing") // the MemFS not-exist error

func TestWriteReplaces(t *testing.T) {
	fsys := vfs.NewMem()
	require.NoError(t, fsys.MkdirAll("d", 0o755))
	require.NoError(t, Write(fsys, "d/f", []byte("one")))
	require.NoError(t, Write(fsys, "d/f", []byte("two")))
	got, ok := readAll(t, fsys, "d/f")
	require.True(t, ok)
	require.Equal(t, "two", got)
	names, err := fsys.List("d")
	require.NoError(t, err)
	require.Equal(t, []string{"f"}, names, "no temp file is left behind")
}

// TestCrashAtEveryStep crashes after each file operation of a series of
// writes and checks the file holds the last committed or the in-flight
// contents, never anything else, and never an older one.
func TestCrashAtEveryStep(t *testing.T) {
	const writes = 4
	for _, percent := range []int{0, 50, 100} {
		for crashAt := 0; ; crashAt++ {
			seed := uint64(crashAt*1000 + percent)
			mem := vfs.NewCrashableMem()
			require.NoError(t, mem.MkdirAll("d", 0o755))
			dir, err := mem.OpenDir("")
			require.NoError(t, err)
			require.NoError(t, dir.Sync())
			require.NoError(t, dir.Close())
			d, err := mem.OpenDir("d")
			require.NoError(t, err)
			require.NoError(t, d.Sync())
			require.NoError(t, d.Close())

			ops := 0
			var clone *vfs.MemFS
			hook := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
					if ops == crashAt && clone == nil {
						clone = mem.CrashClone(vfs.CrashCloneCfg{
							UnsyncedDataPercent: percent, RNG: rand.New(rand.NewPCG(seed, 1))})
					}
					ops++
				}
				return nil
			})
			fsys := errorfs.Wrap(mem, hook)
			committed, inflight := "", ""
			for i := 0; i < writes && clone == nil; i++ {
				inflight = fmt.Sprintf("contents %d", i)
				require.NoError(t, Write(fsys, "d/f", []byte(inflight)))
				if clone == nil {
					committed = inflight
				}
			}
			if clone == nil {
				require.GreaterOrEqual(t, crashAt, writes*4, "too few crash points")
				break
			}
			got, _ := readAll(t, clone, "d/f")
			if got != committed && got != inflight {
				t.Fatalf("crash point %d (seed %d, %d%% unsynced kept): file holds %q, want %q or %q",
					crashAt, seed, percent, got, committed, inflight)
			}
			require.NoError(t, RemoveTemp(clone, "d/f"))
		}
	}
}

func TestWriteErrors(t *testing.T) {
	for i := 0; ; i++ {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("d", 0o755))
		require.NoError(t, Write(mem, "d/f", []byte("old")))
		inj := errorfs.ErrInjected.If(errorfs.And(errorfs.Writes, errorfs.OnIndex(int32(i))))
		err := Write(errorfs.Wrap(mem, inj), "d/f", []byte("new"))
		if err == nil {
			require.Greater(t, i, 3, "every step should have been failed once")
			return
		}
		var injected errorfs.LabelledError
		require.True(t, errors.As(err, &injected), "step %d: %v is not the injected error", i, err)
		got, ok := readAll(t, mem, "d/f")
		require.True(t, ok)
		require.Contains(t, []string{"old", "new"}, got, "step %d", i)
	}
}
