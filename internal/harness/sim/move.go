package sim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
)

// A log directory move (Kafka: alterReplicaLogDirs), the smallest model
// of it: a broker's future log is the log manager's
// (logmanager.Manager.CreateFuture) in the other log directory of the
// same crashable disk, so a crash keeps or tears it as it does the
// current log, and a restart reopens it and hands it to the driver
// (SetFutureLog), whose phase-2 check reads it. The move fetcher (Kafka:
// ReplicaAlterLogDirsThread) copies only when MoveCopy runs, first
// truncating the future log as that thread does (truncateFuture: to the
// classic fetcher's truncations, and out of the current log's range), and
// the promotion runs only when PromoteFuture does, through the log manager
// (replica.ManagedLogs: logmanager.Manager.PromoteFutureInPlace, whose
// commit point is a marker in the future log's directory). The random
// scheduler takes all three (moveChoices).

// futureLog is the log manager's future log of the partition (nil: none).
func (b *Broker) futureLog() *log.UnifiedLog {
	if b.logs == nil {
		return nil
	}
	f, err := b.logs.GetFuture(b.c.tp)
	if err != nil {
		return nil
	}
	return f
}

// logDirOf is the log directory holding l.
func (b *Broker) logDirOf(l *log.UnifiedLog) string { return b.fs.PathDir(l.Dir()) }

// otherDir is the log directory a future log of the current log l is
// created in.
func otherDir(l *log.UnifiedLog) string {
	if strings.HasPrefix(l.Dir(), logDirs[0]+"/") {
		return logDirs[1]
	}
	return logDirs[0]
}

// StartMove starts moving broker id's log to the disk's other directory:
// an empty future log there, starting at the current log's local log
// start, handed to the driver (Replica.StartMove), which adds it to the
// move fetcher.
func (c *Cluster) StartMove(id int32) error {
	return c.do("start-move", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		l := b.Log()
		if l == nil || b.futureLog() != nil {
			return "", notApplicable("broker %d has no log or moves it already", id)
		}
		f, err := b.logs.CreateFuture(c.tp, otherDir(l))
		if err != nil {
			return "", err
		}
		b.futureStateFrom = 0
		if s := l.LocalLogStartOffset(); s > 0 {
			if err := b.startFutureAt(l, f, s); err != nil {
				return "", err
			}
		}
		err = b.driver.StartMove(c.ctx, f)
		return fmt.Sprintf("future log in %s from %d (log end %d)", b.logDirOf(f), f.LogEndOffset(), l.LogEndOffset()), err
	})
}

// MoveCopy runs broker id's move fetcher once: it copies the current log
// into the future log from the future log's end up to the current log's
// end, batches with their offsets and leader epochs, as Kafka's
// ReplicaAlterLogDirsThread fetches from the local replica. The
// promotion is a step of its own (PromoteFuture).
func (c *Cluster) MoveCopy(id int32) error {
	return c.do("move-copy", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		l, f := b.Log(), b.futureLog()
		if l == nil || f == nil || !b.moving {
			return "", notApplicable("broker %d runs no move", id)
		}
		note, err := b.truncateFuture(l, f)
		if err != nil {
			return note, err
		}
		from := f.LogEndOffset()
		for f.LogEndOffset() < l.LogEndOffset() {
			fd, err := l.Read(nil, f.LogEndOffset(), fetchBytes, log.IsolationLogEnd, true)
			if err != nil {
				return "", err
			}
			if len(fd.Records) == 0 {
				break
			}
			restart, at, err := b.appendToFuture(l, f, fd.Records, c.ctrl.rec.LeaderEpoch)
			note += restart
			if err != nil {
				return note, err
			}
			if at >= 0 {
				from = min(from, at)
			}
		}
		// Kafka's processPartitionData: the high watermark, then the log
		// start offset follows the current log's
		// (maybeIncrementLogStartOffset), before the epochs are copied:
		// a future log that kept records below a raised log start would
		// be given the current log's epochs from there, losing its own
		// below (its cache's first entry then starts above its records).
		f.UpdateHighWatermark(min(l.HighWatermark(), f.LogEndOffset()))
		if err := followLogStart(l, f); err != nil {
			return "", err
		}
		if err := copyEpochs(l, f, from); err != nil {
			return "", err
		}
		return fmt.Sprintf("%scopied [%d, %d) into the future log; epochs=%s", note, from, f.LogEndOffset(),
			formatEpochs(f.EpochEntries())), nil
	})
}

// copyEpochs gives the future log f the current log l's leader epochs
// over the offsets copied from from on: an append derives them from the
// batches' leader epochs, but the current log may hold an epoch no batch
// carries (the diskless epoch the switch assigns at the seal).
func copyEpochs(l, f *log.UnifiedLog, from int64) error {
	entries := l.EpochEntries()
	for i, e := range entries {
		if e.StartOffset >= f.LogEndOffset() {
			break
		}
		if i+1 < len(entries) && entries[i+1].StartOffset <= from {
			continue // ends before the copied offsets
		}
		if err := f.AssignEpochStartOffset(e.Epoch, max(e.StartOffset, f.LogStartOffset())); err != nil {
			return err
		}
	}
	return nil
}

// appendToFuture appends records read from the current log to the
// future log f. The current log's local log start can lie inside a
// batch (DeleteRecords), and a future log started there is sent the
// whole batch: Kafka's Partition.appendRecordsToFollowerOrFutureReplica
// handles the future replica as the follower (appendAsFollower), starting
// it afresh at the batch's base offset (startFutureAt); followLogStart
// then moves its log start back up. at is where it restarted f, -1 if
// it did not.
func (b *Broker) appendToFuture(l, f *log.UnifiedLog, records []byte, epoch int32) (note string, at int64, err error) {
	from := f.LogEndOffset()
	at, last, err := appendRestarting(f, records, epoch, func(base int64) error { return b.startFutureAt(l, f, base) })
	if at < 0 {
		return "", at, err
	}
	return fmt.Sprintf("(future log start %d inside the batch [%d, %d]: restarted at %d) ", from, at, last, at), at, err
}

// startFutureAt empties the future log f and starts it at s (the current
// log l's local log start, or the base of the batch holding it) with
// l's log start, lineage and producers there
// (log.UnifiedLog.StartAsFutureOf, which a broker's move fetcher calls
// too).
func (b *Broker) startFutureAt(l, f *log.UnifiedLog, s int64) error {
	b.futureStateFrom = s
	err := f.StartAsFutureOf(l, s)
	if errors.Is(err, fs.ErrNotExist) {
		// No snapshot at the base of a batch inside a segment: the
		// future log takes the lineage without the producers there.
		return f.TruncateFullyAndRestore(log.RemoteRestore{NextOffset: s, LogStartOffset: min(s, l.LogStartOffset()),
			Epochs: l.EpochEntriesInRange(-1, s)})
	}
	return err
}

// markMoveTruncation records that the classic fetcher truncated the
// current log to offset, for the move fetcher's next round (Kafka's
// ReplicaFetcherThread.truncate calls the alter-log-dirs manager's
// markPartitionsForTruncation).
func (b *Broker) markMoveTruncation(offset int64) {
	if b.moveTruncateTo < 0 || offset < b.moveTruncateTo {
		b.moveTruncateTo = offset
	}
}

// truncateFuture is the move fetcher's truncation before it copies, as
// Kafka's ReplicaAlterLogDirsThread does with the current log as its
// leader: to the offset the classic fetcher marked (markMoveTruncation),
// then, for a fetch out of the current log's range, to the current
// log's end (the future log ends past it: the current log was truncated
// by something that does not mark the move fetcher, such as the
// driver's truncation to the seal) or to a fresh log at its local log
// start (the future log ends below it). Its note is empty when it
// changed nothing.
func (b *Broker) truncateFuture(l, f *log.UnifiedLog) (string, error) {
	note := ""
	if b.moveResumed {
		b.moveResumed = false
		// Each round that is not done truncates below f's latest
		// epoch, so there are at most as many rounds as f has epochs.
		for done := false; !done; {
			var t int64
			t, done = epochTruncation(l, f)
			if t >= f.LogEndOffset() {
				break
			}
			if _, err := truncateLog(f, t, &b.futureStateFrom); err != nil {
				return note, err
			}
			note += fmt.Sprintf("resumed: truncated to %d at the epochs' divergence; ", t)
		}
	}
	if t := b.moveTruncateTo; t >= 0 {
		b.moveTruncateTo = -1
		if f.LogEndOffset() > t {
			if _, err := truncateLog(f, t, &b.futureStateFrom); err != nil {
				return note, err
			}
			note += fmt.Sprintf("marked truncation to %d; ", t)
		}
	}
	switch fe, leo, start := f.LogEndOffset(), l.LogEndOffset(), l.LocalLogStartOffset(); {
	case fe > leo:
		if _, err := truncateLog(f, leo, &b.futureStateFrom); err != nil {
			return note, err
		}
		note += fmt.Sprintf("out of range at %d: truncated to the log end %d; ", fe, leo)
	case fe < start:
		if err := b.startFutureAt(l, f, start); err != nil {
			return note, err
		}
		note += fmt.Sprintf("out of range at %d: starts at the local log start %d; ", fe, start)
	}
	return note, nil
}

// epochTruncation is where a resumed move fetcher truncates the future
// log f against the current log l, as Kafka's AbstractFetcherThread
// truncates a partition in its truncating state
// (truncateToEpochEndOffsets, getOffsetTruncationState): l's answer to
// OffsetsForLeaderEpoch for f's latest epoch, capped at f's own end of
// the epoch l answers with (a restart forgets the marks of the classic
// fetcher's truncations, and the current log may have been truncated
// and regrown to the same end since the last round). When f does not
// hold the epoch l answers with, it truncates to the end of its largest
// epoch below it and asks again (done false); when l cannot answer, it
// truncates to f's high watermark; as Kafka does.
func epochTruncation(l, f *log.UnifiedLog) (offset int64, done bool) {
	fe := f.LogEndOffset()
	latest, ok := f.LatestEpoch()
	if !ok {
		return fe, true
	}
	ans := l.EndOffsetForEpoch(latest)
	switch {
	case ans.Undefined():
		// The current log cannot answer for f's latest epoch (it holds
		// no epoch from there on): Kafka truncates to the partition's
		// fetch offset, which for a move resumed after a restart is the
		// future log's high watermark (ReplicaManager's
		// maybeAddLogDirFetchers).
		return min(f.HighWatermark(), fe), true
	case ans.Epoch == latest || ans.Epoch < 0:
		return min(ans.EndOffset, fe), true
	}
	own := f.EndOffsetForEpoch(ans.Epoch)
	switch {
	case own.Undefined():
		return min(ans.EndOffset, fe), true
	case own.Epoch != ans.Epoch:
		return min(own.EndOffset, fe), false
	}
	return min(ans.EndOffset, own.EndOffset, fe), true
}

// PromoteFuture runs the move fetcher's promotion hook on broker id
// (Replica.MaybePromoteFutureLog): the future log replaces the current
// one once both end at the same offset.
func (c *Cluster) PromoteFuture(id int32) error {
	return c.do("promote-future", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		f := b.futureLog()
		if b.Log() == nil || f == nil {
			return "", notApplicable("broker %d has no future log", id)
		}
		fend, leo := f.LogEndOffset(), b.Log().LogEndOffset()
		ok, err := b.driver.MaybePromoteFutureLog(c.ctx)
		if !ok {
			return fmt.Sprintf("not promoted: future log end %d, log end %d", fend, leo), err
		}
		b.moving = false
		b.stateFrom = b.futureStateFrom
		return fmt.Sprintf("promoted: the log in %s, leo=%d epochs=%s", b.logDirOf(b.Log()), b.Log().LogEndOffset(),
			formatEpochs(b.Epochs())), err
	})
}

// moveFetcher records whether the move fetcher holds the partition;
// Cluster.MoveCopy performs its copies (replica.MoveFetcher).
type moveFetcher struct{ b *Broker }

func (f moveFetcher) AddPartition(context.Context, remote.TopicIDPartition, replica.Log, replica.Log, int64) error {
	f.b.moving = true
	return nil
}

func (f moveFetcher) RemovePartition(context.Context, remote.TopicIDPartition) error {
	f.b.moving = false
	return nil
}

// moveChoices are the scheduler's rows for a log directory move, with the
// preconditions of the real operations: a move starts on a running
// replica with a log and no move (a restarted broker's future log waits
// for the driver to resume its move), the move fetcher copies only while
// it holds the partition, and it promotes the future log only in a round
// with no truncation pending, once the future log caught up (Kafka's
// ReplicaAlterLogDirsThread calls maybePromoteFutureReplica after an
// append, in its fetching state): a move resumed after a restart starts
// in the truncating state, so its first round (MoveCopy's epoch
// truncation) comes before any promotion.
var moveChoices = [...]choice{
	{"start-move", 1, func(c *Cluster, rng *rand.Rand) error {
		b := c.Broker(anyBroker(c, rng))
		if !b.up || b.Log() == nil || b.Prior().Offline || b.futureLog() != nil {
			return ErrNotApplicable
		}
		return c.StartMove(b.ID)
	}},
	{"move-copy", 2, func(c *Cluster, rng *rand.Rand) error { return c.MoveCopy(anyBroker(c, rng)) }},
	{"promote-future", 1, func(c *Cluster, rng *rand.Rand) error {
		b := c.Broker(anyBroker(c, rng))
		if !b.up || !b.moving || b.moveTruncateTo >= 0 || b.moveResumed || b.Prior().Offline {
			return ErrNotApplicable
		}
		l, f := b.Log(), b.futureLog()
		if l == nil || f == nil || f.LogEndOffset() != l.LogEndOffset() {
			return ErrNotApplicable
		}
		return c.PromoteFuture(b.ID)
	}},
}
