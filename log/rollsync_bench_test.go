package log

import (
	"fmt"
	"testing"
)

// BenchmarkAppendRolls appends 16 KiB batches under flush.messages
// unlimited (FlushMessages 0) to 1 MiB segments: a roll every 64
// appends. With the recovery point's background flush off
// (points=off), nothing else syncs: the cost of the roll ordering
// (rollsync.go) shows in the roll=explicit rows, where Roll syncs the
// rolled segment's data before it writes the producer snapshot, and in
// the roll=append rows it must stay off the append path (no fsync there).
func BenchmarkAppendRolls(b *testing.B) {
	batch := benchBatch(b, 16, 1024-21)
	for _, points := range []int64{-1, 0} {
		for _, explicit := range []bool{false, true} {
			name := fmt.Sprintf("points=%s/roll=%s", map[bool]string{true: "off", false: "default"}[points < 0],
				map[bool]string{true: "explicit", false: "append"}[explicit])
			b.Run(name, func(b *testing.B) {
				benchAppendRolls(b, batch, Options{SegmentBytes: 1 << 20, RecoveryPointIntervalBytes: points}, explicit)
			})
		}
	}
}

func benchAppendRolls(b *testing.B, batch []byte, o Options, explicit bool) {
	l := benchLog(b, b.TempDir(), o)
	defer l.Close()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		info, err := l.AppendAsLeader(batch, 0, OriginClient)
		if err != nil {
			b.Fatal(err)
		}
		if explicit && i%60 == 59 { // before the segment is full
			if err := l.Roll(); err != nil {
				b.Fatal(err)
			}
		}
		if (info.LastOffset+1)%8192 == 0 { // keep the disk bounded
			l.UpdateHighWatermark(l.LogEndOffset())
			if _, err := l.DeleteOldSegments(); err != nil {
				b.Fatal(err)
			}
		}
		mustBatch(b, batch).SetBaseOffset(0)
	}
	b.StopTimer()
	b.ReportMetric(float64(l.Metrics().Rolls)/b.Elapsed().Seconds(), "rolls/s")
}
