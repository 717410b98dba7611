package pebblecp

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tierlog/tierlog/internal/groupcommit"
	"github.com/tierlog/tierlog/wal"
)

// CommitFile implements wal.ControlPlane. Calls that arrive while a
// group is being written wait in the commit queue and are written
// together, in arrival order, as a next group (see the package doc).
func (cp *ControlPlane) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := req.Validate(); err != nil {
		return wal.CommitFileResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return wal.CommitFileResult{}, err
	}
	c := &commitCall{ctx: ctx, req: &req, digest: req.Digest()}
	cp.commits.Do([]*commitCall{c}, maxCommitGroup, cp.commitGroup)
	return c.res, c.err
}

// CommitFiles implements wal.ControlPlane: the valid requests go into
// the commit queue as one entry, so that they are steps of one group, one
// after the other in list order (an invalid one gets its error at once).
func (cp *ControlPlane) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cp.closed() {
		return nil, wal.ErrClosed
	}
	out := make([]wal.CommitFilesResult, len(reqs))
	calls := make([]*commitCall, 0, len(reqs))
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, &commitCall{ctx: ctx, req: &reqs[i], digest: reqs[i].Digest(), index: i})
	}
	if len(calls) > 0 {
		cp.commits.Do(calls, maxCommitGroup, cp.commitGroup)
	}
	for _, c := range calls {
		out[c.index] = wal.CommitFilesResult{CommitFileResult: c.res, Err: c.err}
	}
	return out, nil
}

// maxCommitGroup caps the entries of the commit queue written in one
// group (a CommitFile is one entry, a CommitFiles one entry of all its
// requests), so that one group's Pebble batch and its wait stay bounded.
const maxCommitGroup = 128

// commitCall is one commit in the commit queue; res and err are its
// answer, set by the leader that writes it.
type commitCall struct {
	ctx    context.Context
	req    *wal.CommitFileRequest
	digest [32]byte
	index  int // in its CommitFiles list
	res    wal.CommitFileResult
	err    error
}

// commitGroup writes group in one update, each call as its own step in
// arrival order (the calls of one entry in their list order): a call
// that fails (a reused or reaped key, an offset overflow, a row it
// cannot read) is answered with its error and leaves nothing in the
// group, whose other calls go on. If the update itself fails, nothing of
// the group is written and every call gets its error. Every call is
// answered when commitGroup returns.
func (cp *ControlPlane) commitGroup(group [][]*commitCall) {
	live := groupcommit.Live(group, func(c *commitCall) bool {
		c.err = c.ctx.Err()
		return c.err != nil
	})
	if len(live) > 0 {
		err := cp.update(context.Background(), func(tx *txn) error {
			for _, c := range live {
				s := tx.step()
				res, err := commitStep(s, c.req, c.digest)
				if err == nil && cp.stepFault != nil {
					err = cp.stepFault(c.req.ObjectKey)
				}
				if err == nil {
					err = tx.merge(s)
					if err != nil {
						_ = s.b.Close()
						return err
					}
				}
				_ = s.b.Close()
				c.res, c.err = res, err
			}
			return nil
		})
		if err != nil {
			for _, c := range live {
				c.res, c.err = wal.CommitFileResult{}, err
			}
		}
	}
}

// commitStep decides one CommitFile in tx, a step of its group.
func commitStep(tx *txn, req *wal.CommitFileRequest, digest [32]byte) (wal.CommitFileResult, error) {
	f, err := tx.file(req.ObjectKey)
	if err != nil {
		return wal.CommitFileResult{}, err
	}
	if f.found {
		// A retry answers as the first commit did (also one earlier in
		// the same group); anything else under this key is a different
		// object.
		if f.row.Reason == reasonOrphan {
			return wal.CommitFileResult{}, errReaped(req.ObjectKey)
		}
		if !req.MatchesDigest(f.row.Digest) {
			return wal.CommitFileResult{}, fmt.Errorf("%w: %q is already registered with other content", wal.ErrObjectKeyReused, req.ObjectKey)
		}
		return resultsOf(req, &f.row), nil
	}
	// An orphan reaped and forgotten keeps its tombstone: without it
	// a writer slower than the reaper would register batches in an
	// object the cleaner deleted.
	if reaped, err := get(tx.reader(), tombstoneKey(req.ObjectKey), func([]byte) error { return nil }); err != nil || reaped {
		if err != nil {
			return wal.CommitFileResult{}, err
		}
		return wal.CommitFileResult{}, errReaped(req.ObjectKey)
	}
	f.found, f.dirty = true, true
	f.row = fileRow{State: fileUploaded, Reason: reasonProduce, BrokerID: req.BrokerID,
		BrokerEpoch: req.BrokerEpoch, Size: req.ObjectSize, CommittedAt: tx.nowMs, Digest: digest}
	// The accepted batches become rows at the end of the step,
	// contiguous ones of a partition coalesced into runs.
	var runs wal.RunBuilder[wal.TopicIDPartition]
	runs.Grow(len(req.Batches))
	f.row.Results = make([]storedResult, 0, len(req.Batches))
	for i := range req.Batches {
		r, err := commitBatch(tx, &req.Batches[i], req.ObjectKey, &runs)
		if err != nil {
			return wal.CommitFileResult{}, err
		}
		f.row.Results = append(f.row.Results, r)
	}
	var addErr error
	if err := runs.Rows(func(tp wal.TopicIDPartition, head wal.BatchInfo, run []byte, _ int) {
		if addErr == nil {
			addErr = tx.addBatch(tp, head.LastOffset, rowOf(head, run), f)
		}
	}); err != nil || addErr != nil {
		return wal.CommitFileResult{}, errors.Join(err, addErr)
	}
	if f.row.LiveBatches == 0 {
		f.row.State, f.row.MarkedAt = fileDeleting, tx.nowMs
	}
	// The reservation, if the writer made one, is confirmed.
	if err := tx.b.Delete(reservationKey(req.ObjectKey), nil); err != nil {
		return wal.CommitFileResult{}, err
	}
	return resultsOf(req, &f.row), nil
}

// errReaped is CommitFile's answer for a key reaped as an orphan.
func errReaped(key string) error {
	return fmt.Errorf("%w (%w): %q: its reservation expired before the commit", wal.ErrObjectReaped, wal.ErrObjectKeyReused, key)
}

// commitBatch decides one batch: unknown partition, the producer check,
// or accept at the partition's high watermark (added to runs).
func commitBatch(tx *txn, b *wal.CommitBatch, objectKey string, runs *wal.RunBuilder[wal.TopicIDPartition]) (storedResult, error) {
	l, known, err := tx.knownLog(b.Partition)
	if err != nil {
		return storedResult{}, err
	}
	if !known {
		return wal.UnknownPartitionResult(), nil
	}
	assigned := l.row.HighWatermark
	if assigned > math.MaxInt64-b.OffsetCount() {
		return storedResult{}, fmt.Errorf("%w: pebblecp: partition %s: %d offsets after the high watermark %d overflow",
			wal.ErrInvalidArgument, b.Partition, b.OffsetCount(), assigned)
	}
	appendTime := tx.nowMs
	if b.Idempotent() {
		st, err := tx.producer(b.Partition, b.ProducerID)
		if err != nil {
			return storedResult{}, err
		}
		c := wal.CheckSequence(st, b.ProducerEpoch, b.BaseSequence, b.LastSequence())
		if c.Err != nil {
			return wal.RejectedResult(c, l.row.LogStartOffset), nil
		}
		ts := b.MaxTimestamp
		if b.TimestampType == wal.LogAppendTime {
			ts = appendTime
		}
		tx.setProducer(b.Partition, wal.AcceptSequence(st, b.ProducerID, b.ProducerEpoch, wal.ProducerBatch{
			BaseSequence: b.BaseSequence, LastSequence: b.LastSequence(), AssignedOffset: assigned, Timestamp: ts}))
	}
	l.row.HighWatermark += b.OffsetCount()
	l.row.ByteSize += b.Size
	l.dirty = true
	runs.Add(b.Partition, wal.BatchInfo{ObjectKey: objectKey, ByteOffset: b.ByteOffset, Size: b.Size, BaseOffset: assigned,
		LastOffset: l.row.HighWatermark - 1, MaxTimestamp: b.MaxTimestamp, TimestampType: b.TimestampType,
		LogAppendTime: appendTime, Binding: b.Binding()})
	return storedResult{Status: wal.BatchAccepted, BaseOffset: assigned, LogAppendTime: appendTime,
		LogStartOffset: l.row.LogStartOffset}, nil
}

// rowOf is the stored row of a run's head and run bytes (wal.JoinRun).
func rowOf(head wal.BatchInfo, run []byte) *batchRow {
	return &batchRow{BaseOffset: head.BaseOffset, ObjectKey: head.ObjectKey, ByteOffset: head.ByteOffset, Size: head.Size,
		MaxTimestamp: head.MaxTimestamp, LogAppendTime: head.LogAppendTime, TimestampType: head.TimestampType,
		Binding: head.Binding, Run: run}
}

// resultsOf turns the stored results into the call's answer.
func resultsOf(req *wal.CommitFileRequest, f *fileRow) wal.CommitFileResult {
	return wal.CommitAnswer(req, f.Results)
}
