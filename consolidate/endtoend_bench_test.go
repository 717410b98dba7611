package consolidate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// BenchmarkEndToEnd measures how long a record produced through the WAL
// takes to become readable in the consolidated local log: from the
// produce acknowledgement (wal.Writer.Produce returns, the object is
// committed) to the moment the local log's high watermark passes the
// batch's last offset (the fetcher appended it and moved the high
// watermark; a consumer of the local log can read it).
//
// Everything runs on the embedded defaults, on disk: the fs object store
// (with fsync), the Pebble control plane and remote metadata on
// vfs.Default, the local log on vfs.Default, one fetcher worker polling
// with the system clock. Eight producers produce one 1 KiB batch each per
// iteration, each waiting for its acknowledgement (closed loop).
//
// The sub-benchmarks differ in the two waits on the path: the writer's
// commit interval (how long an object lingers before upload and commit)
// and the fetcher's idle interval (how long a caught-up partition waits
// before polling the WAL again). Reported: p50 and p99 of the delay
// (visible-p50-ms, visible-p99-ms) and, for comparison, of the produce
// latency itself (ack-p50-ms, ack-p99-ms). Run with a fixed count, e.g.
// -benchtime 200x: each iteration of the default intervals waits for a
// commit.
func BenchmarkEndToEnd(b *testing.B) {
	for _, c := range []struct {
		name           string
		commitInterval time.Duration
		idleInterval   time.Duration
	}{
		{"intervals=default", 0, 0},
		{"intervals=short", 5 * time.Millisecond, 5 * time.Millisecond},
	} {
		commit := cmpOr(c.commitInterval, 250*time.Millisecond)
		idle := cmpOr(c.idleInterval, DefaultFetcherIdleInterval)
		b.Run(fmt.Sprintf("%s/commit=%v/idle=%v", c.name, commit, idle), func(b *testing.B) {
			benchmarkEndToEnd(b, c.commitInterval, c.idleInterval)
		})
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

const endToEndProducers = 8

// produced is one acknowledged batch: its last offset and when its
// producer learned it was committed.
type produced struct {
	lastOffset  int64
	sent, acked time.Time
}

func benchmarkEndToEnd(b *testing.B, commitInterval, idleInterval time.Duration) {
	ctx := context.Background()
	dir := b.TempDir()
	store, err := fs.Open(filepath.Join(dir, "objects"), fs.Options{})
	require.NoError(b, err)
	cp, err := pebblecp.Open(vfs.Default, filepath.Join(dir, "control-plane"), pebblecp.Options{})
	require.NoError(b, err)
	defer func() { _ = cp.Close() }()
	meta, err := remote.Open(vfs.Default, filepath.Join(dir, "remote-metadata"), remote.MetadataOptions{})
	require.NoError(b, err)
	defer func() { _ = meta.Close() }()
	w, err := wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, CommitInterval: commitInterval})
	require.NoError(b, err)
	defer func() { _ = w.Close() }()
	reader, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: cp})
	require.NoError(b, err)

	tp := remote.TopicIDPartition{TopicID: testTopic, Topic: "orders", Partition: 0}
	require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(tp).TopicID, Topic: tp.Topic, NumPartitions: 1}}))
	l, err := log.Open(filepath.Join(dir, "log"), log.Options{FS: vfs.Default})
	require.NoError(b, err)
	defer func() { _ = l.Close() }()
	obs := &observedLog{UnifiedLog: l}
	born := tierstate.State{}.WithConsolidating(true)
	parts := &partitionMap{m: map[remote.TopicIDPartition]partitionEntry{}}
	parts.set(tp, born, l)
	ep, err := NewEndpoint(EndpointOptions{ControlPlane: cp, WAL: reader, Remote: meta, Partitions: parts})
	require.NoError(b, err)
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: meta, Data: checkpointData{}})
	require.NoError(b, err)
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: m, IdleInterval: idleInterval})
	require.NoError(b, err)
	require.NoError(b, f.Add(FetcherPartition{Partition: tp, Log: obs, State: born}))
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- f.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			b.Error(err)
		}
	}()

	batch := endToEndBatch(b)
	var (
		next int64
		mu   sync.Mutex
		acks []produced
		wg   sync.WaitGroup
		fail atomic.Pointer[error]
	)
	b.ResetTimer()
	for range endToEndProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bytes.Clone(batch)
			for atomic.AddInt64(&next, 1) <= int64(b.N) {
				sent := time.Now()
				res, err := w.Produce(ctx, []wal.ProduceRequest{{Partition: walTP(tp), Batches: buf}})
				acked := time.Now()
				if err == nil {
					err = res[0].Err
				}
				if err == nil {
					err = res[0].Batches[0].Err
				}
				if err != nil {
					fail.Store(&err)
					return
				}
				mu.Lock()
				acks = append(acks, produced{lastOffset: res[0].Batches[0].BaseOffset + endToEndRecords - 1, sent: sent, acked: acked})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := fail.Load(); err != nil {
		b.Fatal(*err)
	}
	last := slices.MaxFunc(acks, func(x, y produced) int { return int(x.lastOffset - y.lastOffset) }).lastOffset
	deadline := time.Now().Add(30 * time.Second)
	for obs.highWatermark() <= last {
		if time.Now().After(deadline) {
			b.Fatalf("high watermark %d after 30s, last produced offset %d (fetcher failed: %v)", obs.highWatermark(), last, f.Failed(tp))
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()

	visible := make([]time.Duration, len(acks))
	ack := make([]time.Duration, len(acks))
	for i, a := range acks {
		// A fetch may serve a batch between its commit and the moment
		// its producer's goroutine runs again: visible before the ack,
		// counted as no delay.
		visible[i] = max(0, obs.visibleAt(a.lastOffset).Sub(a.acked))
		ack[i] = a.acked.Sub(a.sent)
	}
	reportPercentiles(b, "visible", visible)
	reportPercentiles(b, "ack", ack)
}

const endToEndRecords = 8

// endToEndBatch is one client batch of endToEndRecords records of 128
// bytes.
func endToEndBatch(b *testing.B) []byte {
	bld := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range endToEndRecords {
		bld.Add(int64(1000+i), nil, bytes.Repeat([]byte{'e'}, 128))
	}
	buf, err := bld.Build()
	require.NoError(b, err)
	return buf
}

// reportPercentiles reports the nearest-rank p50 and p99 of ds in ms.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(rank(0.50)), name+"-p50-ms")
	b.ReportMetric(ms(rank(0.99)), name+"-p99-ms")
}

// observedLog is a local log that records when its high watermark moves:
// the fetcher sets it after every append (and after an empty fetch).
type observedLog struct {
	*log.UnifiedLog
	mu     sync.Mutex
	events []hwEvent // strictly increasing hw
}

type hwEvent struct {
	hw int64
	at time.Time
}

func (o *observedLog) UpdateHighWatermark(hw int64) int64 {
	got := o.UnifiedLog.UpdateHighWatermark(hw)
	at := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.events); n == 0 || got > o.events[n-1].hw {
		o.events = append(o.events, hwEvent{hw: got, at: at})
	}
	return got
}

func (o *observedLog) highWatermark() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.events) == 0 {
		return 0
	}
	return o.events[len(o.events)-1].hw
}

// visibleAt returns when the high watermark first passed offset.
func (o *observedLog) visibleAt(offset int64) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.events), func(i int) bool { return o.events[i].hw > offset })
	if i == len(o.events) {
		return time.Time{}
	}
	return o.events[i].at
}
