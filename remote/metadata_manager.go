package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
)

// MetadataOptions configures a MetadataManager. The zero value is valid:
// every field has a default.
type MetadataOptions struct {
	// Logger receives the manager's and Pebble's log lines. Default
	// zap.NewNop().
	Logger *zap.Logger
	// PebbleOptions, if non-nil, is copied and used to open the database
	// (its FS field is overwritten with Open's fs). Default: Pebble's
	// defaults. Tests use it to shrink caches; production needs nothing.
	PebbleOptions *pebble.Options
	// ReadOnly opens an existing database without writing to it (Pebble's
	// Options.ReadOnly): for inspection tools. Every write then fails;
	// a directory without a database is an error instead of a new one.
	// Default false.
	ReadOnly bool
}

// MetadataManager stores remote segment metadata (Kafka:
// RemoteLogSegmentMetadata, RemoteLogMetadataManager) in a Pebble database
// and answers the tier's metadata queries from an in-memory index of it.
// Kafka: RemoteLogMetadataManager, with the semantics of its
// RemoteLogMetadataCache.
//
// Concurrency: safe for concurrent use. Writers (AddSegment, UpdateSegment,
// PutPartitionDeleteMetadata) are serialised by writeMu, which is held
// across the Pebble commit and its WAL fsync; queries take only mu for
// reading, which a writer holds for writing only while it applies an
// already durable change to memory (no I/O), so queries never wait for an
// fsync.
//
// Lock order: MetadataManager.writeMu -> MetadataManager.mu. No lock of
// another package is taken under either, and no callback runs under them.
type MetadataManager struct {
	fs     vfs.FS // immutable after Open
	dir    string
	logger *zap.Logger

	// writeMu serialises writers: plan against the current state, commit
	// to Pebble, apply to memory. Held across the fsync on purpose: the
	// plan is only valid if no other change lands between the plan and
	// the apply.
	writeMu sync.Mutex
	// db is the Pebble database. Written with writeMu held; nil after
	// Close.
	db *pebble.DB
	// writeErr is sticky: after a failed commit the on-disk state may or
	// may not hold the change, so memory may no longer match it; every
	// later write returns this error until the manager is reopened (which
	// reloads memory from disk). Guarded by writeMu.
	writeErr error

	mu struct {
		sync.RWMutex
		// partitions holds every partition with metadata. Entries and
		// what they point to change only with writeMu held and mu held
		// for writing.
		partitions map[TopicIDPartition]*partitionState
		closed     bool
	}
}

// Open opens (creating if needed) the metadata database in dir on fs and
// loads it into memory. Use the same fs as the log's, so one simulated
// crash hits both (DESIGN.md 5.4).
//
// Open checks the stored metadata against itself (checksums, keys against
// values, per-epoch mappings against their segments) and fails with an
// error wrapping ErrCorruption if it disagrees.
func Open(fs vfs.FS, dir string, opts MetadataOptions) (*MetadataManager, error) {
	if fs == nil {
		return nil, fmt.Errorf("%w: remote: nil vfs.FS", ErrInvalidArgument)
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	po := &pebble.Options{}
	if opts.PebbleOptions != nil {
		*po = *opts.PebbleOptions
	}
	po.FS = fs
	po.ReadOnly = po.ReadOnly || opts.ReadOnly
	if po.Logger == nil && po.LoggerAndTracer == nil {
		po.Logger = pebbleLogger{logger.Sugar().With(zap.String("component", "pebble"))}
	}
	if po.ReadOnly {
		// Pebble would create an empty database in a missing or empty
		// directory even when read-only; an inspector must not.
		if desc, err := pebble.Peek(dir, fs); err != nil || !desc.Exists {
			return nil, fmt.Errorf("%w: remote: %s holds no metadata database", ErrInvalidArgument, dir)
		}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("remote: open metadata database %s: %w", dir, err)
	}
	m := &MetadataManager{fs: fs, dir: dir, logger: logger, db: db}
	parts, err := load(db)
	if err == nil {
		err = m.ensureVersion(po.ReadOnly)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	m.mu.partitions = parts
	n := 0
	for _, ps := range parts {
		n += len(ps.segments)
	}
	logger.Info("remote metadata opened", zap.String("dir", dir),
		zap.Int("partitions", len(parts)), zap.Int("segments", n))
	return m, nil
}

// ensureVersion writes the format version key of a new database, or checks
// it in an existing one.
func (m *MetadataManager) ensureVersion(readOnly bool) error {
	v, closer, err := m.db.Get([]byte(keyVersion))
	if errors.Is(err, pebble.ErrNotFound) && readOnly {
		return corruptionf("metadata database %s has no format version", m.dir)
	}
	if errors.Is(err, pebble.ErrNotFound) {
		var buf [4]byte
		binary.BigEndian.PutUint32(buf[:], metadataFormatVersion)
		if err := m.db.Set([]byte(keyVersion), buf[:], pebble.Sync); err != nil {
			return fmt.Errorf("remote: write metadata version: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("remote: read metadata version: %w", err)
	}
	defer closer.Close()
	if len(v) != 4 || binary.BigEndian.Uint32(v) != metadataFormatVersion {
		return corruptionf("metadata format version %x, want %d", v, metadataFormatVersion)
	}
	return nil
}

// Close closes the database. Queries and writes after Close return
// ErrClosed. Everything acknowledged before is already durable (every
// write syncs), so Close writes nothing.
func (m *MetadataManager) Close() error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.mu.closed = true
	m.mu.partitions = nil
	m.mu.Unlock()
	db := m.db
	m.db = nil
	if err := db.Close(); err != nil {
		return fmt.Errorf("remote: close metadata database: %w", err)
	}
	return nil
}

// AddSegment records a new copy attempt (Kafka:
// addRemoteLogSegmentMetadata). seg.State must be COPY_SEGMENT_STARTED.
// Adding a segment id again while it is still COPY_SEGMENT_STARTED is an
// idempotent retry (a state may move to itself): it succeeds if the copy's
// fields are the same (BrokerID, EventTimestampMs and CustomMetadata are
// taken from the retry) and fails with ErrSegmentIDReused otherwise. In any
// other state the add is an invalid transition.
//
// The change is durable when AddSegment returns nil: the commit point is
// the fsync of Pebble's WAL for the batch.
func (m *MetadataManager) AddSegment(ctx context.Context, seg SegmentMetadata) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := seg.Validate(); err != nil {
		return err
	}
	if seg.State != CopySegmentStarted {
		return &TransitionError{What: seg.SegmentID.String(), From: NoSegmentState.String(), To: seg.State.String()}
	}
	return m.write(seg.SegmentID.TopicIDPartition, func(ps *partitionState) (*segmentChange, error) {
		prev := ps.segments[seg.SegmentID.ID]
		if prev == nil {
			return &segmentChange{next: seg}, nil
		}
		if !IsValidTransition(prev.State, seg.State) {
			return nil, &TransitionError{What: seg.SegmentID.String(), From: prev.State.String(), To: seg.State.String()}
		}
		if !sameCopy(prev, &seg) {
			return nil, fmt.Errorf("%w: %s", ErrSegmentIDReused, seg.SegmentID)
		}
		if equalMetadata(prev, &seg) {
			return nil, nil // nothing to write
		}
		return &segmentChange{prev: prev, next: seg}, nil
	})
}

// RegisterCopiedSegment records a segment whose data is already in remote
// storage as COPY_SEGMENT_FINISHED in one call: what AddSegment
// (COPY_SEGMENT_STARTED) followed by UpdateSegment (COPY_SEGMENT_FINISHED)
// records, written as one Pebble batch, so no crash leaves it started. It
// is for data copied outside a Manager's copy task (an import, a tool, a
// test); the copy task itself keeps the two steps, since its commit point
// must come after the upload.
//
// seg.State is COPY_SEGMENT_FINISHED, or unset (the zero value,
// COPY_SEGMENT_STARTED), which the call takes as finished; any other state
// is a *TransitionError. The fields must pass Validate (a
// *SegmentMetadataError otherwise) and the segment id must not be the zero
// UUID. seg.BrokerID, EventTimestampMs and CustomMetadata are stored as
// given. Registering the same segment again succeeds and changes nothing
// when the copy's fields are the same, and finishes it when it is still
// COPY_SEGMENT_STARTED; different fields under the id are
// ErrSegmentIDReused; a segment being deleted is a *TransitionError.
//
// Commit point: the fsync of Pebble's WAL for the batch holding the
// segment and its per-epoch index entries.
func (m *MetadataManager) RegisterCopiedSegment(ctx context.Context, seg SegmentMetadata) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch seg.State {
	case CopySegmentStarted, CopySegmentFinished:
		seg.State = CopySegmentFinished
	default:
		return &TransitionError{What: seg.SegmentID.String(), From: "(register)", To: seg.State.String()}
	}
	if err := seg.Validate(); err != nil {
		return err
	}
	if seg.SegmentID.ID == (UUID{}) {
		return &SegmentMetadataError{SegmentID: seg.SegmentID, Reason: "zero segment id"}
	}
	seg.CustomMetadata = bytes.Clone(seg.CustomMetadata)
	seg.SegmentLeaderEpochs = slices.Clone(seg.SegmentLeaderEpochs)
	return m.write(seg.SegmentID.TopicIDPartition, func(ps *partitionState) (*segmentChange, error) {
		prev := ps.segments[seg.SegmentID.ID]
		switch {
		case prev == nil:
		case !IsValidTransition(prev.State, CopySegmentFinished):
			return nil, &TransitionError{What: seg.SegmentID.String(), From: prev.State.String(), To: seg.State.String()}
		case !sameCopy(prev, &seg):
			return nil, fmt.Errorf("%w: %s", ErrSegmentIDReused, seg.SegmentID)
		case equalMetadata(prev, &seg):
			return nil, nil // registered already
		}
		c := &segmentChange{prev: prev, next: seg}
		ps.plan(c)
		return c, nil
	})
}

// UpdateSegment moves a segment to u.State (Kafka:
// updateRemoteLogSegmentMetadata), taking u's event time and broker id (and
// custom metadata when non-nil). The transition must be allowed by
// IsValidTransition (a *TransitionError otherwise, and nothing changes);
// u.State must not be COPY_SEGMENT_STARTED. An unknown or forgotten segment
// is ErrSegmentNotFound. A self transition re-applies the state's index
// change, as Kafka's cache does.
//
// Commit point: the fsync of Pebble's WAL for the batch holding the new
// value and every per-epoch index change.
func (m *MetadataManager) UpdateSegment(ctx context.Context, u SegmentMetadataUpdate) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := u.SegmentID.TopicIDPartition.validate(); err != nil {
		return err
	}
	if u.State == CopySegmentStarted || !u.State.valid() {
		return &TransitionError{What: u.SegmentID.String(), From: "(update)", To: u.State.String()}
	}
	if len(u.CustomMetadata) > MaxCustomMetadataBytes {
		return fmt.Errorf("%w: remote: custom metadata of %d bytes > %d", ErrInvalidArgument,
			len(u.CustomMetadata), MaxCustomMetadataBytes)
	}
	return m.write(u.SegmentID.TopicIDPartition, func(ps *partitionState) (*segmentChange, error) {
		prev := ps.segments[u.SegmentID.ID]
		if prev == nil {
			return nil, fmt.Errorf("%w: %s", ErrSegmentNotFound, u.SegmentID)
		}
		if !IsValidTransition(prev.State, u.State) {
			return nil, &TransitionError{What: u.SegmentID.String(), From: prev.State.String(), To: u.State.String()}
		}
		c := &segmentChange{prev: prev, next: *prev}
		c.next.State = u.State
		c.next.EventTimestampMs = u.EventTimestampMs
		c.next.BrokerID = u.BrokerID
		if u.CustomMetadata != nil {
			c.next.CustomMetadata = append([]byte{}, u.CustomMetadata...)
		}
		ps.plan(c)
		return c, nil
	})
}

// write runs one segment change: plan it under writeMu, commit it to
// Pebble with Sync, then apply it to memory under mu. plan returns a nil
// change for a no-op.
func (m *MetadataManager) write(tp TopicIDPartition, plan func(*partitionState) (*segmentChange, error)) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.db == nil {
		return ErrClosed
	}
	if m.writeErr != nil {
		return m.writeErr
	}
	// Reading m.mu.partitions without mu is race-free: it only changes
	// with writeMu held, which we hold.
	ps := m.mu.partitions[tp]
	isNew := ps == nil
	if isNew {
		ps = newPartitionState(tp)
	}
	c, err := plan(ps)
	if err != nil || c == nil {
		return err
	}
	b := m.db.NewBatch()
	defer b.Close()
	if err := c.writeTo(b, ps.prefix); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		m.writeErr = fmt.Errorf("remote: commit metadata of %s: %w", c.next.SegmentID, err)
		m.logger.Error("remote metadata commit failed; writes refused until reopen", zap.Error(err))
		return m.writeErr
	}
	m.mu.Lock()
	if isNew {
		m.mu.partitions[tp] = ps
	}
	ps.apply(c)
	if invariants.Enabled {
		if msg := ps.checkInvariants(); msg != "" {
			m.mu.Unlock()
			panic("tierlog invariant violated: remote metadata: " + msg)
		}
	}
	m.mu.Unlock()
	return nil
}

// writeTo adds the change's Pebble operations to b: the segment's new value
// (or its deletion), then the offsetToID deletions, puts, and the new
// highest offsets. Later operations on the same key win within a batch.
func (c *segmentChange) writeTo(b *pebble.Batch, prefix []byte) error {
	id := c.next.SegmentID.ID
	key := segmentKey(prefix, c.next.StartOffset, id)
	var err error
	if c.forget {
		err = b.Delete(key, nil)
	} else {
		err = b.Set(key, EncodeSegmentMetadata(nil, &c.next), nil)
	}
	for _, k := range c.mapDel {
		err = errors.Join(err, b.Delete(epochKey(prefix, k.epoch, k.start), nil))
	}
	for _, k := range c.mapPut {
		err = errors.Join(err, b.Set(epochKey(prefix, k.epoch, k.start), id[:], nil))
	}
	for _, h := range c.highest {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(h.start))
		err = errors.Join(err, b.Set(highestKey(prefix, h.epoch), v[:], nil))
	}
	if err != nil {
		return fmt.Errorf("remote: build metadata batch: %w", err)
	}
	return nil
}

// PutPartitionDeleteMetadata records a step of a partition's deletion
// (Kafka: putRemotePartitionDeleteMetadata): (none) -> MARKED -> STARTED
// -> FINISHED, self transitions allowed. FINISHED forgets the partition:
// its segments, per-epoch indexes and marker are removed in one batch (a
// Pebble range deletion over the partition's key prefix). The marker does
// not stop adds or lookups; the caller (the remote log manager) stops its
// tasks first.
//
// Commit point: the fsync of Pebble's WAL for the batch.
func (m *MetadataManager) PutPartitionDeleteMetadata(ctx context.Context, d PartitionDeleteMetadata) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tp := d.TopicIDPartition
	if err := tp.validate(); err != nil {
		return err
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.db == nil {
		return ErrClosed
	}
	if m.writeErr != nil {
		return m.writeErr
	}
	ps := m.mu.partitions[tp] // race-free: see write
	from := NoPartitionDeleteState
	if ps != nil {
		from = ps.deleteMarker.State
	}
	if !IsValidPartitionDeleteTransition(from, d.State) {
		return &TransitionError{What: tp.String(), From: from.String(), To: d.State.String()}
	}
	prefix := partitionPrefix(tp)
	b := m.db.NewBatch()
	defer b.Close()
	var err error
	if d.State == DeletePartitionFinished {
		err = b.DeleteRange(prefix, prefixEnd(prefix), nil)
	} else {
		err = b.Set(deleteKey(prefix), encodeDeleteMarker(nil, &d), nil)
	}
	if err != nil {
		return fmt.Errorf("remote: build metadata batch: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		m.writeErr = fmt.Errorf("remote: commit partition delete of %s: %w", tp, err)
		m.logger.Error("remote metadata commit failed; writes refused until reopen", zap.Error(err))
		return m.writeErr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.State == DeletePartitionFinished {
		delete(m.mu.partitions, tp)
		return nil
	}
	if ps == nil {
		ps = newPartitionState(tp)
		m.mu.partitions[tp] = ps
	}
	ps.deleteMarker = d
	return nil
}

// PartitionDeleteState returns the partition's delete state, or
// NoPartitionDeleteState if it is not being deleted (or its deletion
// finished and it was forgotten).
func (m *MetadataManager) PartitionDeleteState(tp TopicIDPartition) (PartitionDeleteState, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return NoPartitionDeleteState, ErrClosed
	}
	if ps := m.mu.partitions[tp]; ps != nil {
		return ps.deleteMarker.State, nil
	}
	return NoPartitionDeleteState, nil
}

// SegmentFor returns the COPY_SEGMENT_FINISHED segment that holds offset in
// leader epoch epoch (Kafka: remoteLogSegmentMetadata(tp, epoch, offset)):
// among the segments mapped under epoch, the one with the
// greatest epoch start <= offset, if offset also lies at or below the
// epoch's end inside it. Overlapping segments from different leaders are
// resolved by the superseding rule applied when each finished. Unlike
// Kafka's, when that segment's range of the epoch ends before offset,
// any other finished segment holding offset in the epoch is returned
// (a later segment with the same epoch start can take the mapping while
// holding less of the epoch; docs/deviations.md).
//
// The lookup is a map access and two binary searches in memory under a
// read lock, plus, only when the mapped segment does not hold offset, a
// scan of the epoch's segments; it never touches Pebble.
func (m *MetadataManager) SegmentFor(tp TopicIDPartition, epoch int32, offset int64) (SegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return SegmentMetadata{}, false, ErrClosed
	}
	ps := m.mu.partitions[tp]
	if ps == nil {
		return SegmentMetadata{}, false, nil
	}
	seg, ok := ps.lookup(epoch, offset)
	if !ok {
		return SegmentMetadata{}, false, nil
	}
	return *seg, true, nil
}

// HighestOffsetForEpoch returns the highest offset of epoch held by any
// segment of the partition that reached COPY_SEGMENT_FINISHED (Kafka:
// highestOffsetForEpoch). It is never lowered, not even when those
// segments are deleted; ok is false if no segment of the epoch ever
// finished.
func (m *MetadataManager) HighestOffsetForEpoch(tp TopicIDPartition, epoch int32) (offset int64, ok bool, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return base.UndefinedOffset, false, ErrClosed
	}
	if ps := m.mu.partitions[tp]; ps != nil {
		if st := ps.epochs[epoch]; st != nil && st.hasHighest {
			return st.highestOffset, true, nil
		}
	}
	return base.UndefinedOffset, false, nil
}

// ListSegments returns every segment of the partition not yet
// DELETE_SEGMENT_FINISHED, in any state, sorted by start offset (then by
// segment id). Kafka: listRemoteLogSegments(tp).
func (m *MetadataManager) ListSegments(tp TopicIDPartition) ([]SegmentMetadata, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	ps := m.mu.partitions[tp]
	if ps == nil {
		return nil, nil
	}
	return copySegments(ps.byStart), nil
}

// ListSegmentsForEpoch returns the segments of ListSegments that carry
// leader epoch epoch, sorted by start offset (then by segment id). Kafka:
// listRemoteLogSegments(tp, epoch).
func (m *MetadataManager) ListSegmentsForEpoch(tp TopicIDPartition, epoch int32) ([]SegmentMetadata, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	ps := m.mu.partitions[tp]
	if ps == nil {
		return nil, nil
	}
	st := ps.epochs[epoch]
	if st == nil {
		return nil, nil
	}
	return copySegments(st.members), nil
}

// Partitions returns every partition with metadata, sorted by topic id,
// topic name and partition: what an inspection lists before it asks
// ListSegments.
func (m *MetadataManager) Partitions() ([]TopicIDPartition, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	out := make([]TopicIDPartition, 0, len(m.mu.partitions))
	for tp := range m.mu.partitions {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicIDPartition) int {
		return cmp.Or(bytes.Compare(a.TopicID[:], b.TopicID[:]), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

func copySegments(list []*SegmentMetadata) []SegmentMetadata {
	if len(list) == 0 {
		return nil
	}
	out := make([]SegmentMetadata, len(list))
	for i, seg := range list {
		out[i] = *seg
	}
	return out
}

// RemoteLogSize returns the summed SizeBytes of the segments
// ListSegmentsForEpoch(tp, epoch) returns (Kafka: remoteLogSize(tp,
// epoch)), or of all ListSegments(tp) if epoch is record.UndefinedEpoch
// (-1), each segment counted once.
func (m *MetadataManager) RemoteLogSize(tp TopicIDPartition, epoch int32) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return 0, ErrClosed
	}
	ps := m.mu.partitions[tp]
	switch {
	case ps == nil:
		return 0, nil
	case epoch == base.UndefinedEpoch:
		return ps.sizeBytes, nil
	}
	if st := ps.epochs[epoch]; st != nil {
		return st.sizeBytes, nil
	}
	return 0, nil
}

// NextSegmentWithTxnIndex returns the first segment, starting with
// SegmentFor(tp, epoch, offset) and moving to SegmentFor(tp, epoch,
// end+1), whose transaction index is not empty (Kafka:
// nextSegmentWithTxnIndex). ok is false when the chain of segments in the
// epoch ends first.
func (m *MetadataManager) NextSegmentWithTxnIndex(tp TopicIDPartition, epoch int32, offset int64) (SegmentMetadata, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mu.closed {
		return SegmentMetadata{}, false, ErrClosed
	}
	ps := m.mu.partitions[tp]
	if ps == nil {
		return SegmentMetadata{}, false, nil
	}
	for {
		seg, ok := ps.lookup(epoch, offset)
		if !ok {
			return SegmentMetadata{}, false, nil
		}
		if !seg.TxnIndexEmpty {
			return *seg, true, nil
		}
		offset = seg.EndOffset + 1 // terminates: offsets strictly grow
	}
}

// pebbleLogger routes Pebble's log lines to zap. Fatalf logs at error
// level and panics, as Pebble's own default logger exits: Pebble calls it
// only for states it cannot continue from.
type pebbleLogger struct{ s *zap.SugaredLogger }

func (l pebbleLogger) Infof(format string, args ...any)  { l.s.Infof(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.s.Errorf(format, args...)
	panic(fmt.Sprintf(format, args...))
}
