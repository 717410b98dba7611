package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
)

// controlValue stands for a control record (an ABORT marker of the
// sealing): replicated like data, with no value of its own.
const controlValue = "<control>"

// model is what the partition acknowledged: the committed end and the
// value committed at each offset. Values are unique per produce call
// ("v<step>-<i>"), so a record at the wrong offset, or one replica
// holding another's tail, shows as a different value.
type model struct {
	// end is the highest committed end ever reached: every offset below
	// it was committed and must stay readable with its value.
	end    int64
	values map[int64]string
	// walStart0 is the WAL's start when the sim first saw its row (W
	// before any prune), -1 before.
	walStart0 int64
	// walHW is the WAL's high watermark the checker saw last, -1 before
	// (checkWALRun).
	walHW int64
	// discarded maps each remote segment finished before an unclean
	// election to the offset that election discarded from (its records
	// from there on are not the partition's); nil without one.
	discarded map[remote.SegmentID]int64
	// lost holds the committed ranges [start, end) an operator or an
	// election accepted to lose (start-phase-2 below the seal, a lowered
	// seal, a last-known-leader or unclean election): no tier must hold
	// them any more. Values stay: a replica still holding one must hold
	// the committed value.
	lost [][2]int64
	// staleFrom maps a follower to the offset an unclean or
	// last-known-leader election discarded from while it was outside the
	// ISR (or the lower one from which that election's leader's records
	// became committed where no committed value was left): its high
	// watermark may still cover the discarded records,
	// which it holds until it fetches from the new leader and truncates.
	// Below that offset it is checked as before; the entry goes when it
	// rejoins the ISR.
	staleFrom map[int32]int64
	// deletedBelow is the log start offset DeleteRecords raised (0:
	// none): the committed records below it are deleted on purpose.
	deletedBelow int64
	// cuts are the offsets discardFrom discarded from, in order: the
	// committed end may come back above one within the same step (the
	// new leader's records below its high watermark), so the producer
	// checker learns of a discard from here, not from the end falling.
	cuts []int64
}

// cutAtOrBelow reports whether an election discarded committed records
// from offset o or below.
func (m *model) cutAtOrBelow(o int64) bool {
	return slices.ContainsFunc(m.cuts, func(c int64) bool { return c <= o })
}

// given reports whether the accepted losses cover [from, to).
func (m *model) given(from, to int64) bool {
	lost := slices.Clone(m.lost)
	slices.SortFunc(lost, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for _, r := range lost {
		if r[0] <= from && from < r[1] {
			from = r[1]
		}
	}
	return from >= to
}

// acceptLoss records [from, to) as given up (nothing when empty).
func (m *model) acceptLoss(from, to int64) {
	if from < to {
		m.lost = append(m.lost, [2]int64{from, to})
	}
}

func (m *model) init() {
	m.values = map[int64]string{}
	m.walStart0 = -1
	m.walHW = -1
}

func (m *model) advance(end int64) { m.end = max(m.end, end) }

// firstUnknown is the first offset of [from, to) with no committed value
// known and not given up, or to.
func (m *model) firstUnknown(from, to int64) int64 {
	for o := from; o < to; o++ {
		if _, ok := m.values[o]; !ok && !m.given(o, o+1) {
			return o
		}
	}
	return to
}

// commit records the committed value at offset (a WAL answer, or the
// classic leader's record as its high watermark passes it).
func (m *model) commit(offset int64, value string) { m.values[offset] = value }

// commitFromLog commits the leader's records in [from, to).
func (m *model) commitFromLog(l *log.UnifiedLog, from, to int64) error {
	err := readLocal(l, from, to, func(o int64, v string) error {
		if _, ok := m.values[o]; !ok {
			m.values[o] = v
		}
		return nil
	})
	m.advance(to)
	return err
}

// forEachRecord calls f with the offset and value of every record of
// batches at or above from and below to.
func forEachRecord(batches []byte, from, to int64, f func(int64, string) error) (next int64, err error) {
	it := record.NewIter(record.IterOptions{})
	next = from
	for len(batches) > 0 {
		b, err := record.ReadBatch(batches)
		if err != nil {
			return next, err
		}
		if b.IsControl() {
			for o := max(b.BaseOffset(), from); o < min(b.NextOffset(), to); o++ {
				if err := f(o, controlValue); err != nil {
					return next, err
				}
			}
		} else {
			for it.Reset(b); it.Next(); {
				r := it.Record()
				if r.Offset >= from && r.Offset < to {
					if err := f(r.Offset, string(r.Value)); err != nil {
						return next, err
					}
				}
			}
			if err := it.Err(); err != nil {
				return next, err
			}
		}
		next = b.NextOffset()
		batches = batches[b.Size():]
	}
	return next, nil
}

// readLocal calls f with every record of l's local log in [from, to).
func readLocal(l *log.UnifiedLog, from, to int64, f func(int64, string) error) error {
	from = max(from, l.LocalLogStartOffset())
	to = min(to, l.LogEndOffset())
	for off := from; off < to; {
		fd, err := l.Read(nil, off, 64<<10, log.IsolationLogEnd, true)
		if err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if len(fd.Records) == 0 {
			return fmt.Errorf("read at %d: no records below %d", off, to)
		}
		next, err := forEachRecord(fd.Records, off, to, f)
		if err != nil {
			return err
		}
		if next <= off {
			return fmt.Errorf("read at %d made no progress", off)
		}
		off = next
	}
	return nil
}

// agreedEnd is where a newly elected leader's log stops agreeing with
// the committed records: its log end, or the first offset of its local
// log below the committed end whose record differs from the committed
// value (a replica outside the ISR may hold a tail of an older leader
// epoch that was never committed). An unclean or last-known-leader
// election keeps the records below it.
func (m *model) agreedEnd(l *log.UnifiedLog) int64 {
	end := l.LogEndOffset()
	errStop := errors.New("stop")
	err := readLocal(l, 0, min(end, m.end), func(o int64, v string) error {
		if want, ok := m.values[o]; ok && want != v {
			end = o
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return min(end, l.LocalLogStartOffset()) // unreadable: keep only what lies below the local log
	}
	return end
}
