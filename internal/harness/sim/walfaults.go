package sim

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// Hostile answers on the WAL's read path. The object store and the
// control plane of a real deployment can answer a read wrongly without
// failing it:
//
//   - the store returns other bytes for a WAL object's key: a flipped bit
//     (a bad disk or NIC under a store without end-to-end checksums), an
//     object shorter than committed (a truncated upload a buggy proxy
//     acknowledged; the store's Stat agrees with the short object),
//     another object's bytes at the same range (a cache or gateway keyed
//     wrongly, or two clusters sharing a bucket and prefix), or an object
//     replaced under its key by a different one;
//   - the control plane answers FindBatches from a stale read replica (a
//     PostgreSQL hot standby behind the primary: a shorter answer with a
//     lower high watermark), or a buggy one misses a row in the middle of
//     the answer or returns two rows out of order.
//
// The wal.Reader must refuse every one of them (a typed error, or the
// good prefix before it), and consolidation and consumers must then be
// served exactly the committed records. Each fault is drawn, like the
// Put and Delete faults of faultStore, from (seed, operation, call count
// of that operation), so one seed gives one run. The faults are
// transient: with their rate back at 0 every read is answered rightly.
//
// Left out: a missing first row. An answer whose first batch starts past
// the requested offset is what FindBatchesResult documents for the
// offsets between a capped prune's W and the first batch, so the reader
// cannot tell it from a skipped batch; the consolidation fetcher refuses
// it (appendablePrefix) except at the seal.
type walFaults struct {
	seed uint64
	mu   struct {
		sync.Mutex
		// readRate is the probability of a fault per GET of a WAL
		// object, planeRate per partition of a FindBatches answer with
		// two batches or more.
		readRate, planeRate float64
		calls               map[string]uint64
		// walKeys are the WAL objects in the order their Puts took
		// effect (the writer uploads one at a time), so "another
		// object" never depends on the random key names.
		walKeys []string
		// truncated are the WAL objects the store answers as shorter,
		// until the read faults are turned off.
		truncated map[string]int64
		fired     map[string]int
	}
}

// The fault names, as the counts and the trace show them.
const (
	faultFlipBit     = "flip-bit"
	faultTruncate    = "truncate"
	faultOtherObject = "other-object"
	faultReplaced    = "replaced"
	faultMissingRow  = "missing-row"
	faultSwappedRows = "swapped-rows"
	faultStaleAnswer = "stale-answer"
)

func newWALFaults(seed uint64) *walFaults {
	f := &walFaults{seed: seed}
	f.mu.calls = map[string]uint64{}
	f.mu.truncated = map[string]int64{}
	f.mu.fired = map[string]int{}
	return f
}

// drawLocked decides one call of op at rate: hit, and a value to choose
// the fault and its position with. REQUIRES: f.mu held.
func (f *walFaults) drawLocked(op string, rate float64) (uint64, bool) {
	if rate <= 0 {
		return 0, false
	}
	n := f.mu.calls[op]
	f.mu.calls[op] = n + 1
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/wal-%s/%d", f.seed, op, n)
	v := h.Sum64()
	return v >> 16, float64(v%10_000)/10_000 < rate
}

func (f *walFaults) rates() (read, plane float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.readRate, f.mu.planeRate
}

func (f *walFaults) setReadRate(r float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.readRate = r
	if r <= 0 {
		clear(f.mu.truncated)
	}
}

func (f *walFaults) setPlaneRate(r float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.planeRate = r
}

// Fired returns how many faults of each kind were injected.
func (f *walFaults) Fired() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.mu.fired))
	for k, v := range f.mu.fired {
		out[k] = v
	}
	return out
}

// walStore is the object store as the WAL writer and reader see it: the
// cluster's faultStore, with the read faults on WAL objects.
type walStore struct {
	*faultStore
	f *walFaults
}

var _ objstore.Store = walStore{}

func (s walStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	err := s.faultStore.Put(ctx, key, r, size, opts)
	if keyClass(key) == "wal" {
		if _, serr := s.m.Stat(ctx, key); serr == nil {
			s.f.mu.Lock()
			if !slices.Contains(s.f.mu.walKeys, key) {
				s.f.mu.walKeys = append(s.f.mu.walKeys, key)
			}
			s.f.mu.Unlock()
		}
	}
	return err
}

func (s walStore) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := s.m.Stat(ctx, key)
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if n, ok := s.f.mu.truncated[key]; ok && err == nil {
		info.Size = n
	}
	return info, err
}

func (s walStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if keyClass(key) != "wal" {
		return s.faultStore.Get(ctx, key, offset, length)
	}
	data, err := s.read(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// read answers a GET of a WAL object, hostile at the read rate.
func (s walStore) read(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	size, err := s.m.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	whole := size.Size
	if n, ok := s.f.mu.truncated[key]; ok {
		whole = n
	}
	// The reader reads an answer's objects in map order, so the draw
	// counts the GETs of each object apart, named by its upload order.
	op := fmt.Sprintf("get/%d", slices.Index(s.f.mu.walKeys, key))
	if v, hit := s.f.drawLocked(op, s.f.mu.readRate); hit {
		switch v % 4 {
		case 0:
			return s.flipLocked(ctx, key, offset, length, whole, v)
		case 1:
			if whole > 1 {
				s.f.mu.truncated[key] = whole / 2
				whole /= 2
				s.f.mu.fired[faultTruncate]++
			}
		case 2:
			if other := s.otherLocked(ctx, key, whole, true); other != "" {
				s.f.mu.fired[faultOtherObject]++
				return s.rangeOf(ctx, other, offset, length)
			}
			return s.flipLocked(ctx, key, offset, length, whole, v)
		case 3:
			if other := s.otherLocked(ctx, key, whole, false); other != "" {
				s.f.mu.fired[faultReplaced]++
				return s.rangeOf(ctx, other, offset, length)
			}
			return s.flipLocked(ctx, key, offset, length, whole, v)
		}
	}
	if _, err := objstore.ValidateRange(offset, length, whole); err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	return s.rangeOf(ctx, key, offset, length)
}

// rangeOf reads [offset, offset+length) of key (-1: to its end), as the
// store holds it; a range past the end is objstore.ErrInvalidRange.
func (s walStore) rangeOf(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	body, err := s.m.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// flipLocked answers key's range with one bit flipped. REQUIRES: s.f.mu
// held.
func (s walStore) flipLocked(ctx context.Context, key string, offset, length, whole int64, v uint64) ([]byte, error) {
	if _, err := objstore.ValidateRange(offset, length, whole); err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	data, err := s.rangeOf(ctx, key, offset, length)
	if err != nil || len(data) == 0 {
		return data, err
	}
	v >>= 2
	data[v%uint64(len(data))] ^= 1 << ((v >> 32) % 8)
	s.f.mu.fired[faultFlipBit]++
	return data, nil
}

// otherLocked is the newest other WAL object of key's size (sameSize)
// or of any other size, "" if none. REQUIRES: s.f.mu held.
func (s walStore) otherLocked(ctx context.Context, key string, size int64, sameSize bool) string {
	for i := len(s.f.mu.walKeys) - 1; i >= 0; i-- {
		k := s.f.mu.walKeys[i]
		if k == key {
			continue
		}
		info, err := s.m.Stat(ctx, k)
		if err != nil || (info.Size == size) != sameSize {
			continue
		}
		return k
	}
	return ""
}

// walPlane is the control plane as the WAL reader sees it: the
// cluster's, with hostile FindBatches answers at the plane rate.
type walPlane struct {
	wal.ControlPlane
	f *walFaults
}

func (p walPlane) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	res, err := p.ControlPlane.FindBatches(ctx, req)
	if err != nil {
		return res, err
	}
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	for i := range res {
		r := &res[i]
		n := len(r.Batches)
		if r.Err != nil || n < 2 {
			continue
		}
		v, hit := p.f.drawLocked("find", p.f.mu.planeRate)
		if !hit {
			continue
		}
		r.Batches = slices.Clone(r.Batches)
		switch {
		case v%3 == 0 && n >= 3:
			// A buggy plane misses a row in the middle (the last row
			// missing is only a shorter answer).
			k := 1 + int(v>>2)%(n-2)
			r.Batches = slices.Delete(r.Batches, k, k+1)
			p.f.mu.fired[faultMissingRow]++
		case v%3 == 1:
			// A stale read replica: the answer as it was before the
			// last batches committed.
			keep := 1 + int(v>>2)%(n-1)
			r.Batches = r.Batches[:keep]
			r.HighWatermark = r.Batches[keep-1].LastOffset + 1
			p.f.mu.fired[faultStaleAnswer]++
		default:
			// Two adjacent rows out of order.
			k := int(v>>2) % (n - 1)
			r.Batches[k], r.Batches[k+1] = r.Batches[k+1], r.Batches[k]
			p.f.mu.fired[faultSwappedRows]++
		}
	}
	return res, nil
}

// SetWALReadFaults sets the probability of a hostile answer per GET of
// a WAL object (a flipped bit, a truncated object, another object's
// bytes, an object replaced under its key; 0 turns them off).
func (c *Cluster) SetWALReadFaults(rate float64) error {
	return c.do("wal-read-faults", -1, func() (string, error) {
		c.rec.note("rate", rate)
		c.walFaults.setReadRate(rate)
		return fmt.Sprintf("rate=%.2f", rate), nil
	})
}

// SetPlaneFaults sets the probability of a hostile FindBatches answer
// per partition answered with two batches or more (a missing row, two
// rows out of order, a stale replica's shorter answer; 0 turns them
// off).
func (c *Cluster) SetPlaneFaults(rate float64) error {
	return c.do("plane-faults", -1, func() (string, error) {
		c.rec.note("rate", rate)
		c.walFaults.setPlaneRate(rate)
		return fmt.Sprintf("rate=%.2f", rate), nil
	})
}

// rateActions are the commands whose argument is a rate (Action.apply).
var rateActions = map[string]func(*Cluster, float64) error{
	"wal-read-faults": (*Cluster).SetWALReadFaults,
	"plane-faults":    (*Cluster).SetPlaneFaults,
}

// applyRate runs a rate command, ok false if a is none.
func (a Action) applyRate(c *Cluster) (ok bool, err error) {
	f, ok := rateActions[a.Cmd]
	if !ok {
		return false, nil
	}
	v, has := a.arg("rate")
	rate, perr := strconv.ParseFloat(v, 64)
	if !has || perr != nil {
		return true, fmt.Errorf("%w: %q has no rate", ErrUnreplayable, a)
	}
	return true, f(c, rate)
}
