// Package mem is an in-memory objstore.Store for tests, with seeded fault
// injection per operation kind: injected errors, latency that honours the
// context, truncated Get bodies (honest ones that fail with
// objstore.ErrShortRead, and lying ones that end early with a clean
// io.EOF), and lost responses (the Put or Delete takes effect, the call
// still fails). Counters record calls and injected faults per operation.
//
// # Determinism
//
// Faults are drawn from one math/rand/v2 PCG source seeded by
// Options.Seed. The same seed, configuration and sequence of calls give
// the same faults; concurrent callers draw in the order they reach the
// source.
//
// # Concurrency
//
// A Mem is safe for concurrent use. Lock order: Mem.mu and Mem.faults.mu
// are leaves, never held together, and never held while sleeping for
// injected latency or while reading a caller's io.Reader.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierlog/tierlog/remote/objstore"
)

// Errors of injected faults, wrapped in an *objstore.OpError.
var (
	// ErrInjected is the cause of every injected failure.
	ErrInjected = errors.New("mem: injected fault")
	// ErrLostResponse is an injected failure after the operation took
	// effect: the object was stored (Put) or removed (Delete), but the
	// caller is told it failed. errors.Is(err, ErrInjected) holds.
	ErrLostResponse = fmt.Errorf("%w: lost response (the operation took effect)", ErrInjected)
)

// Options configure a Mem. The zero value is a store without faults.
type Options struct {
	// Seed seeds the fault source. Default 0 (itself a fixed seed).
	Seed uint64
	// Faults is the initial fault configuration; SetFaults changes it.
	Faults FaultConfig
	// Now is the clock for ObjectInfo.ModTime. Default time.Now.
	Now func() time.Time
}

// FaultConfig holds the faults of each operation kind. PutMultipart uses
// Put's.
type FaultConfig struct {
	Put, Get, Stat, List, Delete Faults
}

// Faults configures the faults of one operation kind. Rates are
// probabilities in [0, 1], drawn independently per call; zero disables.
type Faults struct {
	// ErrorRate: the call fails with ErrInjected before taking effect.
	ErrorRate float64
	// LostResponseRate (Put, Delete): the call takes effect, then fails
	// with ErrLostResponse.
	LostResponseRate float64
	// Latency is added to every call before it takes effect, plus a
	// uniform random part in [0, LatencyJitter). A context that ends
	// during the wait ends the call with the context's error; the wait
	// never outlasts ctx.
	Latency, LatencyJitter time.Duration
	// TruncateRate (Get): the body ends after a random prefix of a
	// non-empty range and fails with objstore.ErrShortRead, as a store
	// that checks the length reports a connection cut mid-body.
	TruncateRate float64
	// LieRate (Get): the body ends after a random prefix of a non-empty
	// range with a clean io.EOF: a server that closes early without an
	// error and an adapter that fails to notice. Only a caller-side
	// check (objstore.ReadRange) catches it.
	LieRate float64
}

// Counts are the calls and injected faults per operation kind.
type Counts struct {
	Put, Get, Stat, List, Delete OpCounts
	// OpenBodies is the number of Get bodies not yet closed: a test can
	// check that callers close what they open.
	OpenBodies int64
}

// OpCounts counts the calls of one operation kind and the faults injected
// into them.
type OpCounts struct {
	Calls           int64 // every call, including failed and invalid ones
	InjectedErrors  int64 // ErrorRate hits
	LostResponses   int64 // LostResponseRate hits
	TruncatedBodies int64 // TruncateRate hits
	LyingBodies     int64 // LieRate hits
}

type opKind int

const (
	opPut opKind = iota
	opGet
	opStat
	opList
	opDelete
	numOps
)

type opCounters struct {
	calls, injected, lost, truncated, lies atomic.Int64
}

type object struct {
	data    []byte // never modified after the Put that stored it
	modTime time.Time
}

// Mem is the in-memory store.
type Mem struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		objects map[string]object
		closed  bool
	}

	faults struct {
		sync.Mutex
		rng    *rand.Rand
		config FaultConfig
	}

	counts     [numOps]opCounters
	openBodies atomic.Int64
}

var (
	_ objstore.Store          = (*Mem)(nil)
	_ objstore.MultipartStore = (*Mem)(nil)
)

// New returns an empty store.
func New(opts Options) *Mem {
	m := &Mem{now: opts.Now}
	if m.now == nil {
		m.now = time.Now
	}
	m.mu.objects = make(map[string]object)
	m.faults.rng = rand.New(rand.NewPCG(opts.Seed, 0x746965726c6f67)) // "tierlog"
	m.faults.config = opts.Faults
	return m
}

// SetFaults replaces the fault configuration for later calls.
func (m *Mem) SetFaults(c FaultConfig) {
	m.faults.Lock()
	defer m.faults.Unlock()
	m.faults.config = c
}

// Counts returns the counters.
func (m *Mem) Counts() Counts {
	get := func(k opKind) OpCounts {
		c := &m.counts[k]
		return OpCounts{
			Calls:           c.calls.Load(),
			InjectedErrors:  c.injected.Load(),
			LostResponses:   c.lost.Load(),
			TruncatedBodies: c.truncated.Load(),
			LyingBodies:     c.lies.Load(),
		}
	}
	return Counts{
		Put: get(opPut), Get: get(opGet), Stat: get(opStat), List: get(opList), Delete: get(opDelete),
		OpenBodies: m.openBodies.Load(),
	}
}

// Keys returns every stored key, sorted; for tests.
func (m *Mem) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.mu.objects))
}

// Close makes every later call fail with objstore.ErrClosed. The objects
// are dropped.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	m.mu.objects = nil
	return nil
}

// draw is the outcome of the fault draws of one call, made up front in a
// fixed order so that a seed gives the same faults for the same calls.
type draw struct {
	latency   time.Duration
	fail      bool
	lost      bool
	truncate  bool
	lie       bool
	cutAtFrac float64 // where a truncated or lying body ends, in [0, 1)
}

func (m *Mem) drawFaults(k opKind) draw {
	m.faults.Lock()
	defer m.faults.Unlock()
	var f Faults
	switch k {
	case opPut:
		f = m.faults.config.Put
	case opGet:
		f = m.faults.config.Get
	case opStat:
		f = m.faults.config.Stat
	case opList:
		f = m.faults.config.List
	case opDelete:
		f = m.faults.config.Delete
	}
	rng := m.faults.rng
	hit := func(rate float64) bool { return rate > 0 && rng.Float64() < rate }
	d := draw{latency: f.Latency}
	if f.LatencyJitter > 0 {
		d.latency += time.Duration(rng.Int64N(int64(f.LatencyJitter)))
	}
	d.fail = hit(f.ErrorRate)
	d.lost = hit(f.LostResponseRate)
	d.truncate = hit(f.TruncateRate)
	d.lie = hit(f.LieRate)
	if d.truncate || d.lie {
		d.cutAtFrac = rng.Float64()
	}
	return d
}

// begin runs the common prologue of a call: count it, check the context
// and Close, draw faults, wait the latency, inject an error.
func (m *Mem) begin(ctx context.Context, k opKind) (draw, error) {
	c := &m.counts[k]
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return draw{}, err
	}
	if m.isClosed() {
		return draw{}, objstore.ErrClosed
	}
	d := m.drawFaults(k)
	if d.latency > 0 {
		t := time.NewTimer(d.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return draw{}, ctx.Err()
		}
	}
	if d.fail {
		c.injected.Add(1)
		return draw{}, ErrInjected
	}
	return d, nil
}

// lostResponse returns ErrLostResponse when the draw says so, after the
// operation took effect.
func (m *Mem) lostResponse(k opKind, d draw) error {
	if d.lost {
		m.counts[k].lost.Add(1)
		return ErrLostResponse
	}
	return nil
}

func (m *Mem) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.closed
}

// Put implements objstore.Store.
func (m *Mem) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	return objstore.NewOpError(objstore.OpPut, key, m.put(ctx, key, r, size, opts))
}

func (m *Mem) put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		m.counts[opPut].calls.Add(1)
		return err
	}
	if size < 0 {
		m.counts[opPut].calls.Add(1)
		return fmt.Errorf("%w: size %d", objstore.ErrInvalidArgument, size)
	}
	d, err := m.begin(ctx, opPut)
	if err != nil {
		return err
	}
	// Read the body before taking the lock: the reader is the caller's
	// and may block.
	data := make([]byte, size)
	if _, err := io.ReadFull(objstore.NewExactReader(ctx, r, size), data); err != nil {
		return err
	}
	if err := checkEnd(ctx, r); err != nil {
		return err
	}
	return m.commit(ctx, key, data, opts, d)
}

// checkEnd makes sure r holds no more bytes than the declared size.
func checkEnd(ctx context.Context, r io.Reader) error {
	_, err := io.Copy(io.Discard, objstore.NewExactReader(ctx, r, 0))
	return err
}

// commit stores data under key: the linearization point of a Put.
func (m *Mem) commit(ctx context.Context, key string, data []byte, opts objstore.PutOptions, d draw) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	switch {
	case m.mu.closed:
		m.mu.Unlock()
		return objstore.ErrClosed
	case opts.IfNoneMatch:
		if _, ok := m.mu.objects[key]; ok {
			m.mu.Unlock()
			return objstore.ErrPreconditionFailed
		}
	}
	m.mu.objects[key] = object{data: data, modTime: m.now()}
	m.mu.Unlock()
	return m.lostResponse(opPut, d)
}

// PutMultipart implements objstore.MultipartStore: it reads the parts
// concurrently and stores the object at once. Faults and counts are
// Put's.
func (m *Mem) PutMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, opts objstore.MultipartOptions) error {
	return objstore.NewOpError(objstore.OpPutMultipart, key, m.putMultipart(ctx, key, r, size, opts))
}

func (m *Mem) putMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, opts objstore.MultipartOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		m.counts[opPut].calls.Add(1)
		return err
	}
	if size < 0 || opts.PartBytes < 0 || opts.Concurrency < 0 {
		m.counts[opPut].calls.Add(1)
		return fmt.Errorf("%w: size %d, part bytes %d, concurrency %d",
			objstore.ErrInvalidArgument, size, opts.PartBytes, opts.Concurrency)
	}
	partBytes := cmp(opts.PartBytes, 5<<20)
	concurrency := int(cmp(int64(opts.Concurrency), 4))
	d, err := m.begin(ctx, opPut)
	if err != nil {
		return err
	}
	data := make([]byte, size)
	parts := make(chan int64)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for off := range parts {
				end := min(off+partBytes, size)
				_, err := io.ReadFull(objstore.NewExactReader(ctx, io.NewSectionReader(r, off, end-off), end-off), data[off:end])
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var sendErr error
send:
	for off := int64(0); off < size; off += partBytes {
		select {
		case parts <- off:
		case sendErr = <-errs:
			break send
		}
	}
	close(parts)
	wg.Wait()
	close(errs)
	if sendErr != nil {
		return sendErr
	}
	if err := <-errs; err != nil {
		return err
	}
	return m.commit(ctx, key, data, opts.PutOptions, d)
}

func cmp(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// Get implements objstore.Store.
func (m *Mem) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	body, err := m.get(ctx, key, offset, length)
	if err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	return body, nil
}

func (m *Mem) get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objstore.ValidateKey(key); err != nil {
		m.counts[opGet].calls.Add(1)
		return nil, err
	}
	if err := objstore.ValidateRangeArgs(offset, length); err != nil {
		m.counts[opGet].calls.Add(1)
		return nil, err
	}
	d, err := m.begin(ctx, opGet)
	if err != nil {
		return nil, err
	}
	o, err := m.lookup(key)
	if err != nil {
		return nil, err
	}
	n, err := objstore.ValidateRange(offset, length, int64(len(o.data)))
	if err != nil {
		return nil, err
	}
	want := o.data[offset : offset+n]
	c := &m.counts[opGet]
	var r io.Reader
	switch cut := int64(d.cutAtFrac * float64(n)); {
	case d.truncate && n > 0:
		c.truncated.Add(1)
		r = objstore.NewExactReader(ctx, bytes.NewReader(want[:cut]), n)
	case d.lie && n > 0:
		c.lies.Add(1)
		r = bytes.NewReader(want[:cut]) // ends early with a clean io.EOF
	default:
		r = objstore.NewExactReader(ctx, bytes.NewReader(want), n)
	}
	m.openBodies.Add(1)
	return &body{r: r, m: m}, nil
}

// body is a Get body; Read after Close fails.
type body struct {
	r      io.Reader
	m      *Mem
	closed bool
}

var errBodyClosed = errors.New("mem: read of a closed body")

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errBodyClosed
	}
	return b.r.Read(p)
}

func (b *body) Close() error {
	if !b.closed {
		b.closed = true
		b.m.openBodies.Add(-1)
	}
	return nil
}

func (m *Mem) lookup(key string) (object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return object{}, objstore.ErrClosed
	}
	o, ok := m.mu.objects[key]
	if !ok {
		return object{}, objstore.ErrNotExist
	}
	return o, nil
}

// Stat implements objstore.Store.
func (m *Mem) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := m.stat(ctx, key)
	return info, objstore.NewOpError(objstore.OpStat, key, err)
}

func (m *Mem) stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		m.counts[opStat].calls.Add(1)
		return objstore.ObjectInfo{}, err
	}
	if _, err := m.begin(ctx, opStat); err != nil {
		return objstore.ObjectInfo{}, err
	}
	o, err := m.lookup(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

// List implements objstore.Store.
func (m *Mem) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	page, next, err := m.list(ctx, prefix, startAfter, limit)
	if err != nil {
		return nil, "", objstore.NewOpError(objstore.OpList, prefix, err)
	}
	return page, next, nil
}

func (m *Mem) list(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		m.counts[opList].calls.Add(1)
		return nil, "", err
	}
	if limit <= 0 {
		limit = objstore.DefaultListLimit
	}
	if _, err := m.begin(ctx, opList); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil, "", objstore.ErrClosed
	}
	var all []objstore.ObjectInfo
	for k, o := range m.mu.objects {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			all = append(all, objstore.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(all, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit:limit]
	return page, page[limit-1].Key, nil
}

// Delete implements objstore.Store.
func (m *Mem) Delete(ctx context.Context, key string) error {
	return objstore.NewOpError(objstore.OpDelete, key, m.delete(ctx, key))
}

func (m *Mem) delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		m.counts[opDelete].calls.Add(1)
		return err
	}
	d, err := m.begin(ctx, opDelete)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return objstore.ErrClosed
	}
	delete(m.mu.objects, key)
	m.mu.Unlock()
	return m.lostResponse(opDelete, d)
}
