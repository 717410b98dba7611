package log

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

// appendAt appends one leader batch with one record per timestamp.
func appendAt(t *testing.T, l *UnifiedLog, epoch int32, timestamps ...int64) {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for _, ts := range timestamps {
		b.Add(ts, nil, make([]byte, 10))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(buf, epoch, OriginClient)
	require.NoError(t, err)
}

// TestFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp: records
// at T, T+1 and T in 200-byte segments; MAX_TIMESTAMP answers T+1 at
// offset 1 in epoch 0, and an empty log has no answer for a timestamp.
// (UnifiedLogTest testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp.)
func TestFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{SegmentBytes: 200, IndexIntervalBytes: 1})
	defer l.Close()
	_, found, err := l.FetchOffsetByTimestamp(0)
	require.NoError(t, err)
	require.False(t, found)

	first := int64(1_000_000)
	appendAt(t, l, 0, first)
	appendAt(t, l, 0, first+1)
	appendAt(t, l, 0, first)
	require.Greater(t, l.Metrics().Segments, 1, "the 200-byte segments rolled")

	got, found, err := l.FetchOffsetByTimestamp(ListMaxTimestamp)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, TimestampAndOffset{Timestamp: first + 1, Offset: 1, Epoch: 0}, got)
}

// TestFetchOffsetByTimestampForMaxTimestampAfterTruncate: 20 records at
// timestamps 0..19; MAX_TIMESTAMP answers offset 19, timestamp 19, and
// nothing once the log is truncated to 0. (LogOffsetTest
// testFetchOffsetByTimestampForMaxTimestampAfterTruncate.)
func TestFetchOffsetByTimestampForMaxTimestampAfterTruncate(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	for ts := range int64(20) {
		appendAt(t, l, 0, ts)
	}
	require.NoError(t, l.Flush())
	l.UpdateHighWatermark(l.LogEndOffset())

	got, found, err := l.FetchOffsetByTimestamp(ListMaxTimestamp)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(19), got.Offset)
	require.Equal(t, int64(19), got.Timestamp)

	_, err = l.TruncateTo(0)
	require.NoError(t, err)
	got, found, err = l.FetchOffsetByTimestamp(ListMaxTimestamp)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, noTimestampAndOffset, got)
}

// TestFetchOffsetByTimestampForMaxTimestampWithUnorderedTimestamps:
// timestamps 0, 1, 2, 3, 4, 6, 5; MAX_TIMESTAMP answers offset 5,
// timestamp 6. (LogOffsetTest
// testFetchOffsetByTimestampForMaxTimestampWithUnorderedTimestamps.)
func TestFetchOffsetByTimestampForMaxTimestampWithUnorderedTimestamps(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	for _, ts := range []int64{0, 1, 2, 3, 4, 6, 5} {
		appendAt(t, l, 0, ts)
	}
	require.NoError(t, l.Flush())
	l.UpdateHighWatermark(l.LogEndOffset())

	got, found, err := l.FetchOffsetByTimestamp(ListMaxTimestamp)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(7), l.LogEndOffset())
	require.Equal(t, int64(5), got.Offset)
	require.Equal(t, int64(6), got.Timestamp)
}

// TestFetchOffsetByTimestampForMaxTimestampWithEmptyLog: an empty log
// has no MAX_TIMESTAMP answer. (LogOffsetTest
// testFetchOffsetByTimestampForMaxTimestampWithEmptyLog.)
func TestFetchOffsetByTimestampForMaxTimestampWithEmptyLog(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	l.UpdateHighWatermark(l.LogEndOffset())
	require.Equal(t, int64(0), l.LogEndOffset())
	got, found, err := l.FetchOffsetByTimestamp(ListMaxTimestamp)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, noTimestampAndOffset, got)
	o, found, err := l.ListOffsets(ListMaxTimestamp)
	require.NoError(t, err)
	require.False(t, found)
	require.Equal(t, undefinedOffsetAndEpoch, o)
}

// TestMaxTimestampIsTheFirstRecordCarryingIt: the largest timestamp is
// carried by records inside batches, in two segments and in two epochs;
// the answer is the first record carrying it (Kafka's
// RecordBatch.offsetOfMaxTimestamp within the first batch whose
// MaxTimestamp it is), and once the log start passes that record, the
// next one at or above the log start.
func TestMaxTimestampIsTheFirstRecordCarryingIt(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	appendAt(t, l, 0, 5, 8, 7)    // 0-2
	appendAt(t, l, 0, 7, 9, 3, 9) // 3-6: the first 9 at offset 4
	require.NoError(t, l.Roll())  //
	appendAt(t, l, 1, 9, 1)       // 7-8: 9 again, in the next segment
	require.NoError(t, l.AssignEpochStartOffset(2, l.LogEndOffset()))
	appendAt(t, l, 2, 2) // 9
	max := func() TimestampAndOffset {
		t.Helper()
		got, found, err := l.FetchOffsetByTimestamp(ListMaxTimestamp)
		require.NoError(t, err)
		require.True(t, found)
		return got
	}
	require.Equal(t, TimestampAndOffset{Timestamp: 9, Offset: 4, Epoch: 0}, max())

	l.UpdateHighWatermark(l.LogEndOffset())
	_, err := l.MaybeIncrementLogStartOffset(6)
	require.NoError(t, err)
	require.Equal(t, TimestampAndOffset{Timestamp: 9, Offset: 6, Epoch: 0}, max())
	_, err = l.MaybeIncrementLogStartOffset(7)
	require.NoError(t, err)
	require.Equal(t, TimestampAndOffset{Timestamp: 9, Offset: 7, Epoch: 1}, max())

	// A timestamp lookup reports the record's timestamp too.
	got, found, err := l.FetchOffsetByTimestamp(2)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, TimestampAndOffset{Timestamp: 9, Offset: 7, Epoch: 1}, got)
}

// TestListOffsetsAnswersEverySpecialTimestamp walks every exported List*
// int64 constant of the package's source (the special ListOffsets
// timestamps) and asks an empty and a non-empty log, with and without
// remote storage: none may be refused as an invalid argument, nor fail.
func TestListOffsetsAnswersEverySpecialTimestamp(t *testing.T) {
	consts := specialListTimestamps(t)
	require.GreaterOrEqual(t, len(consts), 6, "found %v", consts)
	require.Equal(t, ListMaxTimestamp, consts["ListMaxTimestamp"])
	for _, remote := range []bool{false, true} {
		for _, records := range []int{0, 3} {
			l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: remote})
			appendRecords(t, l, 0, records, 1_000_000)
			for name, ts := range consts {
				_, _, err := l.ListOffsets(ts)
				require.NoError(t, err, "%s (%d), remote=%t, %d records", name, ts, remote, records)
				_, _, err = l.FetchOffsetByTimestamp(ts)
				require.NoError(t, err, "%s (%d), remote=%t, %d records", name, ts, remote, records)
			}
			require.NoError(t, l.Close())
		}
	}
	// Below the special range: refused.
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	_, _, err := l.ListOffsets(-100)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// specialListTimestamps parses the package's non-test files and returns
// the value of every exported constant named List* declared as int64.
func specialListTimestamps(t *testing.T) map[string]int64 {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	out := map[string]int64{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "int64" {
					continue
				}
				for i, n := range vs.Names {
					if !n.IsExported() || !strings.HasPrefix(n.Name, "List") {
						continue
					}
					require.Less(t, i, len(vs.Values), "%s: an implicit value", n.Name)
					tv, err := types.Eval(fset, nil, token.NoPos, types.ExprString(vs.Values[i]))
					require.NoError(t, err, "%s: evaluate %s", n.Name, types.ExprString(vs.Values[i]))
					v, exact := constant.Int64Val(tv.Value)
					require.True(t, exact, "%s", n.Name)
					out[n.Name] = v
				}
			}
		}
	}
	return out
}
