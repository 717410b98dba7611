package controlplanetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// ConcurrentOptions configures ConcurrentCommits.
type ConcurrentOptions struct {
	// Writers is the number of goroutines committing at once. Default 16.
	Writers int
	// Commits is the number of objects each writer commits. Default 12.
	Commits int
}

// ConcurrentCommits has many goroutines commit objects over the same
// four partitions at once, as the writers of a cluster do, so that a
// plane that gathers concurrent commits into groups writes real groups.
// Among the commits are concurrent and later retries of committed
// requests, requests that reuse a committed key with other content (which
// must fail alone), batches of an unknown partition (rejected alone) and
// idempotent batches. It requires:
//
//   - per partition, the accepted batches' offsets are contiguous from 0
//     to the high watermark, each assigned once;
//   - every accepted answer is the batch FindBatches returns at its
//     offset (object key, byte range, last offset);
//   - a retry of a committed request, concurrent or later, answers as the
//     first commit did and adds nothing;
//   - each writer's idempotent batches are all accepted (no sequence
//     decision saw another commit's half-applied state).
//
// The plane must be empty; topic id {0xC0} is created here.
func ConcurrentCommits(t *testing.T, cp wal.ControlPlane, opts ConcurrentOptions) {
	if opts.Writers <= 0 {
		opts.Writers = 16
	}
	if opts.Commits <= 0 {
		opts.Commits = 12
	}
	ctx := context.Background()
	topic := wal.TopicID{0xC0}
	const parts = 4
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "concurrent", NumPartitions: parts}}))
	unknown := wal.TopicIDPartition{TopicID: wal.TopicID{0xC1}, Partition: 0}

	type answer struct {
		req wal.CommitFileRequest
		res wal.CommitFileResult
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	errs := make(chan error, opts.Writers)
	for w := 0; w < opts.Writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := concurrentWriter(ctx, cp, w, opts.Commits, topic, unknown, func(req wal.CommitFileRequest, res wal.CommitFileResult) {
				mu.Lock()
				answers = append(answers, answer{req, res})
				mu.Unlock()
			}); err != nil {
				errs <- fmt.Errorf("writer %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	type accepted struct {
		key        string
		base, last int64
		byteOffset int64
		size       int64
	}
	byPart := map[wal.TopicIDPartition][]accepted{}
	for _, a := range answers {
		for i, r := range a.res.Batches {
			b := a.req.Batches[i]
			if b.Partition == unknown {
				require.ErrorIs(t, r.Err, wal.ErrUnknownTopicOrPartition, "%s batch %d", a.req.ObjectKey, i)
				continue
			}
			require.NoError(t, r.Err, "%s batch %d", a.req.ObjectKey, i)
			byPart[b.Partition] = append(byPart[b.Partition], accepted{a.req.ObjectKey, r.BaseOffset, r.BaseOffset + b.OffsetCount() - 1, b.ByteOffset, b.Size})
		}
	}
	for p := int32(0); p < parts; p++ {
		tp := wal.TopicIDPartition{TopicID: topic, Partition: p}
		got := byPart[tp]
		sort.Slice(got, func(i, j int) bool { return got[i].base < got[j].base })
		next := int64(0)
		for _, g := range got {
			require.Equal(t, next, g.base, "%s: offsets not contiguous at %s", tp, g.key)
			next = g.last + 1
		}
		info, err := cp.LogInfo(ctx, tp)
		require.NoError(t, err)
		require.Equal(t, next, info.HighWatermark, "%s: high watermark", tp)
		found, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 40,
			Partitions: []wal.FindPartition{{Partition: tp, Offset: 0, MaxPartitionBytes: 1 << 40}}})
		require.NoError(t, err)
		require.NoError(t, found[0].Err)
		require.Len(t, found[0].Batches, len(got), "%s: batches found", tp)
		for i, f := range found[0].Batches {
			g := got[i]
			require.Equal(t, [4]any{g.key, g.byteOffset, g.size, g.base}, [4]any{f.ObjectKey, f.ByteOffset, f.Size, f.BaseOffset}, "%s: batch %d", tp, i)
			require.Equal(t, g.last, f.LastOffset, "%s: batch %d", tp, i)
		}
	}
}

// concurrentWriter commits one writer's objects; see ConcurrentCommits.
func concurrentWriter(ctx context.Context, cp wal.ControlPlane, w, commits int, topic wal.TopicID, unknown wal.TopicIDPartition,
	record func(wal.CommitFileRequest, wal.CommitFileResult)) error {
	pid := int64(1000 + w)
	seq := map[int32]int32{}
	var committed []wal.CommitFileRequest
	for c := 0; c < commits; c++ {
		req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("concurrent/%02d/%03d", w, c), BrokerID: int32(w)}
		for j := 0; j < 1+(w+c)%4; j++ {
			p := int32((w + c + j) % 4)
			n := int64(1 + (w*7+c*3+j)%5)
			b := wal.CommitBatch{Partition: wal.TopicIDPartition{TopicID: topic, Partition: p}, ByteOffset: req.ObjectSize, Size: 10 * n,
				LastOffset: n - 1, RecordCount: int32(n), MaxTimestamp: int64(c), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
				CRC: uint32(w<<16 | c<<4 | j)}
			switch {
			case c%4 == 3 && j == 0:
				b.Partition = unknown
			case (w+j)%2 == 0:
				b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seq[p]
				seq[p] += int32(n)
			}
			req.ObjectSize += b.Size
			req.Batches = append(req.Batches, b)
		}
		// The commit, and for every third object a retry racing it.
		var res, raced wal.CommitFileResult
		var err, racedErr error
		var wg sync.WaitGroup
		if c%3 == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); raced, racedErr = cp.CommitFile(ctx, req) }()
		}
		// A request reusing an earlier key with other content races it too
		// and must fail alone.
		var reuseErr error
		if c%5 == 4 {
			wg.Add(1)
			reuse := committed[len(committed)-1]
			reuse.Batches = append([]wal.CommitBatch(nil), reuse.Batches...)
			reuse.Batches[0].CRC ^= 1
			go func() { defer wg.Done(); _, reuseErr = cp.CommitFile(ctx, reuse) }()
		}
		res, err = cp.CommitFile(ctx, req)
		wg.Wait()
		if err != nil {
			return fmt.Errorf("commit %s: %w", req.ObjectKey, err)
		}
		if c%3 == 0 {
			if racedErr != nil {
				return fmt.Errorf("racing retry of %s: %w", req.ObjectKey, racedErr)
			}
			if !equalResults(res, raced) {
				return fmt.Errorf("racing retry of %s answered %+v, the commit %+v", req.ObjectKey, raced, res)
			}
		}
		if c%5 == 4 && !errors.Is(reuseErr, wal.ErrObjectKeyReused) {
			return fmt.Errorf("reuse of %s: %v, want ErrObjectKeyReused", committed[len(committed)-1].ObjectKey, reuseErr)
		}
		// A later retry of an earlier object answers as its commit did.
		if c%4 == 1 {
			again, err := cp.CommitFile(ctx, req)
			if err != nil {
				return fmt.Errorf("retry of %s: %w", req.ObjectKey, err)
			}
			if !equalResults(res, again) {
				return fmt.Errorf("retry of %s answered %+v, the commit %+v", req.ObjectKey, again, res)
			}
		}
		committed = append(committed, req)
		record(req, res)
	}
	return nil
}

// equalResults compares two answers, errors by their text.
func equalResults(a, b wal.CommitFileResult) bool {
	if a.MarkedForDeletion != b.MarkedForDeletion || len(a.Batches) != len(b.Batches) {
		return false
	}
	for i := range a.Batches {
		x, y := a.Batches[i], b.Batches[i]
		if x.BaseOffset != y.BaseOffset || x.LogAppendTime != y.LogAppendTime || x.LogStartOffset != y.LogStartOffset ||
			(x.Err == nil) != (y.Err == nil) || (x.Err != nil && x.Err.Error() != y.Err.Error()) {
			return false
		}
	}
	return true
}
