// Package logmanager holds the partitions' logs of a broker's log
// directories (Kafka: LogManager): it finds and opens them at startup,
// creates, deletes and moves them, runs their background tasks, keeps the
// per-directory checkpoints, and takes a failed directory offline with its
// partitions while the others go on.
//
// # Model
//
// A broker has log directories (Options.Dirs). Each holds partition
// directories, each one a log.UnifiedLog, and three checkpoint files:
//
//	/data/a/
//	  orders-0/                          a log (log.Open's directory)
//	    00000000000000000000.log ...
//	    partition.metadata               "version: 0\ntopic_id: <id>"
//	  orders-1.5f0c...e1-future/         the future log of a move into /data/a
//	  orders-7.9a1b...44-delete/         a deleted log, removed after FileDeleteDelay
//	  .kafka_cleanshutdown               while every log in it is closed cleanly
//	  replication-offset-checkpoint      high watermarks
//	  recovery-point-offset-checkpoint   recovery points
//	  log-start-offset-checkpoint        log start offsets
//
// A partition is identified by its name, "<topic>-<partition>", as Kafka's
// directories are; its topic id (remote.TopicIDPartition.TopicID) is kept
// in partition.metadata in Kafka's format, written when first known, and
// checked by Get and GetOrCreate (*InconsistentTopicIDError). A partition
// has at most one current log in all directories, and at most one future
// log (in another directory) during a move (CreateFuture, PromoteFuture,
// DeleteFuture). PromoteFutureInPlace promotes a future log without
// closing it (its holders keep the same value): its directory keeps the
// "-future" name, marked by a PromotedFutureFile, until the next Open
// renames it into place.
//
// # Checkpoints
//
// The checkpoint files use Kafka's text format (EncodeCheckpoint,
// ParseCheckpoint) and are replaced atomically. The high watermark lives
// only there: Open restores each log's from it, clamped to [log start,
// log end] (a log that lost unflushed records in a crash gets its log
// end). A damaged replication-offset-checkpoint takes its directory
// offline (Kafka fails the directory); a missing one starts every high
// watermark at the log start. The recovery-point and log-start files are
// written for Kafka's tools and operators: each log keeps both offsets in
// its own offsets checkpoint, which it writes at its own commit points
// and recovers from, so a damaged file there is logged, counted and
// rewritten. Delete and PromoteFuture rewrite their directories' files
// before returning, so a later log of the same name never inherits an
// older log's high watermark.
//
// # Failure
//
// An I/O error from a directory (at Open, in a task, a checkpoint write,
// a deletion, or reported by the broker with ReportError) takes it
// offline: its logs are closed, Get and GetOrCreate answer a
// *DirOfflineError (ErrLogDirOffline) for its partitions,
// Options.OnDirOffline is called and Metrics counts it (Kafka:
// LogDirFailureChannel). A log that fails to open takes its directory
// offline too, and so does a damaged partition.metadata. The partitions of
// a directory that failed at Open are offline, not unknown, so GetOrCreate
// does not create them elsewhere; only a directory that cannot even be
// listed hides its partitions (the broker's metadata must then say where
// they live). Open fails only when every directory is offline, or when a
// partition is in two directories (*DuplicateLogError, as Kafka).
//
// # Concurrency
//
// A Manager is safe for concurrent use. Get takes one mutex; creation,
// deletion, promotion, checkpoint writes and Close are serialized by a
// second one (lock order: opMu -> mu -> the logs' locks). The background
// tasks (RunTask) run on their own goroutines from Open to Close. Open and
// Close work on the directories at once; with Options.Serial they take
// one directory, one log and one fsync at a time, in order, so that a
// deterministic harness sees the same sequence of file operations in
// every run.
//
// # Clean shutdown
//
// One marker per log directory, as in Kafka (CleanShutdownFile): Close
// writes it after every log of the directory closed cleanly and the
// checkpoints were written; Open removes it durably before it opens the
// directory's first log, and opens them as clean (no recovery) if it was
// there. The logs keep no marker of their own
// (log.Options.ManagedCleanShutdown), which saves an fsync per log at
// Open and at Close. A crash while the manager runs (or during Open)
// leaves no marker: every log of the directory recovers.
//
// Close makes a directory's logs durable together, not one fsync at a
// time: each log closes deferred (log.UnifiedLog.CloseDeferred: its
// files written, no fsync, every replaced file's new contents waiting in
// a temp file), RecoveryThreadsPerDir at a time; then the directory is
// made durable (one syncfs(2) of its file system on Linux 5.8 or later
// with the operating system's file system, else an fsync of every file
// of each log, 16 at a time), and for each of log.PublishSteps the logs'
// temp files are renamed over their targets and the directory made
// durable again. The commit point is the marker, written (atomically,
// durably) only after the last of these: it never vouches for a file
// that a crash can still take, and a crash before it leaves each file
// old or new, whole, for a recovery. A log's Close skips the producer
// snapshot and the offsets checkpoint when the files there already hold
// them, as after a clean open with no write since.
//
// # Not done here
//
// Log compaction (Kafka's LogCleaner) does not exist; the manager does not
// pick directories by free space.
package logmanager
