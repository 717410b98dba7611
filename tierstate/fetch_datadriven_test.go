package tierstate

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// The leader's log is a real *log.UnifiedLog.
var _ FetchLog = (*log.UnifiedLog)(nil)

// TestFetchDataDriven runs testdata/fetch_*: a leader's log built on
// vfs.NewMem, then fetches validated against it.
//
// Commands:
//
//	open [remote] [local-retention-bytes=N]
//	append epoch=E [count=N]            one leader batch of N records
//	assign-epoch epoch=E offset=O       an epoch start without records (makeLeader)
//	roll
//	set-hw offset=O
//	inc-log-start offset=O              MaybeIncrementLogStartOffset
//	truncate-fully offset=O [log-start=L]
//	set-remote offset=O                 highest offset in remote storage
//	delete-old-segments
//	state
//	fetch fetcher=follower|future|consumer offset=O [last-fetched-epoch=E]
//	      [current-epoch=C] [leader-epoch=L]
//
// leader-epoch defaults to the log's latest epoch.
func TestFetchDataDriven(t *testing.T) {
	forEachFile(t, "testdata/fetch_*", func(t *testing.T, path string) {
		e := &fetchEnv{fs: vfs.NewMem()}
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type fetchEnv struct {
	fs  vfs.FS
	log *log.UnifiedLog
}

const fetchTestDir = "p0"

func (e *fetchEnv) close() {
	if e.log != nil {
		_ = e.log.Close()
	}
}

func (e *fetchEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "open" && e.log == nil {
		d.Fatalf(t, "run open first")
	}
	switch d.Cmd {
	case "open":
		e.close()
		require.NoError(t, e.fs.RemoveAll(fetchTestDir))
		opts := log.Options{FS: e.fs, SegmentIndexBytes: 4096, Now: func() time.Time { return time.UnixMilli(1_000_000) }}
		opts.RemoteStorageEnabled = d.HasArg("remote")
		d.MaybeScanArgs(t, "local-retention-bytes", &opts.LocalRetentionBytes)
		l, err := log.Open(fetchTestDir, opts)
		require.NoError(t, err)
		e.log = l
		return e.state()
	case "append":
		var epoch int32
		count := 1
		d.ScanArgs(t, "epoch", &epoch)
		d.MaybeScanArgs(t, "count", &count)
		info, err := e.log.AppendAsLeader(testBatch(t, count, 0, base.UndefinedEpoch), epoch, log.OriginClient)
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("[%d, %d) epoch=%d", info.FirstOffset, info.LastOffset+1, epoch)
	case "assign-epoch":
		var epoch int32
		var offset int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "offset", &offset)
		return result(e.log.AssignEpochStartOffset(epoch, offset), e.state())
	case "roll":
		return result(e.log.Roll(), e.state())
	case "set-hw":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		e.log.UpdateHighWatermark(offset)
		return e.state()
	case "inc-log-start":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		_, err := e.log.MaybeIncrementLogStartOffset(offset)
		return result(err, e.state())
	case "truncate-fully":
		var offset int64
		logStart := base.UndefinedOffset
		d.ScanArgs(t, "offset", &offset)
		d.MaybeScanArgs(t, "log-start", &logStart)
		return result(e.log.TruncateFullyAndStartAt(offset, logStart), e.state())
	case "set-remote":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		installed := e.log.UpdateHighestOffsetInRemoteStorage(offset, e.log.TruncationCount())
		return fmt.Sprintf("installed=%t highest-offset-in-remote-storage=%d", installed, e.log.HighestOffsetInRemoteStorage())
	case "delete-old-segments":
		n, err := e.log.DeleteOldSegments()
		return result(err, fmt.Sprintf("deleted %d\n%s", n, e.state()))
	case "state":
		return e.state()
	case "fetch":
		return e.fetch(t, d).String()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (e *fetchEnv) fetch(t *testing.T, d *datadriven.TestData) FetchValidation {
	req := scanFetchRequest(t, d, fetcherRequired)
	leaderEpoch, ok := e.log.LatestEpoch()
	if !ok {
		leaderEpoch = 0
	}
	d.MaybeScanArgs(t, "leader-epoch", &leaderEpoch)
	v := ValidateFetch(e.log, leaderEpoch, req)
	checkFetchAgainstRead(t, e.log, req, v)
	return v
}

// checkFetchAgainstRead cross-checks an outcome with what the log's own
// Read says about the same offset.
func checkFetchAgainstRead(t *testing.T, l *log.UnifiedLog, req FetchRequest, v FetchValidation) {
	t.Helper()
	_, err := l.Read(nil, req.FetchOffset, 1<<20, log.IsolationLogEnd, true)
	switch v.Outcome {
	case FetchRead:
		require.NoError(t, err, "validated as a read")
	case FetchOffsetMovedToTieredStorage, FetchRemoteRead:
		require.ErrorIs(t, err, log.ErrOffsetMovedToTieredStorage)
	}
}

func (e *fetchEnv) state() string {
	l := e.log
	return fmt.Sprintf("log-start=%d local-log-start=%d hw=%d leo=%d epochs=%s",
		l.LogStartOffset(), l.LocalLogStartOffset(), l.HighWatermark(), l.LogEndOffset(),
		epochcache.FormatEntries(l.EpochEntries()))
}

func result(err error, ok string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}

// testBatch builds one batch of count records with record.Builder.
func testBatch(t *testing.T, count int, baseOffset int64, epoch int32) []byte {
	opts := record.DefaultBuilderOptions()
	opts.BaseOffset = baseOffset
	opts.PartitionLeaderEpoch = epoch
	b := record.NewBuilder(opts)
	for range count {
		b.Add(1_000_000, nil, []byte("value"))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}
