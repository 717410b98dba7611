package crashtest

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestRecorder(t *testing.T) {
	var seen []string
	r := New(2, func(point int, what string) error {
		seen = append(seen, what)
		if point == 4 {
			return errors.New("bad image")
		}
		return nil
	})
	fs := r.Wrap(vfs.NewMem())
	f, err := fs.Create("a", vfs.WriteCategoryUnspecified) // disarmed: no point
	require.NoError(t, err)
	r.Arm(true)
	_, err = f.Write([]byte("x")) // point 1
	require.NoError(t, err)
	require.NoError(t, f.Sync())  // point 2: checked
	r.Point("put object")         // point 3
	_, err = f.Write([]byte("y")) // point 4: checked, fails
	require.NoError(t, err)
	r.Point("later") // ignored after the failure
	r.Arm(false)
	require.NoError(t, f.Close())
	require.Equal(t, []string{"sync a", "write a"}, seen)
	require.EqualError(t, r.Err(), "crash point 4 (before write a): bad image")
	require.Equal(t, 2, r.Checked())
}
