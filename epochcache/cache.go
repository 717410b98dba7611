package epochcache

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/base"
)

// Cache is the leader-epoch cache of one partition: the entries described
// in the package comment, optionally mirrored to a checkpoint file.
// Kafka: LeaderEpochFileCache.
//
// Concurrency: all methods are safe for concurrent use. Queries take mu
// for reading and never wait for file I/O. Mutations take mu for writing
// only while they change the in-memory list. Checkpoint writes (Assign,
// AssignAll, ClearAndFlush, Flush) hold flushMu across the file I/O and
// take mu for reading only to copy the entries, so writes never run under
// mu and never reorder: each write copies the state under flushMu, so a
// later write always carries a state at least as new as an earlier one.
//
// Lock order: Cache.flushMu -> Cache.mu. In the project (DESIGN.md, "Lock
// order"): log.UnifiedLog.mu -> epochcache.Cache.flushMu ->
// epochcache.Cache.mu. The methods that write the checkpoint do file I/O
// while the caller's locks are held; the log calls Flush after releasing
// its own mutex.
type Cache struct {
	fs   vfs.FS // nil for a cache built by New: nothing is ever written
	path string // checkpoint path; "" iff fs == nil

	// persistedVersion is the mu.version whose entries the checkpoint file
	// holds durably (the last write whose directory fsync returned). It
	// only grows. Written with flushMu held; read without it by Dirty,
	// which is race-free because it is atomic and only compared.
	persistedVersion atomic.Uint64

	// flushMu serializes checkpoint writes. It is held across the whole
	// write, including the fsyncs; see the type comment for why this
	// keeps writes ordered.
	flushMu struct {
		sync.Mutex
		// snapshot and buf are reused between writes to avoid
		// allocating: the copied entries and their encoded text.
		snapshot []Entry
		buf      []byte
	}

	// mu guards the in-memory entries. No file I/O happens with it held.
	mu struct {
		sync.RWMutex
		// entries is the model: sorted, strictly increasing in Epoch and
		// in StartOffset (checked by checkEntries after every mutation).
		entries []Entry
		// version counts mutations that changed entries. The cache is
		// dirty (a Flush would write) iff version > persistedVersion.
		version uint64
	}
}

// New returns an empty cache that lives only in memory: mutations never
// write, Flush and ClearAndFlush do no I/O. For tests and tools.
func New() *Cache {
	return &Cache{}
}

// Open returns the cache mirrored to the checkpoint file at path on fsys.
//
// It removes a leftover "<path>.tmp" from an interrupted write, then
// reads the checkpoint: a missing file gives an empty cache; an
// unparseable one returns a *CheckpointError (errors.Is ErrCorruption).
// The file's entries are assigned in order, as Assign would (without
// writing), so a non-monotone file is normalised; the cache is then dirty
// and the next Flush writes the normalised list.
//
// The directory holding path must exist before the first write. Open does
// not repair the checkpoint against the log: the log must call
// TruncateFromEnd(LEO) and TruncateFromStart(logStartOffset) once it has
// recovered its segments (see the package comment, "Durability").
func Open(fsys vfs.FS, path string) (*Cache, error) {
	if fsys == nil || path == "" {
		return nil, fmt.Errorf("epochcache: open with nil FS or empty path %q: %w", path, ErrInvalidArgument)
	}
	if err := removeLeftoverTmp(fsys, path); err != nil {
		return nil, err
	}
	fileEntries, _, err := readCheckpoint(fsys, path)
	if err != nil {
		return nil, err
	}
	c := &Cache{fs: fsys, path: path}
	var entries []Entry
	for _, e := range fileEntries {
		entries, _ = assignEntry(entries, e)
	}
	checkEntries(entries)
	c.mu.entries = entries
	if !slices.Equal(entries, fileEntries) {
		c.mu.version = 1 // dirty: the file holds a non-normalised list
	}
	return c, nil
}

// Path returns the checkpoint path, or "" for a cache built by New.
func (c *Cache) Path() string { return c.path }

// Assign records that epoch wrote its first record at startOffset
// (Kafka's LeaderEpochFileCache.assign) and reports whether the entries
// changed.
//
// A negative epoch or startOffset returns an error wrapping
// ErrInvalidArgument. Nothing changes, and nothing is written, if epoch is
// the latest epoch and startOffset is not below its start offset, so
// repeated calls for the current epoch are cheap: after Assign(2, 6),
// Assign(2, 10) keeps 2@6. Otherwise every entry conflicting with the new
// one (epoch >= epoch or start offset >= startOffset) is removed, walking
// back from the newest, and the new entry is appended.
//
// When the entries changed, Assign writes the checkpoint before returning
// (unless a concurrent write already carried this change). The write holds
// the whole current list, so it also persists any pending truncation. If
// the write fails Assign returns (true, err) and the in-memory change
// stays: the cache stays dirty and a later Flush or write retries. The file then
// holds the old or the new list (see writeCheckpointFile).
func (c *Cache) Assign(epoch int32, startOffset int64) (bool, error) {
	changed, version, err := c.assignInMemory(epoch, startOffset)
	if err != nil || !changed {
		return changed, err
	}
	return true, c.persist(version)
}

// AssignDeferred applies Assign's rule in memory only and reports whether
// the entries changed; the change reaches the checkpoint with the next
// Flush or synchronous write. It exists for the log, which must not fsync
// under its own mutex: the log assigns under its mutex, then calls Flush
// after releasing it and before it acknowledges the append or advances its
// recovery point past the assigned offset. Until then a crash may lose the
// entry, which is safe because recovery re-assigns the epochs of every
// batch above the recovery point when the log loads (as Kafka's LogLoader
// does).
func (c *Cache) AssignDeferred(epoch int32, startOffset int64) (bool, error) {
	changed, _, err := c.assignInMemory(epoch, startOffset)
	return changed, err
}

func (c *Cache) assignInMemory(epoch int32, startOffset int64) (changed bool, version uint64, err error) {
	e := Entry{Epoch: epoch, StartOffset: startOffset}
	if err := validate(e); err != nil {
		return false, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.entries, changed = assignEntry(c.mu.entries, e)
	if changed {
		c.mu.version++
		checkEntries(c.mu.entries)
	}
	return changed, c.mu.version, nil
}

// AssignAll applies Assign's rule to each entry in order, then writes the
// checkpoint once if the list is non-empty, even if nothing changed
// (Kafka's assign(list)). If any entry is invalid it returns an error
// wrapping ErrInvalidArgument and changes nothing.
func (c *Cache) AssignAll(entries []Entry) error {
	for _, e := range entries {
		if err := validate(e); err != nil {
			return err
		}
	}
	if len(entries) == 0 {
		return nil
	}
	c.mu.Lock()
	for _, e := range entries {
		var changed bool
		c.mu.entries, changed = assignEntry(c.mu.entries, e)
		if changed {
			c.mu.version++
		}
	}
	checkEntries(c.mu.entries)
	c.mu.Unlock()
	return c.persistForced()
}

func validate(e Entry) error {
	if e.Epoch < 0 || e.StartOffset < 0 {
		return fmt.Errorf("epochcache: assign epoch %d start offset %d: %w",
			e.Epoch, e.StartOffset, ErrInvalidArgument)
	}
	return nil
}

// TruncateFromEnd removes the entries whose start offset is at or beyond
// endOffset (exclusive end: an entry starting at endOffset-1 stays) and
// reports whether any were removed. A negative endOffset (-1: undefined)
// changes nothing. Example: on 2@6 3@8 4@11, TruncateFromEnd(8) leaves
// 2@6 and TruncateFromEnd(9) leaves 2@6 3@8.
//
// The change is not written: the cache becomes dirty and the caller
// calls Flush later, outside its own locks. That is safe because after a
// crash the log repairs the stale file on load (package comment,
// "Durability").
func (c *Cache) TruncateFromEnd(endOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var changed bool
	c.mu.entries, changed = truncateEntriesFromEnd(c.mu.entries, endOffset)
	if changed {
		c.mu.version++
		checkEntries(c.mu.entries)
	}
	return changed
}

// TruncateFromStart removes the entries whose start offset is at or below
// startOffset and, if any were removed, puts the last removed one back
// with start offset startOffset, so the epoch that wrote startOffset
// still covers it. It reports whether the entries changed. A negative
// startOffset (-1: undefined) changes nothing. Examples on 2@6 3@8 4@11:
// 8 gives 3@8 4@11; 9 gives 3@9 4@11; 6 and 1 change nothing; 15 gives
// 4@15.
//
// Like TruncateFromEnd it only marks the cache dirty; see Flush.
func (c *Cache) TruncateFromStart(startOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var changed bool
	c.mu.entries, changed = truncateEntriesFromStart(c.mu.entries, startOffset)
	if changed {
		c.mu.version++
		checkEntries(c.mu.entries)
	}
	return changed
}

// Clear removes all entries without writing; the cache becomes dirty if
// it held any, so a later Flush writes the empty list.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.entries) > 0 {
		c.mu.entries = c.mu.entries[:0]
		c.mu.version++
	}
}

// ClearAndFlush removes all entries and writes the empty checkpoint
// before returning. On a write error the entries stay removed in memory
// and the cache stays dirty.
func (c *Cache) ClearAndFlush() error {
	c.mu.Lock()
	c.mu.entries = c.mu.entries[:0]
	c.mu.version++
	c.mu.Unlock()
	return c.persistForced()
}

// Flush writes the checkpoint if the cache is dirty: if a truncation,
// Clear, normalising Open or failed write left changes the file does not
// durably hold. It does nothing for a cache built by New, and nothing if
// the checkpoint's directory no longer exists (the log was deleted or
// moved; Kafka's scheduled flush skips the same way), leaving the cache
// dirty. Any other error is returned and the cache stays dirty.
//
// The log calls Flush after releasing its own mutex, and on close.
func (c *Cache) Flush() error {
	if c.fs == nil {
		return nil
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.RLock()
	version := c.mu.version
	c.mu.RUnlock()
	if version <= c.persistedVersion.Load() {
		return nil
	}
	dir := c.fs.PathDir(c.path)
	if _, err := c.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return c.writeFlushLocked()
}

// Dirty reports whether the in-memory entries differ from what the
// checkpoint durably holds, i.e. whether Flush would write. Always false
// for a cache built by New. It does not wait for a write in progress.
func (c *Cache) Dirty() bool {
	if c.fs == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.version > c.persistedVersion.Load()
}

// persist writes the checkpoint unless a write that started after
// version was reached has already completed.
func (c *Cache) persist(version uint64) error {
	if c.fs == nil {
		return nil
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.persistedVersion.Load() >= version {
		return nil // a concurrent writer persisted a state including ours
	}
	return c.writeFlushLocked()
}

// persistForced writes the checkpoint even if it is up to date.
func (c *Cache) persistForced() error {
	if c.fs == nil {
		return nil
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	return c.writeFlushLocked()
}

// writeFlushLocked copies the current entries under mu, then writes them
// to the checkpoint without holding mu, and records the copied version as
// persisted once the write's directory fsync returns.
//
// REQUIRES: c.flushMu held; c.mu not held.
func (c *Cache) writeFlushLocked() error {
	c.mu.RLock()
	version := c.mu.version
	c.flushMu.snapshot = append(c.flushMu.snapshot[:0], c.mu.entries...)
	c.mu.RUnlock()

	c.flushMu.buf = appendCheckpoint(c.flushMu.buf[:0], c.flushMu.snapshot)
	if err := writeCheckpointFile(c.fs, c.path, c.flushMu.buf); err != nil {
		return err
	}
	if version > c.persistedVersion.Load() {
		c.persistedVersion.Store(version)
	}
	return nil
}

// EndOffsetFor answers OffsetsForLeaderEpoch for requestedEpoch on a log
// whose end offset is logEndOffset: the largest epoch <= requestedEpoch
// this replica knows, and the exclusive end offset of that epoch (Kafka's
// LeaderEpochFileCache.endOffsetFor), as (epoch, end); (-1, -1) is
// UndefinedEpochEndOffset. Rows evaluated in order:
//
//	requestedEpoch < 0 (-1: undefined)        (-1, -1)
//	requestedEpoch == latest epoch            (requestedEpoch, logEndOffset)
//	no epoch above requestedEpoch             (-1, -1)  (also: empty cache)
//	no epoch at or below requestedEpoch       (requestedEpoch, earliest start offset)
//	otherwise                                 (floor epoch, start offset of next higher epoch)
//
// The fourth row echoes the requested epoch, as Kafka does: on 5@11 6@12
// 7@13, EndOffsetFor(4, _) is (4, 11). Kafka tests only -1 in the first
// row; other negative epochs cannot be assigned and are treated the same.
//
// It runs in O(log n) and does not allocate.
func (c *Cache) EndOffsetFor(requestedEpoch int32, logEndOffset int64) EpochEndOffset {
	c.mu.RLock()
	defer c.mu.RUnlock()
	epoch, endOffset := endOffsetFor(c.mu.entries, requestedEpoch, logEndOffset)
	return EpochEndOffset{Epoch: epoch, EndOffset: endOffset}
}

// EpochForOffset returns the epoch that wrote offset: the epoch of the
// last entry starting at or before offset (Kafka's
// LeaderEpochFileCache.epochForOffset). Offsets beyond the
// log end offset map to the latest epoch. It returns (UndefinedEpoch,
// false) if offset is below the earliest entry or the cache is empty.
// Example on 0@10 1@20 5@30: 25 -> 1, 20 -> 1, 30 -> 5, 50 -> 5, 5 -> none.
//
// It runs in O(log n) and does not allocate.
func (c *Cache) EpochForOffset(offset int64) (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return epochForOffset(c.mu.entries, offset)
}

// Latest returns the entry with the highest epoch.
func (c *Cache) Latest() (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n := len(c.mu.entries); n > 0 {
		return c.mu.entries[n-1], true
	}
	return Entry{Epoch: base.UndefinedEpoch, StartOffset: base.UndefinedOffset}, false
}

// LatestEpoch returns the highest epoch, or UndefinedEpoch (-1) if the
// cache is empty.
func (c *Cache) LatestEpoch() int32 {
	e, _ := c.Latest()
	return e.Epoch
}

// Earliest returns the entry with the lowest epoch.
func (c *Cache) Earliest() (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.mu.entries) > 0 {
		return c.mu.entries[0], true
	}
	return Entry{Epoch: base.UndefinedEpoch, StartOffset: base.UndefinedOffset}, false
}

// EpochEntry returns the entry of exactly epoch, if the cache holds one.
func (c *Cache) EpochEntry(epoch int32) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := searchEpochAtLeast(c.mu.entries, epoch)
	if i < len(c.mu.entries) && c.mu.entries[i].Epoch == epoch {
		return c.mu.entries[i], true
	}
	return Entry{Epoch: base.UndefinedEpoch, StartOffset: base.UndefinedOffset}, false
}

// PreviousEpoch returns the epoch just below the latest one, or
// (UndefinedEpoch, false) if the cache holds fewer than two entries.
func (c *Cache) PreviousEpoch() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n := len(c.mu.entries); n >= 2 {
		return c.mu.entries[n-2].Epoch, true
	}
	return base.UndefinedEpoch, false
}

// Previous returns the entry with the highest epoch strictly below epoch.
func (c *Cache) Previous(epoch int32) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := searchEpochAtLeast(c.mu.entries, epoch); i > 0 {
		return c.mu.entries[i-1], true
	}
	return Entry{Epoch: base.UndefinedEpoch, StartOffset: base.UndefinedOffset}, false
}

// Next returns the entry with the lowest epoch strictly above epoch.
func (c *Cache) Next(epoch int32) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := searchEpochAbove(c.mu.entries, epoch); i < len(c.mu.entries) {
		return c.mu.entries[i], true
	}
	return Entry{Epoch: base.UndefinedEpoch, StartOffset: base.UndefinedOffset}, false
}

// Entries returns a copy of the entries, oldest first.
func (c *Cache) Entries() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.mu.entries)
}

// EntriesInRange returns the entries covering offsets [startOffset,
// endOffset), computed on a copy: TruncateFromStart(startOffset) if
// startOffset >= 0, then TruncateFromEnd(endOffset). The first entry is
// clipped to start at startOffset. Remote segment metadata records its
// segment's epochs with it.
func (c *Cache) EntriesInRange(startOffset, endOffset int64) []Entry {
	entries := c.Entries()
	if startOffset >= 0 {
		entries, _ = truncateEntriesFromStart(entries, startOffset)
	}
	entries, _ = truncateEntriesFromEnd(entries, endOffset)
	return entries
}

// Len returns the number of entries.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.mu.entries)
}

// String formats the entries as "2@6 3@8", or "(empty)".
func (c *Cache) String() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return FormatEntries(c.mu.entries)
}
