package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
)

// Late PUTs (the "late-puts" action): a request the client abandons is
// still applied by the store, later. Real object stores do this: once
// S3 has received a PUT, cancelling the client's context only stops the
// client from waiting; the object may land after the client has moved
// on (and after a cleanup that listed the prefix without it).
//
// The fault needs a copy whose uploads overlap, so while it is on the
// cluster's remote copies upload a segment's data and its indexes
// concurrently (remote.StorageOptions.SequentialUploads false), and the
// store orders them so that a seed gives one trace: the indexes PUT is
// held until the data PUT of the same copy is answered. If the data PUT
// succeeded, the indexes PUT goes on as any other. If it failed, the
// copy either waits for the indexes PUT's answer (its context is the
// copy's own, which nobody cancels within a step: the store applies it
// and answers) or cancels it (a context the copy made for its uploads):
// the store then answers the cancellation and applies the PUT at the end
// of the step, after the failed copy's cleanup. The checker's
// OrphanObject invariant finds an object left that way.

// lateCopy is one remote copy running while late PUTs are on.
type lateCopy struct {
	ctx    context.Context // the copy's own context
	done   chan struct{}   // closed once the first data PUT is answered
	failed bool            // that PUT failed; set before done closes
}

// latePut is an abandoned PUT the store applies at the end of the step.
type latePut struct {
	key  string
	data []byte
}

// lateFallback bounds the wait of a held PUT whose copy failed for the
// cancellation of its context: a copy that neither waits nor cancels
// would otherwise hang the run (the PUT is then applied and answered).
const lateFallback = 10 * time.Second

// segmentOf is the segment id (its text) of a remote segment object's
// key as sm writes it, "" for any other key (a WAL object's).
func segmentOf(sm *remote.StorageManager, key string) string {
	id, _, _, err := sm.ParseObjectKey(key)
	if err != nil {
		return ""
	}
	return id.ID.String()
}

// setLate turns late PUTs on or off.
func (s *faultStore) setLate(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.late = on
}

func (s *faultStore) late() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.late
}

// beginCopy registers a copy of segment id running with ctx; end
// forgets it.
func (s *faultStore) beginCopy(id string, ctx context.Context) (end func()) {
	lc := &lateCopy{ctx: ctx, done: make(chan struct{})}
	s.mu.Lock()
	s.mu.copies[id] = lc
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.copies[id] == lc {
			delete(s.mu.copies, id)
		}
	}
}

func (s *faultStore) copyOf(key string) *lateCopy {
	id := segmentOf(s.keys, key)
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.copies[id]
}

// putOrdered is Put for an object of a registered copy: a data PUT
// settles the copy's order, an indexes PUT waits for it and may be
// abandoned (applied at the end of the step).
func (s *faultStore) putOrdered(ctx context.Context, lc *lateCopy, key string, r io.Reader, size int64,
	opts objstore.PutOptions) error {
	switch keyClass(key) {
	case "data":
		err := s.put(ctx, key, r, size, opts)
		s.mu.Lock()
		select {
		case <-lc.done:
		default:
			lc.failed = err != nil
			close(lc.done)
		}
		s.mu.Unlock()
		return err
	case "indexes":
		abandoned := false
		select {
		case <-lc.done:
			if lc.failed && ctx != lc.ctx {
				select {
				case <-ctx.Done():
					abandoned = true
				case <-time.After(lateFallback):
				}
			}
		case <-ctx.Done():
			abandoned = true
		}
		if !abandoned {
			return s.put(ctx, key, r, size, opts)
		}
		b, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.mu.pending = append(s.mu.pending, latePut{key: key, data: b})
		s.mu.Unlock()
		return &objstore.OpError{Op: "put", Key: key, Err: context.Cause(ctx)}
	}
	return s.put(ctx, key, r, size, opts)
}

// applyLate applies the abandoned PUTs, in the order they were
// abandoned, and returns their keys.
func (s *faultStore) applyLate(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	pending := s.mu.pending
	s.mu.pending = nil
	s.mu.Unlock()
	var keys []string
	var errs []error
	for _, p := range pending {
		keys = append(keys, p.key)
		errs = append(errs, s.m.Put(ctx, p.key, bytes.NewReader(p.data), int64(len(p.data)), objstore.PutOptions{}))
		s.touch()
	}
	return keys, errors.Join(errs...)
}

// touch counts a change of the remote segment objects (checkOrphans runs
// only after one).
func (s *faultStore) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.remoteChanges++
}

func (s *faultStore) remoteChanges() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.remoteChanges
}

// copyStorage is the brokers' remote data plane: the cluster's
// StorageManager (uploads one after another), and while late PUTs are
// on, a second one over the same store whose copies upload data and
// indexes concurrently, for copies of a non-empty segment.
type copyStorage struct {
	*remote.StorageManager
	concurrent *remote.StorageManager
	store      *faultStore
}

var _ remote.SegmentStorage = copyStorage{}

func (s copyStorage) CopySegment(ctx context.Context, m *remote.SegmentMetadata, data remote.SegmentData) ([]byte, error) {
	if data.LogSize == 0 || !s.store.late() {
		return s.StorageManager.CopySegment(ctx, m, data)
	}
	end := s.store.beginCopy(m.SegmentID.ID.String(), ctx)
	defer end()
	return s.concurrent.CopySegment(ctx, m, data)
}

// SetLatePuts turns late PUTs on or off (see above): while on, a remote
// copy's indexes PUT that the copy cancels after its data PUT failed is
// applied by the store at the end of the step.
func (c *Cluster) SetLatePuts(on bool) error {
	return c.do("late-puts", -1, func() (string, error) {
		c.rec.note("on", on)
		c.store.setLate(on)
		return fmt.Sprintf("late-puts=%t", on), nil
	})
}

// applyLatePuts applies the PUTs abandoned in this step, noting each.
func (c *Cluster) applyLatePuts() {
	keys, err := c.store.applyLate(c.ctx)
	for _, k := range keys {
		c.trace.detail("an abandoned PUT lands: %s", k)
	}
	if err != nil {
		c.trace.detail("late PUT: %v", err)
	}
}

// checkOrphans: every remote segment object in the store belongs to a
// segment the remote metadata knows (in any state but forgotten), at the
// end of a step (no copy runs then). A failed copy's cleanup deletes
// what it listed; an object that lands after it belongs to no segment.
func (c *Cluster) checkOrphans() *Violation {
	n := c.store.remoteChanges()
	if n == c.orphansChecked {
		return nil
	}
	c.orphansChecked = n
	// The segments of every topic id the partition had: a deleted
	// topic's remote log stays where its deletion did not finish (a
	// store fault, or no running leader to delete it), and its objects
	// belong to those segments.
	known := map[string]bool{}
	for _, tp := range append(slices.Clone(c.topics), c.tp) {
		segs, err := c.meta.ListSegments(tp)
		if err != nil {
			return nil
		}
		for _, s := range segs {
			known[s.SegmentID.ID.String()] = true
		}
	}
	var orphan string
	_ = objstore.ListAll(c.ctx, c.store.m, "", func(o objstore.ObjectInfo) error {
		if id := segmentOf(c.storage, o.Key); id != "" && !known[id] && orphan == "" {
			orphan = o.Key
		}
		return nil
	})
	if orphan != "" {
		return c.violation(OrphanObject, -1, -1, "object %s belongs to no segment of the remote metadata", orphan)
	}
	return nil
}
