package sim

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/wal"
)

// Consume is a consumer's fetch at offset from the leader, through the
// tier that holds it: remote storage below the leader's local log
// start, the local log (read committed: up to the high watermark), the
// WAL past the local log end once the seal is committed. Every record
// it is served must be committed, with the committed value
// (UncommittedRead otherwise), and the first one must be at offset when
// offset is committed and every later one must follow the one before
// (LostRecord otherwise: the tier skipped records).
// A fetch that fails (the tier is not
// ready, the leader is rebuilding) serves nothing and is no violation.
func (c *Cluster) Consume(offset int64) error {
	var bad *Violation
	err := c.do("consume", c.ctrl.rec.Leader, func() (string, error) {
		c.rec.note("offset", offset)
		b := c.leaderBroker()
		if b == nil {
			return "", notApplicable("no leader")
		}
		tier, data, err := c.fetch(b, offset)
		if err != nil {
			return fmt.Sprintf("at %d from %s: %v", offset, tier, err), nil
		}
		n, last := 0, int64(-1)
		_, err = forEachRecord(data, offset, 1<<62, func(o int64, v string) error {
			if n == 0 && o > offset && offset < c.model.end && !c.model.given(offset, o) {
				// Offsets are dense here (no compaction, transactions
				// or gaps): a fetch served past its offset skipped
				// committed records, unless the partition gave them up
				// (a consumer reading in a range start-phase-2 or a
				// lowered seal lost gets the records after it).
				bad = c.violation(LostRecord, b.ID, offset, "%s served from %d a fetch at %d (committed end %d)",
					tier, o, offset, c.model.end)
				return bad
			}
			if n > 0 && o != last+1 && !c.model.given(last+1, o) {
				// Within one answer too: a tier that served a batch
				// after a skipped one (a row missing from the WAL's
				// answer, a hole in a log) lost the records between.
				bad = c.violation(LostRecord, b.ID, last+1, "%s served %d after %d at a fetch at %d (committed end %d)",
					tier, o, last, offset, c.model.end)
				return bad
			}
			n, last = n+1, o
			want, ok := c.model.values[o]
			if o >= c.model.end || ok && want != v {
				bad = c.violation(UncommittedRead, b.ID, o, "%s served %q at %d, committed %q (committed end %d)",
					tier, v, o, want, c.model.end)
				return bad
			}
			return nil
		})
		if bad != nil {
			return fmt.Sprintf("at %d from %s", offset, tier), nil
		}
		if err != nil {
			return fmt.Sprintf("at %d from %s: %v", offset, tier, err), nil
		}
		return fmt.Sprintf("at %d from %s: %d record(s) to %d", offset, tier, n, last), nil
	})
	if bad != nil {
		return bad
	}
	return err
}

// errPrefixNotLocal: a fetch below the seal past the leader's log end.
var errPrefixNotLocal = errors.New("sim: the classic prefix is not in the leader's log yet")

// fetch reads at offset through the leader's tiers.
func (c *Cluster) fetch(b *Broker, offset int64) (string, []byte, error) {
	l := b.Log()
	switch {
	case offset < l.LocalLogStartOffset():
		res, err := b.mgr.Read(c.ctx, c.tp, offset, fetchBytes, log.IsolationHighWatermark, true)
		return "remote", res.Records, err
	case offset < l.LogEndOffset() || !c.ctrl.rec.State.SealCommitted():
		fd, err := l.Read(nil, offset, fetchBytes, log.IsolationHighWatermark, true)
		return "local", fd.Records, err
	case offset < c.ctrl.rec.State.Seal():
		// The classic prefix is neither local nor tiered on this leader
		// (its log ends below the seal: it is rebuilding); the WAL holds
		// nothing below the seal.
		return "local", nil, errPrefixNotLocal
	}
	res, err := c.reader.Fetch(c.ctx, wal.FindBatchesRequest{MaxBytes: fetchBytes,
		Partitions: []wal.FindPartition{{Partition: c.walTP(), Offset: offset, MaxPartitionBytes: fetchBytes}}})
	if err != nil {
		return "wal", nil, err
	}
	return "wal", res[0].Records, res[0].Err
}
