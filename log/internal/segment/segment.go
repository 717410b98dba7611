package segment

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// Segment is one segment of a partition log: its .log file of record
// batches and its two sparse indexes. See the package comment for the
// formats, the concurrency rules and the crash-safety argument.
//
// Lock order: log.UnifiedLog.mu -> Segment.loadMu -> index.mu, and
// Segment.mu is a leaf (never held while taking another lock).
type Segment struct {
	fs         vfs.FS
	dir        string
	baseOffset int64
	opts       Options // immutable after Create/Open, defaults filled
	logPath    string

	// logFile is opened read-write for the segment's lifetime. Reads use
	// ReadAt (pread) only; appends use WriteAt at the published size, so
	// the bytes of a failed or partial write are overwritten by the next
	// append instead of being left in the middle of the log.
	logFile vfs.File
	// mm is the read-only mapping of the .log that reads use instead of
	// pread when Options.MapReads is set (mmap.go).
	mm mapState

	// size is the number of valid bytes in the .log file. Race-free
	// because it is stored (by the writer) only after the bytes below it
	// are written, and readers never read past it.
	size atomic.Int64
	// nextOffset is the offset after the last batch, or -1 until
	// computed (a segment opened from disk computes it lazily). Stored by
	// the writer after each append, after size; a lazy computation stores
	// it only with CompareAndSwap(-1, ...).
	nextOffset atomic.Int64
	// createdMs is the injected creation time (Kafka: file mtime).
	createdMs atomic.Int64
	// closed is set by Close; every method then returns ErrClosed.
	closed atomic.Bool
	// detached is set once this object's file names no longer belong to
	// it (RemoveFiles, or TruncateTo/Recover replaced the files): a lazy
	// index load then rebuilds from the open .log handle instead of
	// reading an index file that may be another segment's. Atomic because
	// readers check it; only the writer sets it.
	detached atomic.Bool

	offsetIdx offsetIndex
	timeIdx   timeIndex

	// loadMu serializes lazy loads (index files, rebuilds), which do I/O,
	// so that concurrent first lookups read the files once. It is never
	// taken on the append path once the indexes are loaded.
	loadMu sync.Mutex

	// mu guards the timestamps readers ask for. Held for nanoseconds; no
	// I/O under it.
	mu struct {
		sync.Mutex
		// maxTimestamp is the largest batch MaxTimestamp seen, and
		// offsetOfMaxTimestamp the last offset of the batch that carried
		// it (Kafka's maxTimestampAndOffsetSoFar). Valid if maxKnown; a
		// segment opened from disk takes them from the last time-index
		// entry on first use, as Kafka does.
		maxTimestamp         int64
		offsetOfMaxTimestamp int64
		maxKnown             bool
		// firstBatchTimestamp is the MaxTimestamp of the first batch
		// (Kafka's rollingBasedTimestamp). firstState is one of
		// firstUnknown, firstNone (empty segment), firstKnown.
		firstBatchTimestamp int64
		firstState          int8
	}

	// idxMu serializes the writes of the index files between the log's
	// flush (FlushIndexes, which runs beside appends to the active
	// segment) and the segment's own writers (OnBecomeInactive, Close).
	// Held across the index writes and fsyncs; taken before nothing.
	idxMu sync.Mutex

	// w is the single writer's state: only the goroutine the log
	// serializes writes on touches it (Append, Flush, TruncateTo,
	// Recover, OnBecomeInactive, Close, Delete).
	w struct {
		// bytesSinceLastIndexEntry is Kafka's counter of the index
		// interval rule; counterKnown is false until a segment opened
		// from disk computes it (size - position of the last entry).
		bytesSinceLastIndexEntry int64
		counterKnown             bool
		// err is sticky: after a failed write or fsync of the .log,
		// every later write returns it (the file's contents past the
		// last successful fsync are unknown; the log must reload).
		err error
		// plan is the reusable list of index entries an append adds.
		plan []plannedEntry
		// needDirSync is set by Create: the directory entry of the new
		// file is made durable by the first Flush.
		needDirSync bool
		// reserved is how far the .log is preallocated by this object
		// (0: nothing known); reserveLog extends it in steps, trimLog
		// releases what lies past the size.
		reserved int64
		// superseded is set when TruncateTo or Recover returned a new
		// Segment over the same file names: this object must no longer
		// write its files, and Delete must not remove the new ones.
		superseded bool
	}
}

// Values of Segment.mu.firstState.
const (
	firstUnknown int8 = iota
	firstNone
	firstKnown
)

// plannedEntry is an index entry an append adds once its bytes are
// written.
type plannedEntry struct {
	lastOffset, position int64
	maxTimestamp         int64 // running maximum, for the time index
	offsetOfMaxTimestamp int64
}

// newSegment builds the object for files at dir/baseOffset; the caller
// opens logFile.
func newSegment(fs vfs.FS, dir string, baseOffset, createdMs int64, opts Options) (*Segment, error) {
	if fs == nil {
		return nil, invalidArgf("nil vfs.FS")
	}
	if baseOffset < 0 {
		return nil, invalidArgf("negative base offset %d", baseOffset)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Segment{fs: fs, dir: dir, baseOffset: baseOffset, opts: opts,
		logPath: fs.PathJoin(dir, LogFileName(baseOffset))}
	s.offsetIdx.baseOffset, s.timeIdx.baseOffset = baseOffset, baseOffset
	s.offsetIdx.init(fs.PathJoin(dir, IndexFileName(baseOffset)), offsetEntrySize, opts.MaxIndexBytes)
	s.timeIdx.init(fs.PathJoin(dir, TimeIndexFileName(baseOffset)), timeEntrySize, opts.MaxIndexBytes)
	s.nextOffset.Store(-1)
	s.createdMs.Store(createdMs)
	return s, nil
}

// Create makes a new, empty segment at baseOffset in dir. It fails if any
// of the segment's files exists. Only the .log file is created now; the
// index files are written by the first Flush, OnBecomeInactive or Close
// that has entries for them (a missing index file reads as empty). The
// new directory entry becomes durable with the first Flush.
func Create(fs vfs.FS, dir string, baseOffset int64, createdMs int64, opts Options) (*Segment, error) {
	s, err := newSegment(fs, dir, baseOffset, createdMs, opts)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{s.logPath, s.offsetIdx.path, s.timeIdx.path} {
		if _, err := fs.Stat(p); err == nil {
			return nil, invalidArgf("create %s: file exists", p)
		} else if !isNotExist(err) {
			return nil, ioErr("stat", p, err)
		}
	}
	f, err := fs.Create(s.logPath, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, ioErr("create", s.logPath, err)
	}
	s.logFile = f
	s.nextOffset.Store(baseOffset)
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp, s.mu.maxKnown = noTimestamp, baseOffset, true
	s.mu.firstState = firstNone
	s.w.counterKnown = true
	s.w.needDirSync = true
	s.offsetIdx.install(nil, 0, false)
	s.timeIdx.install(nil, 0, false)
	return s, nil
}

// Open opens the existing segment at baseOffset in dir. The .log file must
// exist; missing or invalid index files are rebuilt from the .log on first
// use. Open reads nothing but the file size: index files are loaded on the
// first lookup and the next offset, timestamps and index counter are
// computed when first needed, so opening thousands of inactive segments is
// cheap and holds one file descriptor each.
//
// Open does not check the .log contents: after an unclean shutdown the log
// must call Recover on every segment past its recovery point.
func Open(fs vfs.FS, dir string, baseOffset int64, createdMs int64, opts Options) (*Segment, error) {
	s, err := newSegment(fs, dir, baseOffset, createdMs, opts)
	if err != nil {
		return nil, err
	}
	if err := s.openLog(); err != nil {
		return nil, err
	}
	return s, nil
}

// openLog opens the .log file read-write and publishes its size.
func (s *Segment) openLog() error {
	if _, err := s.fs.Stat(s.logPath); err != nil {
		return ioErr("stat", s.logPath, err) // do not let OpenReadWrite create it
	}
	f, err := s.fs.OpenReadWrite(s.logPath, vfs.WriteCategoryUnspecified)
	if err != nil {
		return ioErr("open", s.logPath, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return ioErr("stat", s.logPath, err)
	}
	if st.Size() > math.MaxInt32 {
		_ = f.Close()
		return corruptionf(s.logPath, 0, "file size %d exceeds %d", st.Size(), int64(math.MaxInt32))
	}
	s.logFile = f
	s.size.Store(st.Size())
	return nil
}

// BaseOffset returns the offset of the segment's first possible record
// (inclusive), which names its files.
func (s *Segment) BaseOffset() int64 { return s.baseOffset }

// Size returns the number of bytes in the .log file.
func (s *Segment) Size() int64 { return s.size.Load() }

// CreatedMs returns the creation time passed to Create or Open, or set by
// SetCreatedMs.
func (s *Segment) CreatedMs() int64 { return s.createdMs.Load() }

// SetCreatedMs sets the creation time used by ShouldRoll and
// LargestTimestamp for a segment without timestamps. Kafka resets it when
// a truncation empties the segment; TruncateTo takes no clock, so the log
// calls this instead.
func (s *Segment) SetCreatedMs(ms int64) { s.createdMs.Store(ms) }

// Path returns the path of the .log file.
func (s *Segment) Path() string { return s.logPath }

// checkWritable returns the error a write must fail with, if any.
func (s *Segment) checkWritable() error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.w.superseded:
		return invalidArgf("%s: segment was replaced by TruncateTo or Recover", s.logPath)
	}
	return s.w.err
}

// Append writes batches, one or more concatenated, validated v2 batches
// with increasing offsets, at the end of the segment, with one WriteAt. The
// first batch's base offset must be at least the segment's next offset, and
// largestOffset (the last offset of the last batch) must fit relative to
// the base offset (else an *OffsetOverflowError; the log rolls first, see
// ShouldRoll). Then, per batch (as in Kafka's LogSegment.append): the
// running maximum timestamp is updated, and if more than IndexIntervalBytes
// were appended since the last index entry, the batch gets an offset-index
// entry (lastOffset, position) and a time-index entry (running max, its
// offset). The first batch of a segment is never indexed; the counter
// persists across calls. An index that is full skips the entry.
//
// The data is not durable until Flush. A failed write returns the error
// wrapped with the path and is sticky. vfs.File.Write may modify its
// input, so batches may be modified: the caller must not use them after
// Append returns. Append allocates nothing once the segment is warm.
func (s *Segment) Append(largestOffset int64, batches []byte) error {
	if len(batches) == 0 {
		return nil
	}
	if err := s.checkWritable(); err != nil {
		return err
	}
	if rel := largestOffset - s.baseOffset; rel < 0 || rel > maxRelativeOffset {
		return &OffsetOverflowError{Path: s.logPath, BaseOffset: s.baseOffset, Offset: largestOffset}
	}
	if err := s.prepareAppend(); err != nil {
		return err
	}
	size := s.size.Load()
	if size+int64(len(batches)) > math.MaxInt32 {
		return ErrSegmentTooLarge
	}
	plan, err := s.planAppend(largestOffset, batches, size)
	if err != nil {
		return err
	}
	s.reserveLog(size + int64(len(batches)))
	// Everything is decided; now the one write. The index entries were
	// planned first because the write may scramble batches.
	if _, err := s.logFile.WriteAt(batches, size); err != nil {
		s.w.err = ioErr("write", s.logPath, err)
		return s.w.err
	}
	s.publishAppend(plan, size, size+int64(len(batches)))
	s.growMappingAhead(size + int64(len(batches)))
	for _, e := range s.w.plan {
		// A full index skips the entry: lookups stay correct (the floor
		// entry is just further back) and ShouldRoll reports it.
		if !s.offsetIdx.isFull() {
			err := s.offsetIdx.append(e.lastOffset, e.position)
			invariants.Assertf(err == nil, "offset index append: %v", err)
		}
		if !s.timeIdx.isFull() {
			err := s.timeIdx.maybeAppend(e.maxTimestamp, e.offsetOfMaxTimestamp, false)
			invariants.Assertf(err == nil, "time index append: %v", err)
		}
	}
	return nil
}

// appendPlan is what an append changes once its bytes are written.
type appendPlan struct {
	next                 int64 // next offset after the batches
	counter              int64 // bytesSinceLastIndexEntry after them
	maxTimestamp         int64 // running maximum after them
	offsetOfMaxTimestamp int64
	firstTimestamp       int64 // MaxTimestamp of the first batch, if the segment was empty
}

// planAppend frames the batches, checks their offsets, and applies the
// index interval rule (entries into s.w.plan) and the running maximum
// timestamp. It changes nothing else: publishAppend applies the plan after
// the write.
func (s *Segment) planAppend(largestOffset int64, batches []byte, size int64) (p appendPlan, err error) {
	s.w.plan = s.w.plan[:0]
	p.next = s.nextOffset.Load()
	p.counter = s.w.bytesSinceLastIndexEntry
	// Race-free without s.mu: only the writer stores these fields.
	p.maxTimestamp, p.offsetOfMaxTimestamp = s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp
	pos := size
	for off := 0; off < len(batches); {
		b, err := record.ReadBatch(batches[off:])
		if err != nil {
			return p, invalidArgf("%s: append at byte %d of the input: %v", s.logPath, off, err)
		}
		if invariants.Enabled {
			invariants.Assertf(b.Validate() == nil, "appending an invalid batch: %v", b.Validate())
		}
		if b.BaseOffset() < p.next || b.LastOffset() > largestOffset {
			return p, invalidArgf("%s: batch [%d, %d] at byte %d of the input: next offset %d, largest offset %d",
				s.logPath, b.BaseOffset(), b.LastOffset(), off, p.next, largestOffset)
		}
		if pos == 0 {
			p.firstTimestamp = b.MaxTimestamp()
		}
		if ts := b.MaxTimestamp(); ts > p.maxTimestamp {
			p.maxTimestamp, p.offsetOfMaxTimestamp = ts, b.LastOffset()
		}
		if p.counter > int64(s.opts.IndexIntervalBytes) {
			s.w.plan = append(s.w.plan, plannedEntry{b.LastOffset(), pos, p.maxTimestamp, p.offsetOfMaxTimestamp})
			p.counter = 0
		}
		p.counter += int64(b.Size())
		pos += int64(b.Size())
		p.next = b.NextOffset()
		off += b.Size()
	}
	return p, nil
}

// publishAppend makes appended batches visible: timestamps, size, then
// next offset. Readers that see the new size see the bytes below it (the
// write returned before the store).
func (s *Segment) publishAppend(p appendPlan, oldSize, newSize int64) {
	s.w.bytesSinceLastIndexEntry = p.counter
	s.mu.Lock()
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp = p.maxTimestamp, p.offsetOfMaxTimestamp
	if oldSize == 0 {
		s.mu.firstBatchTimestamp, s.mu.firstState = p.firstTimestamp, firstKnown
	}
	s.mu.Unlock()
	// Size first: a reader that sees the new next offset then finds its
	// batches below the size it loads.
	s.size.Store(newSize)
	s.nextOffset.Store(p.next)
}

// minPreallocateBytes is the first reservation of a new segment.
const minPreallocateBytes = 64 << 10

// zeroChunkBytes is the size of one write of zeros.
const zeroChunkBytes = 256 << 10

// zeroChunks holds buffers of zeros for reserveLog; each is cleared
// before use because vfs.File.WriteAt may modify its input.
var zeroChunks = sync.Pool{New: func() any { b := make([]byte, zeroChunkBytes); return &b }}

// reserveLog makes sure the .log holds written blocks up to past end:
// when an append would reach beyond the reserved space, it writes zeros
// from end on, min(PreallocateBytes, max(64 KiB, end)) bytes (steps that
// double with the segment's size: a new partition reserves little). The
// zeros become durable with the next fsync; the appends after it
// overwrite blocks that are allocated and written, so their fdatasync
// writes data only: no block allocation, no extent conversion, no size
// change to journal (a fallocate that keeps the size still converts
// extents and grows the size on every write). The file size runs ahead
// of the segment's size by the zero tail, which holds no record (see
// zeroTail) and which trimLog cuts at roll and close.
//
// With AllocateOnly the blocks are reserved by fallocate and the size
// stays; trimLog's truncate then frees the blocks past the size.
//
// Only a file that trimLog can trim is reserved. A failed write of zeros
// stops the reservation there (zeros written so far are a zero tail); the
// append's own write reports a real lack of space. REQUIRES: the
// segment's writer.
func (s *Segment) reserveLog(end int64) {
	step := s.opts.PreallocateBytes
	if step <= 0 || end <= s.w.reserved {
		return
	}
	if _, ok := s.logFile.(truncater); !ok {
		// Space that cannot be released at roll and close is not
		// reserved (a wrapper that hides Truncate, MemFS).
		return
	}
	limit := min(end+min(step, max(minPreallocateBytes, end)), math.MaxInt32)
	if s.opts.AllocateOnly {
		// Blocks only, the size unchanged: nothing past the size to read
		// as a zero tail. A failure (no space, a file system without
		// fallocate) leaves the appends to allocate as they go.
		s.w.reserved = end
		if err := s.logFile.Preallocate(end, limit-end); err == nil {
			s.w.reserved = limit
		}
		return
	}
	buf := zeroChunks.Get().(*[]byte)
	defer zeroChunks.Put(buf)
	s.w.reserved = end
	for pos := end; pos < limit; {
		chunk := (*buf)[:min(int64(len(*buf)), limit-pos)]
		clear(chunk)
		n, err := s.logFile.WriteAt(chunk, pos)
		s.w.reserved = pos + int64(n)
		if err != nil {
			return
		}
		pos += int64(n)
	}
}

// truncater is the optional capability of a file to change its size
// (os.File.Truncate; vfs.File has no truncate).
type truncater interface {
	Truncate(size int64) error
}

// trimLog releases the space reserveLog preallocated past the size: a
// truncate to the size, which frees the reserved blocks past the end of
// file and drops any bytes past the size (what a failed write left,
// never published). A file without Truncate keeps its reservation. If the
// truncate shortened the file (a vfs whose Preallocate grows the file),
// the new size is made durable, so that a later open never sees the
// zero tail. Errors are returned; the data is untouched by them.
// REQUIRES: the segment's writer.
func (s *Segment) trimLog() error {
	if s.w.reserved == 0 || s.w.superseded || s.w.err != nil {
		return nil
	}
	t, ok := s.logFile.(truncater)
	if !ok {
		return nil
	}
	size := s.size.Load()
	st, err := s.logFile.Stat()
	if err != nil {
		return ioErr("stat", s.logPath, err)
	}
	if err := t.Truncate(size); err != nil {
		return ioErr("truncate", s.logPath, err)
	}
	s.w.reserved = 0
	if st.Size() > size {
		if err := s.logFile.SyncData(); err != nil {
			s.w.err = ioErr("sync", s.logPath, err)
			return s.w.err
		}
	}
	return nil
}
