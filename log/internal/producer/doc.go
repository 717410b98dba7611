// Package producer keeps the producer state of one partition log: what
// idempotent producers and transactions need from the log (Kafka's
// ProducerStateManager, ProducerAppendInfo, TransactionIndex and the
// producer snapshot). Package log owns a Manager per UnifiedLog and
// drives it from its append, roll, truncation, recovery and read paths.
//
// # Model
//
// A Manager maps producer id to an entry: producer epoch, the metadata
// of the producer's NumBatchesToRetain (5) most recent batches (last
// sequence, last offset, offset delta, max timestamp), the epoch of the
// transaction coordinator that wrote its last marker, the first offset
// of its open transaction (-1 if none) and its last timestamp. Beside
// the entries it keeps the partition's ongoing transactions and its
// "unreplicated" ones (completed, but the marker may be at or above the
// high watermark), both by first offset, and the map end offset: every
// batch below it has been applied.
//
//	offset   0  1  2  3  4  5  6  7  8  9  10 11      hw = 11
//	         p  p  T1 T1 p  T2 T2 T2 T1 .. C1 A2      (p plain, Tn txn of producer n,
//	                                                   C commit, A abort marker)
//	ongoing       {2: producer 1}  {5: producer 2}    before offset 10
//	after C1@10   ongoing {5}, unreplicated {2..10}   first unstable offset 2
//	hw -> 11      unreplicated dropped                first unstable offset 5, LSO 5
//	after A2@11   txn index entry: producer 2, first 5, last 11, lso 12
//
// The first unstable offset is the smaller of the first ongoing and the
// first unreplicated transaction's first offset; the last stable offset
// is min(first unstable offset, high watermark) (as in Kafka's
// UnifiedLog.lastStableOffset).
//
// An append is two steps, so that a refused append changes nothing:
// PrepareAppend validates the batches (with their final offsets) against
// the state and collects the changes in an AppendInfo; after the log has
// written the bytes, Apply installs them and returns the completed
// transactions with the last stable offset each aborted one records in
// the transaction index. A client batch that repeats a cached batch
// (same epoch, same sequence range) makes the append a duplicate: write
// nothing, answer with the original offsets. Validation by origin
// (Kafka's rules, ProducerAppendInfo):
//
//	                          client   coordinator   replication
//	epoch older than current  error    error         accepted
//	sequence continuity       checked  -             -
//	duplicate detection       yes      -             -
//	plain batch in open txn   error    error         accepted (Kafka: error)
//	coordinator epoch older   error    error         accepted
//
// Sequences wrap from MaxInt32 to 0 (the batch v2 rule of KIP-98). A new
// epoch starts at sequence 0. A producer without state is accepted at any
// first sequence (Kafka since 2.5, KIP-360) unless
// Options.StrictUnknownProducer. Markers follow transaction version 0/1
// (marker epoch >= current).
//
// # Formats
//
// Producer snapshot, <map end offset, 20 digits>.snapshot, Kafka's
// version 1, big-endian; crc is CRC-32C (Castagnoli) of bytes [6, end):
//
//	offset size field
//	0      2    version (1)
//	2      4    crc (uint32)
//	6      4    entry count N (int32)
//	10     46*N entries:
//	            +0  8 producer id           +22 4 offset delta
//	            +8  2 producer epoch        +26 8 timestamp (last timestamp)
//	            +10 4 last sequence (-1)    +34 4 coordinator epoch
//	            +14 8 last offset (-1)      +38 8 current txn first offset (-1)
//
// Only a producer's last batch is in the format, and unreplicated
// transactions are not restored (Kafka's behaviour). DecodeSnapshot is
// stricter than Kafka's reader: trailing bytes are corruption, so every
// accepted snapshot re-encodes identically.
//
// Producer batches, <same offset>.producerbatches, tierlog's own file
// beside the snapshot (batches.go has the layout): every producer's
// whole dedup window, so that after a reload a retry of any of the last
// NumBatchesToRetain batches is a duplicate, not only the last one (with
// Kafka's snapshot alone the older ones are out of order). It carries the
// CRC field of its snapshot; WriteSnapshotFiles writes it first and the
// snapshot second, so the snapshot's rename commits the pair.
// LoadSnapshotWithBatches states the load rules: no file, or one naming
// another snapshot, loads Kafka's window; a damaged or disagreeing one is
// corruption, and the pair is dropped for an older snapshot and a
// replay. The remote copy uploads the file beside the snapshot (an index
// of its own), and a rebuild from remote storage writes and loads the
// pair, so a rebuilt leader keeps the windows too.
//
// Aborted-transaction index, <segment base>.txnindex, Kafka's 34-byte
// entries, big-endian, ordered by last offset:
//
//	offset size field
//	0      2    version (0)
//	2      8    producer id
//	10     8    first offset        (inclusive; may be in an earlier segment)
//	18     8    last offset         (the ABORT marker)
//	26     8    last stable offset  (right after the marker)
//
// A segment's index holds the aborted transactions whose marker is in
// the segment. TxnIndex.CollectAborted returns the entries overlapping
// [fetch offset, upper bound) and whether the search is complete; if not,
// the reader continues with the next segment's index.
//
// # Files and durability
//
// TxnIndex does no I/O: the log writes AppendEncoded bytes to the
// .txnindex file and parses them back with ParseTxnIndex (a torn or
// invalid file is corruption; the log rebuilds it by recovering the
// segment). Snapshot files go through a vfs.FS: WriteSnapshotFiles (a
// snapshot with its batches file) and WriteSnapshotFile (a snapshot from
// elsewhere, alone) are atomic replaces (internal/atomicfile),
// LoadLatestSnapshotFile loads the newest snapshot at or below an offset
// with its batches file, deleting any pair that fails to decode and
// falling back to an older one, the Delete helpers remove snapshots (each
// with its batches file) below a floor or above a truncation point, and
// RemoveStraySnapshots and RemoveStrayBatches clean up on open. Deletions
// are not fsynced: a deleted snapshot that reappears after a crash is
// either deleted again by the same rule or describes a prefix the log
// still has.
//
// # Concurrency
//
// A Manager is not safe for concurrent use: the log calls it with its
// mutex held (UnifiedLog.mu), and the AppendInfo and CompletedTxn slices
// it returns are reused by the next call. A TxnIndex is safe for one
// writer and concurrent readers; its mutex is a leaf.
//
// # What this package does not do
//
// It does not place files or decide when to snapshot, and it does not
// read segments: the log replays batches after a snapshot (Replay),
// writes the snapshot at each roll and on clean close, maintains each
// segment's .txnindex, and applies its truncation and log-start rules
// through TruncateFullyAndStartAt, TruncateAndReload, TruncateHead or
// OnLogStartOffsetIncremented. It does not check that clients send no
// control batches (the log's append validation does), nor Kafka's
// transaction verification (KIP-890) or transaction version 2 markers.
package producer
