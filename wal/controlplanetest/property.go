package controlplanetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// model is what the property test expects of one partition.
type model struct {
	w, hw   int64
	batches []wal.BatchInfo // live, in offset order
	// seqs are each producer's accepted (base sequence, offset) pairs.
	seqs map[int64][]seqAt
}

type seqAt struct {
	seq    int32
	n      int64
	offset int64
}

type committed struct {
	req wal.CommitFileRequest
	res wal.CommitFileResult
}

// testProperty runs random commits (some idempotent, some replaying a
// recent batch), retries of earlier commits, prunes and record deletions,
// and checks after each that every partition's offsets are the cumulative
// record counts of its accepted batches in commit order.
func testProperty(e *env, opts Options) {
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed))
	e.t.Logf("seed %d", opts.Seed)
	parts := []wal.TopicIDPartition{t1p0, t1p1, t2p0}
	models := map[wal.TopicIDPartition]*model{}
	for _, tp := range parts {
		models[tp] = &model{seqs: map[int64][]seqAt{}}
	}
	var history []committed
	for step := 0; step < opts.PropertySteps; step++ {
		switch op := rng.IntN(20); {
		case op < 14 || len(history) == 0:
			history = append(history, e.propertyCommit(rng, parts, models))
		case op < 17:
			// A retry answers exactly as the first commit did.
			c := history[rng.IntN(len(history))]
			res, err := e.cp.CommitFile(e.ctx, c.req)
			require.NoError(e.t, err, "step %d", step)
			require.Equal(e.t, c.res, res, "step %d: retry of %s", step, c.req.ObjectKey)
		case op < 19:
			tp := parts[rng.IntN(len(parts))]
			m := models[tp]
			h := m.w - 1 + rng.Int64N(m.hw-m.w+2)
			res := e.prune(wal.PruneRequest{Partition: tp, HighestOffsetInRemoteStorage: h})
			m.prune(h)
			require.Equal(e.t, m.w, res[0].LogStartOffset, "step %d: prune %s at %d", step, tp, h)
		default:
			tp := parts[rng.IntN(len(parts))]
			m := models[tp]
			off := m.w + rng.Int64N(m.hw-m.w+1)
			e.deleteRecords(tp, off, off)
			m.deleteBelow(off)
		}
		for _, tp := range parts {
			m := models[tp]
			info := e.info(tp)
			require.Equal(e.t, [2]int64{m.w, m.hw}, [2]int64{info.LogStartOffset, info.HighWatermark}, "step %d: %s", step, tp)
			if step%10 == 0 || step == opts.PropertySteps-1 {
				got := e.find1(tp, m.w)
				require.NoError(e.t, got.Err)
				require.Equal(e.t, fmt.Sprint(m.batches), fmt.Sprint(got.Batches), "step %d: %s batches", step, tp)
			}
		}
	}
}

func (e *env) propertyCommit(rng *rand.Rand, parts []wal.TopicIDPartition, models map[wal.TopicIDPartition]*model) committed {
	n := 1 + rng.IntN(6)
	var bs []wal.CommitBatch
	for i := 0; i < n; i++ {
		if rng.IntN(15) == 0 {
			bs = append(bs, batch(t1p9, 1+rng.Int64N(5)))
			continue
		}
		tp := parts[rng.IntN(len(parts))]
		b := batch(tp, 1+rng.Int64N(20))
		b.MaxTimestamp = rng.Int64N(1 << 40)
		if rng.IntN(2) == 0 {
			b.ProducerID, b.ProducerEpoch = int64(rng.IntN(2)), 0
		}
		bs = append(bs, b)
	}
	// Idempotent batches take the next sequence, or replay a recent one.
	// The plan is made against a scratch copy of the sequences so that
	// duplicates inside the object are planned too.
	next := map[wal.TopicIDPartition]map[int64][]seqAt{}
	for _, tp := range parts {
		next[tp] = map[int64][]seqAt{}
		for pid, s := range models[tp].seqs {
			next[tp][pid] = append([]seqAt(nil), s...)
		}
	}
	replay := make([]int64, len(bs)) // -1, or the offset a duplicate answers
	hw := map[wal.TopicIDPartition]int64{}
	for _, tp := range parts {
		hw[tp] = models[tp].hw
	}
	for i := range bs {
		b := &bs[i]
		replay[i] = -1
		if b.Partition == t1p9 {
			continue
		}
		if b.Idempotent() {
			s := next[b.Partition][b.ProducerID]
			if len(s) > 0 && rng.IntN(4) == 0 {
				d := s[len(s)-1-rng.IntN(len(s))]
				b.BaseSequence, b.LastOffset, b.RecordCount, b.Size = d.seq, d.n-1, int32(d.n), d.n
				replay[i] = d.offset
				continue
			}
			b.BaseSequence = 0
			if len(s) > 0 {
				b.BaseSequence = s[len(s)-1].seq + int32(s[len(s)-1].n)
			}
			s = append(s, seqAt{b.BaseSequence, b.OffsetCount(), hw[b.Partition]})
			if len(s) > wal.MaxProducerBatches {
				s = s[1:]
			}
			next[b.Partition][b.ProducerID] = s
		}
		hw[b.Partition] += b.OffsetCount()
	}
	req, res := e.commit(bs...)
	// Check in list order against the models.
	for i, b := range req.Batches {
		r := res.Batches[i]
		if b.Partition == t1p9 {
			e.requireRejected(r, wal.ErrUnknownTopicOrPartition)
			continue
		}
		m := models[b.Partition]
		if replay[i] >= 0 {
			e.requireRejected(r, wal.ErrDuplicateSequence)
			require.Equal(e.t, replay[i], r.BaseOffset, "duplicate answers the first offset")
			continue
		}
		e.requireAccepted(r, m.hw)
		m.batches = append(m.batches, wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
			BaseOffset: m.hw, LastOffset: m.hw + b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp,
			TimestampType: b.TimestampType, LogAppendTime: r.LogAppendTime, Binding: b.Binding()})
		if b.Idempotent() {
			s := append(m.seqs[b.ProducerID], seqAt{b.BaseSequence, b.OffsetCount(), m.hw})
			if len(s) > wal.MaxProducerBatches {
				s = s[1:]
			}
			m.seqs[b.ProducerID] = s
		}
		m.hw += b.OffsetCount()
	}
	return committed{req, res}
}

// prune applies the WAL start rule of a prune at h to the model.
func (m *model) prune(h int64) {
	for len(m.batches) > 0 && m.batches[0].LastOffset <= h {
		m.batches = m.batches[1:]
	}
	if len(m.batches) > 0 {
		m.w = max(m.w, min(m.batches[0].BaseOffset, h+1))
	} else {
		m.w = min(m.hw, max(h+1, m.w))
	}
}

func (m *model) deleteBelow(off int64) {
	if off <= m.w {
		return
	}
	for len(m.batches) > 0 && m.batches[0].LastOffset < off {
		m.batches = m.batches[1:]
	}
	m.w = off
}
