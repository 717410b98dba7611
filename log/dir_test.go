package log

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/record"
)

// A log opened in a directory that did not exist survives a crash after
// a flushed append: Open fsyncs the new directories into their parents.
func TestOpenCreatesDirectoryDurably(t *testing.T) {
	for _, dir := range []string{"p0", "data/topic-0"} {
		t.Run(dir, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			l, err := Open(dir, Options{FS: mem, FlushMessages: 1})
			require.NoError(t, err)
			b := record.NewBuilder(record.DefaultBuilderOptions())
			b.Add(1, []byte("k"), []byte("v"))
			raw, err := b.Build()
			require.NoError(t, err)
			_, err = l.AppendAsLeader(raw, 0, OriginClient)
			require.NoError(t, err)
			crashed := mem.CrashClone(vfs.CrashCloneCfg{})
			require.NoError(t, l.Close())

			l2, err := Open(dir, Options{FS: crashed})
			require.NoError(t, err)
			defer l2.Close()
			require.Equal(t, int64(1), l2.LogEndOffset(), "the flushed record must survive the crash")
		})
	}
}
