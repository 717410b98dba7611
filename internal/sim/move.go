package sim

import (
	"context"
	"fmt"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
)

// A log directory move (Kafka: alterReplicaLogDirs), the smallest model
// of it for scripted runs: a broker's future log lives in the other
// directory of the same crashable disk, so a crash keeps or tears it as
// it does the current log, and a restart reopens it and hands it to the
// driver (SetFutureLog), whose phase-2 check reads it. The move fetcher
// (Kafka: ReplicaAlterLogDirsThread) copies only when MoveCopy runs, and
// the promotion runs only when PromoteFuture does; the random scheduler
// takes neither.

// futureLogDir is the disk's second directory. A promotion swaps the
// roles of the two (Broker.promoted): Kafka renames the future directory
// into place, the simulation's log manager records which one is current.
// The record is the broker's, not the disk's: it survives a crash as the
// broker's configuration does.
const futureLogDir = logDir + "-future"

// currentDir is the directory of the broker's current log.
func (b *Broker) currentDir() string {
	if b.promoted {
		return futureLogDir
	}
	return logDir
}

// otherDir is the directory a future log is created in.
func (b *Broker) otherDir() string {
	if b.promoted {
		return logDir
	}
	return futureLogDir
}

// openFutureLog opens the future log if the disk holds its directory.
func (b *Broker) openFutureLog() (*log.UnifiedLog, error) {
	if _, err := b.fs.Stat(b.otherDir()); err != nil {
		return nil, nil
	}
	return log.Open(b.otherDir(), b.logOptions())
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
		if l == nil || b.future != nil {
			return "", notApplicable("broker %d has no log or moves it already", id)
		}
		f, err := b.createLog(b.otherDir())
		if err != nil {
			return "", err
		}
		if s := l.LocalLogStartOffset(); s > 0 {
			if err := f.TruncateFullyAndStartAt(s, s); err != nil {
				return "", err
			}
		}
		b.future = f
		err = b.driver.StartMove(c.ctx, f)
		return fmt.Sprintf("future log in %s from %d (log end %d)", b.otherDir(), f.LogEndOffset(), l.LogEndOffset()), err
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
		l, f := b.Log(), b.future
		if l == nil || f == nil || !b.moving {
			return "", notApplicable("broker %d runs no move", id)
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
			if _, err := f.AppendAsFollower(fd.Records, c.ctrl.rec.LeaderEpoch); err != nil {
				return "", err
			}
		}
		f.UpdateHighWatermark(min(l.HighWatermark(), f.LogEndOffset()))
		return fmt.Sprintf("copied [%d, %d) into the future log; epochs=%s", from, f.LogEndOffset(),
			formatEpochs(f.EpochEntries())), nil
	})
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
		f := b.future
		if b.Log() == nil || f == nil {
			return "", notApplicable("broker %d has no future log", id)
		}
		fend, leo := f.LogEndOffset(), b.Log().LogEndOffset()
		ok, err := b.driver.MaybePromoteFutureLog(c.ctx)
		if !ok {
			return fmt.Sprintf("not promoted: future log end %d, log end %d", fend, leo), err
		}
		b.moving = false
		return fmt.Sprintf("promoted: the log in %s, leo=%d epochs=%s", b.currentDir(), b.Log().LogEndOffset(),
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

// futureLogManager swaps the directories' roles and deletes the current
// log (replica.FutureLogManager).
type futureLogManager struct{ b *Broker }

func (m futureLogManager) ReplaceCurrentWithFutureLog(_ context.Context, _ remote.TopicIDPartition, current, _ replica.Log) error {
	if err := current.Delete(); err != nil {
		return err
	}
	m.b.promoted, m.b.future = !m.b.promoted, nil
	return nil
}
