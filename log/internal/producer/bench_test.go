package producer

import (
	"testing"

	"github.com/tierlog/tierlog/log/record"
)

// BenchmarkPrepareApply measures the producer-state work of one append
// (PrepareAppend + Apply) of a 10-record batch: an idempotent producer,
// and a transactional one whose every other append is a COMMIT marker.
func BenchmarkPrepareApply(b *testing.B) {
	b.Run("producer=idempotent", func(b *testing.B) {
		m := NewManager(Options{})
		buf := buildBatch(b, nil, "data pid=1 epoch=0 seq=0 count=10", 0)
		rb, _ := record.ReadBatch(buf)
		b.ReportAllocs()
		b.SetBytes(int64(len(buf)))
		next, seq := int64(0), int32(0)
		for b.Loop() {
			rb.SetBaseOffset(next)
			setBaseSequence(buf, seq)
			a, err := m.PrepareAppend(buf, OriginClient)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Apply(a); err != nil {
				b.Fatal(err)
			}
			next += 10
			seq = (seq + 10) & 0x3fffffff
			if seq == 0 {
				// Wrapped our counter: start a fresh epoch-less run.
				m.TruncateFullyAndStartAt(next)
			}
		}
	})
	b.Run("producer=transactional", func(b *testing.B) {
		m := NewManager(Options{})
		data := buildBatch(b, nil, "data pid=1 epoch=0 seq=0 count=10 txn", 0)
		marker := buildBatch(b, nil, "commit pid=1 epoch=0 coord=0", 0)
		rd, _ := record.ReadBatch(data)
		rm, _ := record.ReadBatch(marker)
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		next, seq, i := int64(0), int32(0), 0
		for b.Loop() {
			buf := data
			if i%2 == 1 {
				buf = marker
				rm.SetBaseOffset(next)
				next++
			} else {
				rd.SetBaseOffset(next)
				setBaseSequence(data, seq)
				seq = (seq + 10) & 0x3fffffff
				next += 10
			}
			i++
			a, err := m.PrepareAppend(buf, OriginClient)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Apply(a); err != nil {
				b.Fatal(err)
			}
			m.OnHighWatermarkUpdated(next)
			if seq == 0 && i%2 == 0 {
				m.TruncateFullyAndStartAt(next)
			}
		}
	})
}
