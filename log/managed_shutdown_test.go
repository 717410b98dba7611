package log

import (
	iofs "io/fs"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestManagedCleanShutdown: with Options.ManagedCleanShutdown the log
// writes no marker of its own, trusts its segments when the caller says
// CleanShutdown (and recovers them when it does not), removes its own
// marker left by an unmanaged Close, and a failed Close is never taken
// back by a second one.
func TestManagedCleanShutdown(t *testing.T) {
	fs := vfs.NewMem()
	managed := Options{ManagedCleanShutdown: true}
	l := openTestLog(t, fs, managed)
	appendRecords(t, l, 0, 5, 1_000_000)
	require.NoError(t, l.Close())
	_, err := fs.Stat(fs.PathJoin("p0", CleanShutdownFileName))
	require.ErrorIs(t, err, iofs.ErrNotExist, "no marker of its own")

	// The recovery point decides what Open does: trusted, it is the log
	// end; recovered, it stays where the checkpoint says (0).
	for _, clean := range []bool{true, false, true} {
		require.NoError(t, writeOffsetsCheckpoint(fs, "p0", offsetsCheckpoint{}))
		o := managed
		o.CleanShutdown = clean
		l = openTestLog(t, fs, o)
		want := int64(0)
		if clean {
			want = 5
		}
		require.Equal(t, want, l.Metrics().RecoveryPoint, "clean=%t", clean)
		require.Equal(t, int64(5), l.LogEndOffset())
		require.NoError(t, l.Close())
	}

	// A log closed by its own marker, opened managed: trusted, marker
	// removed.
	l = openTestLog(t, fs, Options{})
	require.NoError(t, l.Close())
	require.NoError(t, writeOffsetsCheckpoint(fs, "p0", offsetsCheckpoint{}))
	l = openTestLog(t, fs, managed)
	require.Equal(t, int64(5), l.Metrics().RecoveryPoint)
	_, err = fs.Stat(fs.PathJoin("p0", CleanShutdownFileName))
	require.ErrorIs(t, err, iofs.ErrNotExist)
	require.NoError(t, l.Close())

	// A failed Close stays failed.
	inj := &toggleInjector{}
	l = openTestLog(t, errorfs.Wrap(fs, inj), managed)
	appendRecords(t, l, 0, 1, 1_000_000)
	inj.on = true
	first := l.Close()
	require.ErrorIs(t, first, ErrIO)
	inj.on = false
	require.Equal(t, first, l.Close())
}

type toggleInjector struct{ on bool }

func (i *toggleInjector) String() string { return "toggle" }
func (i *toggleInjector) MaybeError(op errorfs.Op) error {
	if i.on && op.Kind == errorfs.OpFileSync {
		return errorfs.ErrInjected
	}
	return nil
}
