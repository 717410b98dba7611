package tierstate

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
)

// logCommand runs on l the log commands that the rebuild and at-seal
// scenario files share:
//
//	append epoch=E [count=C] [producer=P]  one leader batch (producer P: idempotent, sequence 0)
//	append-follower epoch=E [count=C]     one follower batch at the log end
//	assign-epoch epoch=E offset=O
//	roll | delete-old-segments
//	set-hw offset=O | inc-log-start offset=O
//	set-remote offset=O                   "not installed" when the log refuses it
//	truncate-to offset=O | truncate-fully offset=O [log-start=L]
//	restore next=N [log-start=L] [epochs=(E@O,...)]   TruncateFullyAndRestore
//
// handled is false for any other command. An append answers with its
// offsets, a failure with "error: ..."; otherwise out is "" and the
// caller prints the log's state.
func logCommand(t *testing.T, d *datadriven.TestData, l *log.UnifiedLog) (out string, handled bool) {
	var offset int64
	fail := func(err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return ""
	}
	switch d.Cmd {
	case "append", "append-follower":
		var epoch int32
		count := 1
		d.ScanArgs(t, "epoch", &epoch)
		d.MaybeScanArgs(t, "count", &count)
		var info log.AppendInfo
		var err error
		if d.Cmd == "append" {
			producer := base.NoProducerID
			d.MaybeScanArgs(t, "producer", &producer)
			info, err = l.AppendAsLeader(producerBatch(t, count, producer, 0), epoch, log.OriginClient)
		} else {
			info, err = l.AppendAsFollower(testBatch(t, count, l.LogEndOffset(), epoch), epoch)
		}
		if err != nil {
			return fail(err), true
		}
		return fmt.Sprintf("[%d, %d) epoch=%d", info.FirstOffset, info.LastOffset+1, epoch), true
	case "assign-epoch":
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "offset", &offset)
		return fail(l.AssignEpochStartOffset(epoch, offset)), true
	case "roll":
		return fail(l.Roll()), true
	case "delete-old-segments":
		_, err := l.DeleteOldSegments()
		return fail(err), true
	case "set-hw":
		d.ScanArgs(t, "offset", &offset)
		l.UpdateHighWatermark(offset)
		return "", true
	case "inc-log-start":
		d.ScanArgs(t, "offset", &offset)
		_, err := l.MaybeIncrementLogStartOffset(offset)
		return fail(err), true
	case "set-remote":
		d.ScanArgs(t, "offset", &offset)
		if !l.UpdateHighestOffsetInRemoteStorage(offset, l.TruncationCount()) {
			return "not installed", true
		}
		return "", true
	case "truncate-to":
		d.ScanArgs(t, "offset", &offset)
		_, err := l.TruncateTo(offset)
		return fail(err), true
	case "truncate-fully":
		logStart := base.UndefinedOffset
		d.ScanArgs(t, "offset", &offset)
		d.MaybeScanArgs(t, "log-start", &logStart)
		return fail(l.TruncateFullyAndStartAt(offset, logStart)), true
	case "restore":
		r := log.RemoteRestore{LogStartOffset: base.UndefinedOffset}
		var epochs []string
		d.ScanArgs(t, "next", &r.NextOffset)
		d.MaybeScanArgs(t, "log-start", &r.LogStartOffset)
		d.MaybeScanArgs(t, "epochs", &epochs)
		for _, s := range epochs {
			var en epochcache.Entry
			_, err := fmt.Sscanf(s, "%d@%d", &en.Epoch, &en.StartOffset)
			require.NoError(t, err, "epoch entry %q", s)
			r.Epochs = append(r.Epochs, en)
		}
		return fail(l.TruncateFullyAndRestore(r)), true
	}
	return "", false
}

// fetcherRequired makes scanFetchRequest require the fetcher= argument.
const fetcherRequired Fetcher = -1

// scanFetchRequest reads a fetch request from d: fetcher=consumer|follower|future
// (def when absent, required when def is fetcherRequired), offset=O,
// [last-fetched-epoch=E], [current-epoch=E].
func scanFetchRequest(t *testing.T, d *datadriven.TestData, def Fetcher) FetchRequest {
	req := FetchRequest{Fetcher: def, LastFetchedEpoch: base.UndefinedEpoch, CurrentLeaderEpoch: base.UndefinedEpoch}
	if d.HasArg("fetcher") || def == fetcherRequired {
		var name string
		d.ScanArgs(t, "fetcher", &name)
		req.Fetcher = fetcherRequired
		for _, f := range []Fetcher{FetcherConsumer, FetcherFollower, FetcherFuture} {
			if f.String() == name {
				req.Fetcher = f
			}
		}
		if req.Fetcher == fetcherRequired {
			d.Fatalf(t, "unknown fetcher %s", name)
		}
	}
	d.ScanArgs(t, "offset", &req.FetchOffset)
	d.MaybeScanArgs(t, "last-fetched-epoch", &req.LastFetchedEpoch)
	d.MaybeScanArgs(t, "current-epoch", &req.CurrentLeaderEpoch)
	return req
}
