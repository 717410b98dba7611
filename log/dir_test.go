package log

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/countfs"
	"github.com/tierlog/tierlog/log/record"
)

// A log opened in a directory that did not exist survives a crash after
// a flushed append: the first fsync beneath the new directories (here the
// flush's) first fsyncs them into their parents. Before that flush
// nothing of the new log was durable, and Open and the append made no
// fsync at all: a crash then may leave no log, which opens as an empty
// one. (Open used to fsync the new directories itself; the guarantee that
// matters, flushed data survives, is the same.)
func TestOpenCreatesDirectoryDurably(t *testing.T) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1, []byte("k"), []byte("v"))
	raw, err := b.Build()
	require.NoError(t, err)
	for _, dir := range []string{"p0", "data/topic-0"} {
		for _, policy := range []string{"FlushMessages=1", "explicit Flush"} {
			t.Run(dir+"/"+policy, func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				cfs := countfs.Wrap(mem)
				o := Options{FS: cfs}
				if policy == "FlushMessages=1" {
					o.FlushMessages = 1
				}
				l, err := Open(dir, o)
				require.NoError(t, err)
				_, err = l.AppendAsLeader(append([]byte(nil), raw...), 0, OriginClient)
				require.NoError(t, err)
				if o.FlushMessages == 0 {
					require.Zero(t, cfs.Syncs.Load(), "fsyncs before the first flush")
					l2, err := Open(dir, Options{FS: mem.CrashClone(vfs.CrashCloneCfg{})})
					require.NoError(t, err, "a crash before the first flush opens")
					require.NoError(t, l2.Close())
					require.NoError(t, l.Flush())
				}
				crashed := mem.CrashClone(vfs.CrashCloneCfg{})
				require.NoError(t, l.Close())

				l2, err := Open(dir, Options{FS: crashed})
				require.NoError(t, err)
				defer l2.Close()
				require.Equal(t, int64(1), l2.LogEndOffset(), "the flushed record must survive the crash")
			})
		}
	}
}
