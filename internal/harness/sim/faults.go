package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"sync"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// ErrInjected is the cause of every object-store fault the simulation
// injects.
var ErrInjected = errors.New("sim: injected object-store fault")

// faultStore is the shared object store: an objstore/mem store behind
// seeded, order-independent fault injection. mem's own faults are drawn
// from one source in the order calls reach it, and the remote copy
// uploads a segment's indexes and data from two goroutines, so their
// order (and every later draw) would depend on the Go scheduler. Here a
// fault depends only on the seed, the operation, the object's class
// (manifest, indexes, data, WAL object) and how many calls of that
// class came before; calls of one class are sequential in the
// simulation, so the same seed gives the same faults.
//
// Only Put and Delete fail (before taking effect, or after it: a lost
// response); Gets never fail, because the remote read path may race a
// speculative Get against its own.
type faultStore struct {
	m    *mem.Mem
	seed uint64
	mu   struct {
		sync.Mutex
		rate  float64
		calls map[string]uint64
		fired int
		lost  int // of fired, those that lost the response
	}
}

var _ objstore.Store = (*faultStore)(nil)

func newFaultStore(seed uint64) *faultStore {
	s := &faultStore{m: mem.New(mem.Options{Seed: seed}), seed: seed}
	s.mu.calls = map[string]uint64{}
	return s
}

// setRate sets the probability of a fault per Put or Delete (0: none).
func (s *faultStore) setRate(r float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.rate = r
}

func (s *faultStore) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.rate
}

// fired returns how many faults were injected.
func (s *faultStore) fired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.fired
}

// keyClass is the part of a key that does not depend on a random id.
func keyClass(key string) string {
	switch {
	case strings.HasSuffix(key, "/manifest"):
		return "manifest"
	case strings.HasSuffix(key, "/indexes"):
		return "indexes"
	case strings.Contains(key, "/data-"):
		return "data"
	}
	return "wal"
}

// draw decides one call: 0 no fault, 1 fail before, 2 lose the response.
func (s *faultStore) draw(op, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.rate <= 0 {
		return 0
	}
	class := op + "/" + keyClass(key)
	n := s.mu.calls[class]
	s.mu.calls[class] = n + 1
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", s.seed, class, n)
	v := h.Sum64()
	if float64(v%10_000)/10_000 >= s.mu.rate {
		return 0
	}
	s.mu.fired++
	kind := 1 + int(v>>32)%2
	if kind == 2 {
		s.mu.lost++
	}
	return kind
}

func (s *faultStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	switch s.draw("put", key) {
	case 1:
		return &objstore.OpError{Op: "put", Key: key, Err: ErrInjected}
	case 2:
		if err := s.m.Put(ctx, key, r, size, opts); err != nil {
			return err
		}
		return &objstore.OpError{Op: "put", Key: key, Err: fmt.Errorf("%w: lost response", ErrInjected)}
	}
	return s.m.Put(ctx, key, r, size, opts)
}

func (s *faultStore) Delete(ctx context.Context, key string) error {
	switch s.draw("delete", key) {
	case 1:
		return &objstore.OpError{Op: "delete", Key: key, Err: ErrInjected}
	case 2:
		if err := s.m.Delete(ctx, key); err != nil {
			return err
		}
		return &objstore.OpError{Op: "delete", Key: key, Err: fmt.Errorf("%w: lost response", ErrInjected)}
	}
	return s.m.Delete(ctx, key)
}

func (s *faultStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.m.Get(ctx, key, offset, length)
}

func (s *faultStore) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return s.m.Stat(ctx, key)
}

func (s *faultStore) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	return s.m.List(ctx, prefix, startAfter, limit)
}

func (s *faultStore) Close() error { return s.m.Close() }
