package badinput

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

func init() { rowSets = append(rowSets, snapshotRows, epochCheckpointRows) }

const (
	snapProducerID = 7
	snapRecords    = 60
)

// idempotentBatch is batch seq of producer snapProducerID: one record
// at sequence seq.
func idempotentBatch(t *testing.T, seq int32) []byte {
	o := record.DefaultBuilderOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = snapProducerID, 0, seq
	b := record.NewBuilder(o)
	b.Add(1000, nil, []byte(fmt.Sprintf("value-%04d", seq)))
	buf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// newProducerLog is a closed log of snapRecords idempotent batches of one
// producer in segments of about ten, so it holds a producer snapshot at
// every roll and one at the log end.
func newProducerLog(t *testing.T) *segLog {
	s := newSegLog(t, 0, 800)
	l, err := log.Open(segDir, s.opts)
	s.must(err)
	for seq := int32(0); seq < snapRecords; seq++ {
		_, err := l.AppendAsLeader(idempotentBatch(t, seq), 0, log.OriginClient)
		s.must(err)
	}
	s.must(l.Close())
	s.n = snapRecords
	return s
}

// snapshots returns the names of the producer snapshot files, oldest
// first (their names are zero-padded offsets).
func (s *segLog) snapshots() []string {
	names, err := s.fs.List(segDir)
	s.must(err)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".snapshot") {
			out = append(out, n)
		}
	}
	slices.Sort(out) // zero-padded offsets: name order is offset order
	if len(out) < 3 {
		s.t.Fatalf("want at least 3 producer snapshots, have %v", out)
	}
	return out
}

// reopenProducer opens the damaged log and observes whether the producer
// state came through: a retry of the last batch must be recognised as a
// duplicate of offset snapRecords-1, and the next sequence accepted at
// the log end. repaired means both held; readableTo is how far the
// records read back.
func (s *segLog) reopenProducer() outcome {
	l, err := log.Open(segDir, s.opts)
	if err != nil {
		return outcome{err: err, readableTo: -1}
	}
	defer l.Close()
	to, rerr := readFromStart(l)
	if rerr != nil {
		return outcome{err: rerr, readableTo: to}
	}
	dup, err := l.AppendAsLeader(idempotentBatch(s.t, snapRecords-1), 0, log.OriginClient)
	if err != nil {
		return outcome{err: err, readableTo: to}
	}
	next, err := l.AppendAsLeader(idempotentBatch(s.t, snapRecords), 0, log.OriginClient)
	if err != nil {
		return outcome{err: err, readableTo: to}
	}
	ok := dup.Duplicate && dup.FirstOffset == snapRecords-1 && !next.Duplicate && next.FirstOffset == snapRecords
	return outcome{repaired: ok, readableTo: to}
}

func snapRow(damage string, f func(s *segLog, snaps []string)) row {
	return row{area: areaSnapshot, damage: damage, want: outcome{repaired: true, readableTo: snapRecords},
		run: func(t *testing.T) outcome {
			s := newProducerLog(t)
			f(s, s.snapshots())
			return s.reopenProducer()
		}}
}

// snapshotRows: whatever happens to the producer snapshots, the log
// opens, serves every record and still knows its producer (the snapshot
// is a cache of what the log holds; a damaged one is dropped and the state
// replayed from the batches).
func snapshotRows() []row {
	newest := func(n []string) string { return n[len(n)-1] }
	edit := func(f func([]byte) []byte) func(s *segLog, n []string) {
		return func(s *segLog, n []string) { s.change(newest(n), f) }
	}
	flipAt := func(pos func([]byte) int) func([]byte) []byte {
		return func(b []byte) []byte {
			b = bytes.Clone(b)
			b[pos(b)] ^= 0x5a
			return b
		}
	}
	return []row{
		snapRow("newest snapshot of garbage", edit(func([]byte) []byte { return bytes.Repeat([]byte{0xa5}, 300) })),
		snapRow("newest snapshot empty", edit(func([]byte) []byte { return nil })),
		snapRow("newest snapshot cut in half", edit(func(b []byte) []byte { return b[:len(b)/2] })),
		snapRow("newest snapshot with a flipped byte in its entries", edit(flipAt(func(b []byte) int { return len(b) - 3 }))),
		snapRow("newest snapshot with a flipped version", edit(flipAt(func([]byte) int { return 1 }))),
		snapRow("newest snapshot with a huge entry count", edit(func(b []byte) []byte {
			b = bytes.Clone(b)
			if len(b) >= 10 {
				binary.BigEndian.PutUint32(b[len(b)-8:], 0x7fffffff)
			}
			return b
		})),
		snapRow("newest snapshot with trailing bytes", edit(func(b []byte) []byte { return append(bytes.Clone(b), 1, 2, 3, 4) })),
		snapRow("every snapshot deleted", func(s *segLog, n []string) {
			for _, name := range n {
				s.remove(name)
			}
		}),
		snapRow("every snapshot of garbage", func(s *segLog, n []string) {
			for _, name := range n {
				s.write(name, []byte("not a snapshot"))
			}
		}),
		// A well-formed snapshot under a newer name is trusted after a
		// clean shutdown, as Kafka trusts it: nothing in it contradicts
		// the log. The producer's retry is then refused as out of order,
		// never written twice.
		{area: areaSnapshot, damage: "newest snapshot replaced by an older one",
			want: outcome{err: log.ErrOutOfOrderSequence, readableTo: snapRecords},
			run: func(t *testing.T) outcome {
				s := newProducerLog(t)
				n := s.snapshots()
				s.write(newest(n), s.read(n[1])) // the state at offset 10
				return s.reopenProducer()
			}},
		snapRow("snapshot file beyond the log end", func(s *segLog, n []string) {
			s.write(segName(10_000, ".snapshot"), s.read(newest(n)))
		}),
		snapRow("snapshot file named beyond int64", func(s *segLog, n []string) {
			s.write("99999999999999999999.snapshot", s.read(newest(n)))
		}),
		snapRow("newest snapshot damaged after a crash", func(s *segLog, n []string) {
			s.change(newest(n), func([]byte) []byte { return []byte{0} })
			s.unclean()
		}),
	}
}

// epochCheckpointRows: the leader-epoch checkpoint is repaired from the
// log when it says more than the log holds, and refused with a typed
// error when it cannot be parsed.
func epochCheckpointRows() []row {
	ckpt := epochcache.CheckpointFileName
	epochRow := func(damage string, want outcome, text string, check func(l *log.UnifiedLog) bool) row {
		return row{area: areaCheckpoint, damage: damage, want: want, run: func(t *testing.T) outcome {
			s := newSegLog(t, 60, 800)
			s.write(ckpt, []byte(text))
			l, err := log.Open(segDir, s.opts)
			if err != nil {
				return outcome{err: err, readableTo: -1}
			}
			defer l.Close()
			to, rerr := readFromStart(l)
			return outcome{err: rerr, repaired: check(l), readableTo: to}
		}}
	}
	// endsAtLogEnd: epoch 0 (the only one the log was written in) is the
	// latest, and ends at the log end.
	endsAtLogEnd := func(l *log.UnifiedLog) bool {
		e, ok := l.LatestEpoch()
		ans := l.EndOffsetForEpoch(0)
		end, found, ok2 := ans.EndOffset, ans.Epoch, !ans.Undefined()
		return ok && e == 0 && ok2 && found == 0 && end == l.LogEndOffset()
	}
	rebuilt := outcome{repaired: true, readableTo: 60}
	return []row{
		epochRow("leader-epoch-checkpoint of garbage", rebuilt, "garbage\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint empty", rebuilt, "", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint with a wrong version", rebuilt, "7\n1\n0 0\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint with more entries than its count", rebuilt, "0\n1\n0 0\n1 5\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint with decreasing epochs", rebuilt, "0\n2\n3 0\n1 5\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint with a repeated start offset", rebuilt, "0\n2\n0 0\n4 0\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint naming an epoch the log never had", rebuilt, "0\n1\n9 0\n", endsAtLogEnd),
		epochRow("leader-epoch-checkpoint with an epoch starting beyond the log end", rebuilt,
			"0\n2\n0 0\n5 1000\n", endsAtLogEnd),
	}
}
