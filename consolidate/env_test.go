package consolidate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// walEnv is a switched partition on mem: a mem object store, a Pebble
// control plane and remote metadata on vfs.NewMem, a wal.Writer and a
// wal.Reader, and a partition source the test edits.
type walEnv struct {
	t      testing.TB
	ctx    context.Context
	fs     vfs.FS
	store  *mem.Mem
	cp     *pebblecp.ControlPlane
	meta   *remote.MetadataManager
	writer *wal.Writer
	reader *wal.Reader
	tp     remote.TopicIDPartition
	parts  *partitionMap
	xs     *crossTierMap
}

var testTopic = remote.UUID{0xC0, 0x50, 1}

func newWALEnv(t testing.TB) *walEnv { return newWALEnvOn(t, nil) }

// newWALEnvOn is newWALEnv with the control plane on cpFS (nil: on the
// environment's vfs.NewMem).
func newWALEnvOn(t testing.TB, cpFS vfs.FS) *walEnv { return newWALEnvOnFS(t, cpFS, nil) }

// newWALEnvOnFS is newWALEnv with the control plane on cpFS and the
// remote metadata on metaFS (nil: on the environment's vfs.NewMem).
func newWALEnvOnFS(t testing.TB, cpFS, metaFS vfs.FS) *walEnv {
	t.Helper()
	e := &walEnv{t: t, ctx: context.Background(), fs: vfs.NewMem(), store: mem.New(mem.Options{}),
		tp:    remote.TopicIDPartition{TopicID: testTopic, Topic: "orders", Partition: 0},
		parts: &partitionMap{m: map[remote.TopicIDPartition]partitionEntry{}}, xs: &crossTierMap{m: map[remote.TopicIDPartition]int64{}}}
	if cpFS == nil {
		cpFS = e.fs
	}
	cp, err := pebblecp.Open(cpFS, "cp", pebblecp.Options{})
	require.NoError(t, err)
	e.cp = cp
	t.Cleanup(func() { _ = cp.Close() })
	if metaFS == nil {
		metaFS = e.fs
	}
	meta, err := remote.Open(metaFS, "meta", remote.MetadataOptions{})
	require.NoError(t, err)
	e.meta = meta
	t.Cleanup(func() { _ = meta.Close() })
	e.writer, err = wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: cp, CommitInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.writer.Close() })
	e.reader, err = wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: cp})
	require.NoError(t, err)
	return e
}

// committedSeal is a consolidating partition's state with its seal
// committed at seal (phase 1) with the producer states producers; no WAL
// row is written.
func committedSeal(t testing.TB, seal int64, producers []tierstate.ProducerStateEntry) tierstate.State {
	t.Helper()
	s, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(seal, producers)
	require.NoError(t, err)
	return s
}

// switchAt initialises the WAL row of the switched partition (W = the
// classic log start, HW = S = seal) and returns the phase-2 state with
// recorded epoch r, leader epoch 4 (E_d = 5).
func (e *walEnv) switchAt(logStart, seal int64, r int32) tierstate.State {
	e.t.Helper()
	res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: walTP(e.tp), Topic: e.tp.Topic,
		LogStartOffset: logStart, DisklessStartOffset: seal}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	s, err := committedSeal(e.t, seal, nil).SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: seal, LastClassicLeaderEpoch: r},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
	require.NoError(e.t, err)
	return s
}

// produce writes one client batch of n records "<prefix>-<i>" through the
// WAL writer and returns its base offset.
func (e *walEnv) produce(n int, prefix string) int64 {
	e.t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(int64(1000+i), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	buf, err := b.Build()
	require.NoError(e.t, err)
	res, err := e.writer.Produce(e.ctx, []wal.ProduceRequest{{Partition: walTP(e.tp), Batches: buf}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	require.NoError(e.t, res[0].Batches[0].Err)
	return res[0].Batches[0].BaseOffset
}

// addSegment records a finished remote segment [start, end] with epochs.
func (e *walEnv) addSegment(start, end int64, epochs ...epochcache.Entry) remote.SegmentMetadata {
	e.t.Helper()
	seg := remote.SegmentMetadata{SegmentID: remote.NewSegmentID(e.tp), StartOffset: start, EndOffset: end,
		SegmentLeaderEpochs: epochs, SizeBytes: 100, State: remote.CopySegmentStarted, TxnIndexEmpty: true}
	require.NoError(e.t, e.meta.AddSegment(e.ctx, seg))
	require.NoError(e.t, e.meta.UpdateSegment(e.ctx, remote.SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: remote.CopySegmentFinished}))
	seg.State = remote.CopySegmentFinished
	return seg
}

// openLog opens an empty tiered local log.
func (e *walEnv) openLog(dir string) *log.UnifiedLog {
	e.t.Helper()
	l, err := log.Open(dir, log.Options{FS: e.fs, RemoteStorageEnabled: true, SegmentBytes: 1 << 20})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = l.Close() })
	return l
}

func (e *walEnv) endpoint(opts EndpointOptions) *Endpoint {
	e.t.Helper()
	opts.ControlPlane, opts.WAL, opts.Remote, opts.Partitions = e.cp, e.reader, e.meta, e.parts
	if opts.CrossTier == nil {
		opts.CrossTier = e.xs
	}
	ep, err := NewEndpoint(opts)
	require.NoError(e.t, err)
	return ep
}

type partitionEntry struct {
	state tierstate.State
	local LocalLog
}

// partitionMap is a PartitionSource the test edits.
type partitionMap struct {
	mu sync.Mutex
	m  map[remote.TopicIDPartition]partitionEntry
}

func (p *partitionMap) set(tp remote.TopicIDPartition, s tierstate.State, l LocalLog) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[tp] = partitionEntry{s, l}
}

func (p *partitionMap) Partition(tp remote.TopicIDPartition) (tierstate.State, LocalLog, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[tp]
	return e.state, e.local, ok
}

// crossTierMap is a remote.ConsolidationState the test edits.
type crossTierMap struct {
	mu sync.Mutex
	m  map[remote.TopicIDPartition]int64
}

func (c *crossTierMap) set(tp remote.TopicIDPartition, x int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[tp] = x
}

func (c *crossTierMap) CrossTierLogStart(tp remote.TopicIDPartition) (bool, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x, ok := c.m[tp]
	return true, x, ok
}

// values decodes "offset:value" of every record in buf.
func values(t testing.TB, buf []byte) []string {
	t.Helper()
	var out []string
	s := record.NewScanner(buf, record.ScannerOptions{})
	it := record.NewIter(record.IterOptions{})
	for s.Next() {
		b := s.Batch()
		it.Reset(b)
		for it.Next() {
			r := it.Record()
			out = append(out, fmt.Sprintf("%d:%s", b.BaseOffset()+int64(r.OffsetDelta), r.Value))
		}
		require.NoError(t, it.Err())
	}
	require.NoError(t, s.Err())
	return out
}
