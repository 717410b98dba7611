package tierstate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// BenchmarkRebuild measures one upstream rebuild (source answers, segment
// lookup, epoch checkpoint and producer snapshot reads, the crash-atomic
// restore of the local log on vfs.NewMem) against the number of finished
// remote segments of the partition: 10, 1,000 and 100,000 (skipped with
// -short: the setup writes 200,000 synced metadata commits). The segments
// hold 100 offsets each in 10 leader epochs whatever their number, so the
// epoch checkpoint restored stays the same size and only the metadata
// store grows. The rebuild targets the last segment; the same log is
// rebuilt in every iteration. The setup is not timed.
//
// The cost must stay flat: the lookup is a map access and binary searches
// in the metadata's memory index, and nothing else depends on the segment
// count.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			if n > 1_000 && testing.Short() {
				b.Skip("-short")
			}
			benchmarkRebuild(b, n)
		})
	}
}

func benchmarkRebuild(b *testing.B, n int) {
	ctx := context.Background()
	fs := vfs.NewMem()
	metaOpts := remote.MetadataOptions{PebbleOptions: &pebble.Options{MemTableSize: 8 << 20}}
	meta, err := remote.Open(fs, "meta", metaOpts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = meta.Close() }()
	const perSegment, epochs = 100, 10
	epochOf := func(i int) int32 { return int32(i * epochs / n) }
	var checkpoint []epochcache.Entry
	data := newFakeData()
	snapshot := producerSnapshot(b, 7, 8, 9)
	var last remote.SegmentMetadata
	for i := range n {
		start := int64(i) * perSegment
		if i == 0 || epochOf(i) != epochOf(i-1) {
			checkpoint = append(checkpoint, epochcache.Entry{Epoch: epochOf(i), StartOffset: start})
		}
		seg := remote.SegmentMetadata{SegmentID: remote.NewSegmentID(testTP), StartOffset: start,
			EndOffset: start + perSegment - 1, SegmentLeaderEpochs: []epochcache.Entry{{Epoch: epochOf(i), StartOffset: start}},
			SizeBytes: 1 << 20, MaxTimestampMs: testNowMs, EventTimestampMs: testNowMs, TxnIndexEmpty: true}
		if err := meta.RegisterCopiedSegment(ctx, seg); err != nil {
			b.Fatal(err)
		}
		last = seg
	}
	data.segments[last.SegmentID.ID] = fakeSegment{epochs: checkpoint, snapshot: snapshot}
	// Reopened, as a broker starts: the lookups run on the index Open
	// rebuilt, and no flush or compaction of the writes above runs in
	// the background of the timed loop.
	if err := meta.Close(); err != nil {
		b.Fatal(err)
	}
	if meta, err = remote.Open(fs, "meta", metaOpts); err != nil {
		b.Fatal(err)
	}

	// The source's local log starts right after the last remote segment,
	// in a new epoch: the rebuild asks OffsetsForLeaderEpoch too.
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: last.EndOffset + 1, Epoch: epochs}
	if err := leader.cache.AssignAll(append(checkpoint, epochcache.Entry{Epoch: epochs, StartOffset: last.EndOffset + 1})); err != nil {
		b.Fatal(err)
	}
	leader.leo = last.EndOffset + 1000
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: meta, Data: data})
	if err != nil {
		b.Fatal(err)
	}
	l, err := log.Open("p0", log.Options{FS: fs, RemoteStorageEnabled: true, SegmentIndexBytes: 4096,
		Now: func() time.Time { return time.UnixMilli(testNowMs) }})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	req := RebuildRequest{Partition: testTP, Log: l, LeaderLogStartOffset: 0}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	// p50-ns is the median rebuild, less sensitive than ns/op to other
	// load on the machine.
	samples := make([]time.Duration, 0, min(b.N, 1<<20))
	for i := 0; i < b.N; i++ {
		leader.calls, data.calls = leader.calls[:0], data.calls[:0]
		t0 := time.Now()
		res, err := m.Rebuild(ctx, req)
		if len(samples) < cap(samples) {
			samples = append(samples, time.Since(t0))
		}
		if err != nil {
			b.Fatal(err)
		}
		if res.NextOffset != last.EndOffset+1 {
			b.Fatalf("next offset %d, want %d", res.NextOffset, last.EndOffset+1)
		}
	}
	b.StopTimer()
	slices.Sort(samples)
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	}
}
