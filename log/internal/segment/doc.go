// Package segment implements one segment of a partition log, in Kafka's
// on-disk format: the .log file of record batches and its two sparse
// indexes, the offset index (.index) and the time index (.timeindex).
// Package log strings segments together into a UnifiedLog; this package
// knows nothing of other segments, leader epochs or producers.
//
// # Model
//
// A segment holds the batches with offsets in [BaseOffset, next segment's
// base). Its files are named by the base offset, zero-padded to 20 digits
// (LogFileName and friends). Batches are appended at the end; every
// IndexIntervalBytes or so a batch gets an entry in both indexes, so a
// read finds its start with a binary search and a short forward scan:
//
//	.log    pos 0      1000     2000  ...  5000     6000 ...
//	        [0..0]     [1..1]   [2..2]     [5..5]   [6..6]    batches
//	.index  (5, 5000)        offset 5's batch starts at 5000
//
//	Read(5): first entry >= 5 = (5, 5000); one pread at 5000 returns
//	header and batch (sized by the next entry's position): [5..5] holds 5.
//	Read(7): no entry >= 7: one pread of [5000, end) holds [5..5], [6..6],
//	[7..7]; [7..7] is moved to the front of the buffer.
//	Read(3): first entry >= 3 is (5, 5000), and no entry is below it: one
//	pread of [0, 5000 + the batch) holds [0..0] ... [5..5]; [3..3] is moved
//	to the front. (Entries far apart mean large batches: the pread at the
//	entry comes first, and the region before it only if its batch starts
//	above the target.)
//	Anything unexpected: floor entry, then a header scan (always right).
//
// The first batch of a segment is never indexed (position 0 is the
// implicit floor). The formats are documented on offsetIndex and
// timeIndex; both files hold exactly their entries, nothing more.
//
// # Indexes in memory
//
// Each index keeps its entries in memory, encoded as in the file, and the
// file is written from them: appended (pending entries) at Flush,
// OnBecomeInactive and Close, never on the append path. Kafka mmaps
// preallocated index files and trims them on roll; we preallocate in
// bounded steps (vfs Preallocate keeps the file size), so there is
// nothing to trim. A segment opened from disk reads its index files
// lazily, on the first lookup, and closes them: an inactive segment holds
// one file descriptor, its .log. A loaded file is validated (whole
// entries, increasing offsets and positions, positions inside the .log,
// non-decreasing timestamps); a torn trailing partial entry is dropped;
// an invalid file is never trusted but rebuilt from the .log.
//
// # Truncation
//
// vfs.File has no truncate. A segment that loses its tail (TruncateTo, or
// Recover cutting a torn tail) is rewritten: the kept prefix is copied to
// <base>.log.tmp, the kept index entries written to index .tmp files, and
// the .tmp files renamed over the live ones (indexes first, then the .log,
// which is the commit point), with fsyncs of files and directory in
// between. The cost is O(kept bytes), acceptable because truncation is
// rare: divergence after a leader change, recovery of a torn tail.
//
// The result is a new *Segment; the receiver is untouched and stays
// readable through its open handle (on Linux and MemFS an open file keeps
// reading the renamed-over inode). The log swaps the new segment into its
// refcounted segment list and Closes the old one when its readers are
// done.
//
// # Crash safety
//
//   - Append writes the .log only; nothing is durable until Flush, which
//     fdatasyncs the .log, then writes and fsyncs the index files, then
//     the directory if a file is new. An index is never durable ahead of
//     its .log through Flush.
//   - After an unclean shutdown the log calls Recover on every segment
//     past its recovery point: it validates every batch, cuts the first
//     torn or corrupt one and everything after it, and rebuilds both
//     indexes. Stale index entries (OnBecomeInactive and Close fsync the
//     indexes but not the .log) are thereby replaced.
//   - Files named *.tmp are never live: the loader deletes them
//     (ParseFileName reports KindTemp). Files named *.damaged (MoveAside,
//     LinkAside) are kept for an operator and never loaded.
//
// # Damage
//
// A segment the log does not recover is trusted, but not blindly: a read
// never skips damaged bytes to serve later records. A header that runs
// past the published size, has a bad magic or length, or whose offsets
// leave the segment's range or go backwards is a *CorruptionError; a read
// returns only the batches before such a header, so the next read reports
// it. An index entry whose batch does not end at the entry's offset is
// ignored (the scan restarts at position 0); a well-formed offset index
// pointing past the end of the .log means the .log lost bytes, and every
// lookup reports it rather than rebuilding the index over the loss.
// CheckIndexBounds (one index entry read) and VerifyTail (the batches
// after the last index entry, validated) are the cheap checks the log
// runs at open.
//
// # Concurrency
//
// One writer per segment: the log serializes Append, Flush,
// OnBecomeInactive, TruncateTo, Recover, RemoveFiles, Close and Delete. Read,
// TranslateOffset, Size, ReadNextOffset, FindOffsetByTimestamp,
// LargestTimestamp, MaxTimestampAndOffset and FirstBatchTimestamp may run
// from any number of goroutines concurrently with the writer (but not
// after Close: the log refcounts segments). Reads use ReadAt, or copy from
// a read-only mapping of the .log (Options.MapReads; mmap.go says why it
// never faults and when it is unmapped: at Close only) where its pages
// are warm: ranges read before, touched by a background warmer (warm.go;
// the tail and a first pass use ReadAt). The
// writer publishes the size atomically after the bytes are written, and
// only then adds index entries, so every entry a reader sees points below
// the size it loaded. Index entries are guarded by a per-index RWMutex
// held only for in-memory work (readers never wait for I/O other than the
// one-time lazy load, serialized by loadMu).
//
// Lock order: log.UnifiedLog.mu -> Segment.loadMu -> index.mu; Segment.mu
// is a leaf, and so is the mapping mutex (mapState.mu); the warmer holds
// mapState.warmMu (-> mapState.mu) while it touches a chunk, and so does
// Close while it unmaps.
//
// This package does not decide when to roll, flush, truncate or recover:
// ShouldRoll answers the question, the log acts. It does not write the
// transaction index or producer snapshots (their names are reserved).
package segment
