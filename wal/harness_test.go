package wal_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// fakeClock is a manual Clock: timers fire, synchronously, only in Advance
// (but see fireAtOnceBelow).
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// fireAtOnceBelow, if set, makes timers shorter than it fire at once
	// in their own goroutine, without moving the clock: for tests whose
	// upload retries should not wait for an Advance.
	fireAtOnceBelow time.Duration
}

type fakeTimer struct {
	c       *fakeClock
	d       time.Duration
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) wal.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, d: d, at: c.now.Add(d), f: f}
	if d < c.fireAtOnceBelow {
		t.stopped = true
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// pending returns the durations of the timers not yet fired or stopped,
// in creation order.
func (c *fakeClock) pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t.d)
		}
	}
	return out
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock and runs the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// waitUntil yields until cond holds; a broken cond hangs the test until
// go test's own timeout, never a time threshold of ours.
func waitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// env is a mem store, a Pebble control plane on a mem FS and one topic.
type env struct {
	t     *testing.T
	ctx   context.Context
	store *mem.Mem
	cp    *pebblecp.ControlPlane
	clock *fakeClock
	topic wal.TopicID
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), store: mem.New(mem.Options{}), clock: newFakeClock(), topic: wal.TopicID{0xAB, 1}}
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{Now: e.clock.Now})
	require.NoError(t, err)
	e.cp = cp
	t.Cleanup(func() { _ = cp.Close() })
	require.NoError(t, cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: e.topic, Topic: "orders", NumPartitions: partitions}}))
	return e
}

func (e *env) tp(p int32) wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: e.topic, Partition: p}
}

// writer starts a Writer on the env; opts' Store, ControlPlane and Clock
// default to the env's.
func (e *env) writer(opts wal.WriterOptions) *wal.Writer {
	e.t.Helper()
	if opts.Store == nil {
		opts.Store = e.store
	}
	if opts.ControlPlane == nil {
		opts.ControlPlane = e.cp
	}
	if opts.Clock == nil {
		opts.Clock = e.clock
	}
	w, err := wal.NewWriter(opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = w.Close() })
	return w
}

// batch builds a client batch of n records with values "<prefix>-<i>".
func batch(t testing.TB, n int, prefix string) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(int64(1000+i), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

type produced struct {
	res []wal.ProduceResult
	err error
}

// produceAsync runs Produce in a goroutine.
func produceAsync(ctx context.Context, w *wal.Writer, reqs ...wal.ProduceRequest) <-chan produced {
	ch := make(chan produced, 1)
	go func() {
		res, err := w.Produce(ctx, reqs)
		ch <- produced{res, err}
	}()
	return ch
}

// values decodes the record values of a fetched partition's bytes, with
// each record's offset: "offset:value".
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

// gatedStore blocks the Put of chosen keys until their gate is opened.
type gatedStore struct {
	objstore.Store
	mu      sync.Mutex
	puts    int
	gates   map[int]chan struct{} // by Put number, from 1
	started map[int]bool
}

func newGatedStore(s objstore.Store, puts ...int) *gatedStore {
	g := &gatedStore{Store: s, gates: map[int]chan struct{}{}, started: map[int]bool{}}
	for _, n := range puts {
		g.gates[n] = make(chan struct{})
	}
	return g
}

func (g *gatedStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	g.mu.Lock()
	g.puts++
	n := g.puts
	gate := g.gates[n]
	g.started[n] = true
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Store.Put(ctx, key, r, size, opts)
}

func (g *gatedStore) open(n int) { close(g.gates[n]) }

func (g *gatedStore) putsStarted() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.puts
}

// faultCP wraps a control plane; commit, if set, replaces CommitFile.
type faultCP struct {
	wal.ControlPlane
	mu      sync.Mutex
	commits []string // keys of CommitFile calls, in call order
	commit  func(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error)
}

func (f *faultCP) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	f.mu.Lock()
	f.commits = append(f.commits, req.ObjectKey)
	hook := f.commit
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, req)
	}
	return f.ControlPlane.CommitFile(ctx, req)
}

// CommitFiles goes through CommitFile, one request after the other.
func (f *faultCP) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	return wal.CommitEach(ctx, f, reqs)
}

func (f *faultCP) commitKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.commits...)
}
