// Package log is the local, segmented log of one partition: Kafka's
// UnifiedLog with its segments in Kafka's on-disk format, leader-epoch
// cache, high watermark, log start and local log start offsets, the
// highest offset in remote storage, and the Inkless truncation count.
//
// # Model
//
// A log is a directory of segments. Each segment holds the batches of the
// half-open range [base, next segment's base); the last, active segment
// takes appends and runs to the log end offset (LEO).
//
//	p0/
//	  00000000000000000000.log        record batches v2, back to back
//	  00000000000000000000.index      sparse offset index, 8-byte entries
//	  00000000000000000000.timeindex  sparse time index, 12-byte entries
//	  00000000000000000120.log        active segment
//	  ...
//	  00000000000000000120.txnindex   aborted transactions whose marker is in
//	                                  the segment, 34-byte entries
//	  00000000000000000120.snapshot   producer state at offset 120 (roll, close;
//	                                  Kafka's format: each producer's last batch)
//	  00000000000000000120.producerbatches
//	                                  every producer's dedup window (5 batches)
//	                                  at the same offset, written before the
//	                                  snapshot (tierlog's own file)
//	  leader-epoch-checkpoint         the epoch cache (package epochcache)
//	  offsets-checkpoint              log start offset, recovery point
//	  .kafka_cleanshutdown            present only after a clean Close
//
// Offsets (docs/offsets.md): logStartOffset <= localLogStartOffset <= LEO;
// logStartOffset <= highWatermark <= LEO. Offsets in [logStartOffset,
// localLogStartOffset) exist only in remote storage; a read there returns
// ErrOffsetMovedToTieredStorage. The highest offset in remote storage is
// installed only with the truncation count it was computed under
// (UpdateHighestOffsetInRemoteStorage), so progress computed before a
// truncation can never be installed after it.
//
// # Durability
//
// An append is one write call to the active segment; it is durable after
// a flush (Options.FlushMessages, Options.FlushMs, or Flush). A flush
// fsyncs the epoch checkpoint, then the segments above the recovery
// point, then the directory if files changed, and only then advances the
// recovery point. Open recovers every segment from the one holding the
// recovery point unless the clean-shutdown marker says the log was closed
// cleanly; recovery keeps the longest valid prefix and cuts the rest. A
// raise of the log start (MaybeIncrementLogStartOffset, retention) is
// durable when it returns: it writes the offsets checkpoint before the
// epoch checkpoint it truncated from the start, so a crash never reopens
// records below the cache's first entry; a full truncation checkpoints a
// lower log start only once the old segments are durably gone. A
// failed write or fsync makes the log refuse writes until it is reopened.
// DESIGN.md lists each operation's commit point.
//
// # Concurrency
//
// One writer at a time (appends, roll, truncation, retention, offset
// updates), serialized by the caller. Reads and getters run concurrently
// and never block on the writer: each loads one immutable state, a
// refcounted segment view with the offsets that describe it, which the
// writer replaces once an operation is complete. So a read never reports
// a high watermark above its log end offset, nor offsets its view does
// not hold, even while a truncation runs.
// A long-polling fetch waits with WaitFor (or Watch, for many partitions)
// until the bound it reads under passes its offset: each bound has one
// channel per generation, closed by the publication that moves it, so
// waiters take no lock, start no goroutine and wake together.
// Lock order: UnifiedLog.flushMu -> UnifiedLog.mu -> epochcache.Cache,
// and UnifiedLog.mu -> producer.TxnIndex.mu (a leaf readers take too).
//
// # Producer state
//
// The log owns a producer.Manager (log/internal/producer): appends are
// validated against it before anything is written (sequences, producer
// and coordinator epochs; a retried batch is a Duplicate answered with
// its original offsets) and applied after the write. Transactions give
// the first unstable offset and LastStableOffset = min(first unstable
// offset, high watermark); aborted transactions go to the marker
// segment's .txnindex, and a Read with IsolationCommitted returns those
// overlapping its records. A snapshot of the state is taken at every roll
// (written by the next flush, before the recovery point passes it) and
// at Close, with a .producerbatches file that keeps every producer's
// whole dedup window, so a retry of any of its last five batches stays a
// duplicate across a restart; Open loads the newest one and replays the
// batches after it. Recovery rebuilds the state and the transaction
// indexes of the segments it recovers, replaying each from its base (also
// below the log start: a log start advance keeps producers), snapshots
// every later segment base and the log end, and truncations reload and
// replay.
//
// # Not here (yet)
//
// Log compaction, transaction verification (KIP-890) and the remote tier itself (package remote) are
// outside this package.
package log
