package consolidate

import (
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// poisoningWAL is the endpoint's WAL reader with a check of every
// Release: each released answer was served by a Fetch and not released
// before, and its bytes are overwritten with poison before the buffer
// goes back to the reader (which reads later fetches into it). A
// consumer of an answer after its release then sees bytes no batch
// checks.
type poisoningWAL struct {
	r  *wal.Reader
	mu sync.Mutex
	// live: the first byte of every answer served and not yet released.
	live     map[*byte]bool
	seen     map[*byte]bool
	served   int
	released int
	bad      []string
	// fetches counts Fetch calls; past maxFetches the run is stopped
	// (no progress: answers that do not check are backed off forever).
	fetches, maxFetches int
	stop                func(string)
}

func (w *poisoningWAL) Fetch(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FetchResult, error) {
	res, err := w.r.Fetch(ctx, req)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fetches++; w.fetches == w.maxFetches {
		w.stop(fmt.Sprintf("no progress after %d fetches", w.fetches))
	}
	for _, fr := range res {
		if len(fr.Records) > 0 {
			if w.live[&fr.Records[0]] {
				w.bad = append(w.bad, "a fetch answered into a buffer still in use")
			}
			w.live[&fr.Records[0]] = true
			w.seen[&fr.Records[0]] = true
			w.served++
		}
	}
	return res, err
}

func (w *poisoningWAL) Release(res ...wal.FetchResult) {
	w.mu.Lock()
	for _, fr := range res {
		if len(fr.Records) == 0 {
			continue
		}
		if !w.live[&fr.Records[0]] {
			w.bad = append(w.bad, "an answer released twice, or never served")
		}
		delete(w.live, &fr.Records[0])
		w.released++
		full := fr.Records[:cap(fr.Records)]
		for i := range full {
			full[i] = 0xA5
		}
	}
	w.mu.Unlock()
	w.r.Release(res...)
}

// checkingLog checks every batch it is asked to append (it checks, and
// is unchanged by the time the append returns: no concurrent fetch wrote
// into it), and stops the run at the first that is not.
type checkingLog struct {
	*log.UnifiedLog
	stop func(string)
}

func (l *checkingLog) AppendAsFollower(batches []byte, epoch int32) (log.AppendInfo, error) {
	s := record.NewScanner(batches, record.ScannerOptions{})
	for s.Next() {
	}
	if s.Err() != nil {
		l.stop(fmt.Sprintf("asked to append bytes that do not check: %v", s.Err()))
	}
	sum := crc32.ChecksumIEEE(batches)
	info, err := l.UnifiedLog.AppendAsFollower(batches, epoch)
	if crc32.ChecksumIEEE(batches) != sum {
		l.stop("the batches changed during the append")
	}
	return info, err
}

// The Fetcher gives each answer back to the WAL reader
// (Endpoint.Release, wal.Reader.Release) only once its batches are
// appended, or its prefetched round is dropped: with every released
// answer poisoned at once, no append sees a poisoned or overwritten
// batch, every answer is released exactly once, the reader reads later
// rounds into the released buffers, and the log holds every record
// once, in order. Run's pipelined rounds (the next round fetched while
// the last is appended) and a dropped prefetch (a refused append) are
// both exercised.
func TestFetcherReleasesAnswersOnlyAfterAppend(t *testing.T) {
	const batches, records = 40, 3
	e := newWALEnv(t)
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
	var want []string
	for i := range batches {
		// 3 records of 2 KiB: answers large enough to be pooled.
		p := fmt.Sprintf("b%d-%s", i, strings.Repeat("v", 2<<10))
		want = append(want, expect(e.produce(records, p), records, p)...)
	}
	born := tierstate.State{}.WithConsolidating(true)
	ul := e.openLog("p")
	e.parts.set(e.tp, born, ul)
	ctx, cancel := context.WithCancel(context.Background())
	var stopped []string
	var mu sync.Mutex
	stop := func(why string) {
		mu.Lock()
		stopped = append(stopped, why)
		mu.Unlock()
		cancel()
	}
	pw := &poisoningWAL{r: e.reader, live: map[*byte]bool{}, seen: map[*byte]bool{}, maxFetches: 20 * batches, stop: stop}
	l := &watchingLog{checkingLog: checkingLog{UnifiedLog: ul, stop: stop}, refuseAt: 7, end: batches * records, done: cancel}
	// A partition budget of 1 byte: every fetch serves one batch.
	ep, err := NewEndpoint(EndpointOptions{ControlPlane: e.cp, WAL: pw, Remote: e.meta, Partitions: e.parts, CrossTier: e.xs,
		SegmentBytes: 4096, MaxMessageBytes: 1 << 20})
	require.NoError(t, err)
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), IdleInterval: 1, Backoff: 1})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: born}))
	require.ErrorIs(t, f.Run(ctx), context.Canceled)
	require.Empty(t, stopped)
	require.Equal(t, want, readAll(t, ul, 0, 0))
	m := f.Metrics()
	require.Equal(t, int64(batches), m.Appends)
	require.Positive(t, m.DroppedPrefetches, "the refused append dropped a prefetched answer")
	pw.mu.Lock()
	defer pw.mu.Unlock()
	require.Empty(t, pw.bad)
	require.Empty(t, pw.live, "every answer served was released")
	require.GreaterOrEqual(t, pw.released, batches+1, "the appended answers and the dropped one")
	require.Less(t, len(pw.seen), pw.served/4, "later rounds were read into released buffers")
}

// watchingLog refuses its refuseAt-th append once (a dropped prefetch
// follows) and calls done when the log reaches end.
type watchingLog struct {
	checkingLog
	calls, refuseAt int
	end             int64
	done            func()
}

func (l *watchingLog) AppendAsFollower(batches []byte, epoch int32) (log.AppendInfo, error) {
	if l.calls++; l.calls == l.refuseAt {
		return log.AppendInfo{}, fmt.Errorf("refused for the test: %w", log.ErrInvalidRecord)
	}
	info, err := l.checkingLog.AppendAsFollower(batches, epoch)
	if l.LogEndOffset() >= l.end {
		l.done()
	}
	return info, err
}
