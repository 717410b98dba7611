package log

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log/internal/segment"
)

// TestMoveAsideIsCrashSafe crashes after every file operation of a
// recovery that moves a damaged segment and the later ones aside. Each
// crash image must still hold every original segment's bytes, under its
// live name or a ".damaged" one, and recover to the same log: records
// [0, damaged+2) and nothing after.
func TestMoveAsideIsCrashSafe(t *testing.T) {
	e, bases := segmentFiles(t, 60, 800)
	damaged := bases[1]
	e.flipInThirdBatch(damaged)
	e.remove(OffsetsCheckpointFileName, CleanShutdownFileName)
	original := map[int64][]byte{}
	for _, b := range bases {
		original[b] = readAll(t, e.fs, e.path(segment.LogFileName(b)))
	}
	// The reference: recover once without crashing.
	ref := e.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	l, err := Open("p0", Options{FS: ref, SegmentBytes: 800, IndexIntervalBytes: 1})
	require.NoError(t, err)
	want, err := readAllRecords(l)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Equal(t, offsetRange(0, damaged+2), want)

	var clones []*vfs.MemFS
	var steps []string
	fs := crashtest.AfterEach(e.fs, func(op, name string) {
		clones = append(clones, e.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		steps = append(steps, op+" "+name)
	})
	l, err = Open("p0", Options{FS: fs, SegmentBytes: 800, IndexIntervalBytes: 1})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NotEmpty(t, clones)
	for i, c := range clones {
		if err := checkMoveAsideClone(c, bases, original, want); err != nil {
			t.Fatalf("crash after step %d (%s): %v", i, steps[i], err)
		}
	}
}

func checkMoveAsideClone(c *vfs.MemFS, bases []int64, original map[int64][]byte, want []int64) error {
	names, err := c.List("p0")
	if err != nil {
		return err
	}
	for _, b := range bases {
		live := segment.LogFileName(b)
		found := false
		for _, n := range names {
			if n != live && !(strings.HasPrefix(n, live+".") && strings.HasSuffix(n, ".damaged")) {
				continue
			}
			f, err := c.Open(c.PathJoin("p0", n))
			if err != nil {
				return err
			}
			st, err := f.Stat()
			if err != nil {
				return err
			}
			data := make([]byte, st.Size())
			_, _ = f.ReadAt(data, 0)
			_ = f.Close()
			if bytes.Equal(data, original[b]) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("the original bytes of segment %d are gone (files %v)", b, names)
		}
	}
	l, err := Open("p0", Options{FS: c, SegmentBytes: 800, IndexIntervalBytes: 1})
	if err != nil {
		return err
	}
	defer l.Close()
	got, err := readAllRecords(l)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("recovered %v, want %v", got, want)
	}
	return nil
}
