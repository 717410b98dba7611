// Package epochcache records which leader epoch wrote which offsets of one
// partition's log, and answers the question that makes truncation after a
// leader change safe: "where did epoch E end?" (KIP-101, KIP-279). It is
// Kafka's LeaderEpochFileCache with its leader-epoch-checkpoint file.
//
// # Model
//
// A Cache is a list of entries (Epoch, StartOffset), strictly increasing in
// both fields. StartOffset is inclusive: the offset of the first record
// written in that epoch. Entry i covers the half-open range
// [entries[i].StartOffset, entries[i+1].StartOffset); the last entry runs to
// the log end offset (LEO, exclusive).
//
//	epoch         0      3      4
//	startOffset   0      120    450       LEO = 600
//
//	EndOffsetFor(4, 600) = (4, 600)   latest epoch: ends at the LEO
//	EndOffsetFor(3, 600) = (3, 450)   ends where the next epoch starts
//	EndOffsetFor(2, 600) = (0, 120)   never led: floor epoch, next start offset
//	EpochForOffset(449)  = 3
//
// Assign adds an entry and removes every entry it conflicts with (an epoch
// at or above the new epoch, or a start offset at or above the new start
// offset), so the list stays strictly increasing in both fields whatever
// the caller passes. TruncateFromEnd(x) drops entries starting at or after
// x (the log was truncated to x); TruncateFromStart(x) drops entries
// starting at or before x and moves the last dropped one to start at x (the
// log start offset advanced to x). Tests print entries as epoch@startOffset:
// "0@0 3@120 4@450".
//
// # Checkpoint file
//
// The cache is mirrored to a text file, by convention named
// leader-epoch-checkpoint in the partition directory, in Kafka's format:
//
//	0                      version, always 0
//	3                      N, the number of entries
//	0 0                    N lines "<epoch> <startOffset>", oldest first
//	3 120
//	4 450
//
// Every line ends in "\n". Reading accepts an empty file, or one holding
// only the version line, as no entries. Any other deviation (another
// version, a malformed number, a line without exactly two fields, a count
// that does not match the lines) is a *CheckpointError naming the file and
// line, which errors.Is ErrCorruption. Open assigns the entries read in
// order, so a file that is not strictly increasing is normalised, not
// rejected.
//
// # Durability
//
// All I/O goes through a pebble vfs.FS. Each write replaces the whole file:
// write <path>.tmp, fsync it, rename it over <path>, fsync the directory.
// The directory fsync is the commit point. A crash before it leaves the old
// or the new checkpoint, never a torn one, and at worst a leftover .tmp file
// that Open removes.
//
// Assign (when it changes the entries), AssignAll and ClearAndFlush write
// synchronously, so the file never misses an assigned entry. The truncations
// only mark the cache dirty; the log calls Flush later, outside its own
// mutex, and on close. A crash between a truncation and its Flush therefore
// leaves a checkpoint with entries the log no longer has. That is safe
// because after a crash the log, not the checkpoint, is the source of truth:
// when it loads, the log calls TruncateFromEnd(LEO) and
// TruncateFromStart(logStartOffset) on the cache it opened (as Kafka's
// LogLoader does), which removes exactly what the lost flush would have removed, and
// re-assigns the epochs of the batches it recovers. Any later synchronous
// write also persists a pending truncation, because writes carry the whole
// current list.
//
// A failed write returns its error (wrapped with the operation and path) to
// the caller of Assign, AssignAll, ClearAndFlush or Flush. The in-memory
// change stays and the cache stays dirty, so a later Flush retries; the
// file holds the old or the new list.
//
// # Concurrency
//
// A Cache is safe for concurrent use. Queries (EndOffsetFor, EpochForOffset,
// Latest, Entries, ...) take a read lock on the entries and never wait for
// file I/O. A write holds a separate flush mutex across the I/O and copies
// the entries under the entries mutex, so writes are never reordered (an
// older list is never written after a newer one) and the entries mutex is
// never held during an fsync. Lock order: Cache.flushMu -> Cache.mu; in the
// project, log.UnifiedLog.mu -> epochcache.Cache (DESIGN.md, "Lock order").
//
// # What it does not do
//
// The cache records and answers. It does not read the log, so it cannot
// know the LEO or the log start offset by itself: the log passes them in
// and repairs the cache on load. Package truncation decides how far a
// follower must truncate given the leader's answer, and package log does
// the truncating. It does not create the partition directory.
package epochcache
