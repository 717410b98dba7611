// Package remote is the remote tier of a partition log (KIP-405 tiered
// storage): which segments live in object storage, in which state, holding
// which offsets of which leader epochs.
//
// # Model
//
// A leader copies each rolled local segment below the last stable offset to
// object storage (package objstore). Every copy attempt gets a fresh
// SegmentID and is described by a SegmentMetadata: its inclusive offsets
// [StartOffset, EndOffset], the leader epochs with records in it
// (SegmentLeaderEpochs: epoch -> first offset inside the segment), size,
// timestamps and a lifecycle State. The metadata plane is MetadataManager
// (Kafka: RemoteLogMetadataManager); the data plane is StorageManager
// (Kafka: RemoteStorageManager: each copy's chunked, checksummed objects
// and their manifest in an objstore.Store, see DESIGN.md 5.6); the
// per-partition tasks (Manager) drive both.
//
// Segment states and the only transitions allowed (Kafka:
// RemoteLogSegmentState.isValidTransition); any state may
// also move to itself (an idempotent retry); anything else is a
// *TransitionError and changes nothing:
//
//	(none) --add--> COPY_SEGMENT_STARTED --> COPY_SEGMENT_FINISHED
//	                      |                          |
//	                      +--> DELETE_SEGMENT_STARTED <--+
//	                                  |
//	                                  v
//	                      DELETE_SEGMENT_FINISHED (forgotten)
//
// Visibility: SegmentFor returns only COPY_SEGMENT_FINISHED segments; the
// listings return STARTED, FINISHED and DELETE_STARTED ones (so crashed
// copies and deletions can be cleaned up); DELETE_FINISHED segments are
// forgotten.
//
// # The epoch-aware lookup
//
// Leaders with different histories may upload overlapping segments. Per
// epoch the manager keeps offsetToID: the epoch's start offset inside a
// finished segment -> that segment. When a segment finishes, for each of
// its epochs (start s, end eEnd inside the segment), mappings with a key
// >= s are superseded while the epoch's highest offset <= eEnd; then s maps
// to the new segment. SegmentFor(epoch, offset) takes the mapping with the
// greatest key <= offset and returns its segment iff offset lies at or
// below the epoch's end in that segment. An example of two leaders'
// overlapping uploads, X finished before A:
//
//	offset          0        50       80       100      120
//	X (1st)         [ epoch 0          | epoch 1          ]   [0,119]
//	A (2nd)                  [ epoch 0 | epoch 2 ]            [50,99]
//
//	epoch 0: {0->X, 50->A}   epoch 1: {80->X}   epoch 2: {80->A}
//	SegmentFor(0,49)=X  (0,60)=A  (1,99)=X  (2,99)=A  (2,100)=none
//	HighestOffsetForEpoch: 0 -> 79, 1 -> 119, 2 -> 99
//
// # Storage
//
// The metadata lives in a Pebble database on the same vfs.FS as the log, so
// one simulated crash hits both. Keys (big-endian integers):
//
//	key                                                  value
//	-------------------------------------------------    ------------------------------
//	0x00 "tierlog-remote-metadata-version"               format version u32 (1)
//	P | 's' | startOffset u64 | segment id [16]          SegmentMetadata (versioned, CRC-32C)
//	P | 'e' | epoch u32 | epoch start in segment u64     segment id [16]   (offsetToID)
//	P | 'h' | epoch u32                                  highest offset u64 (never lowered)
//	P | 'd'                                              partition delete marker (CRC-32C)
//
//	P = 0x01 | topic id [16] | partition u32 | len(topic) u8 | topic
//
// P is self-delimiting, so one partition's keys form one range: listing a
// partition's segments by start offset is a range scan over P|'s', and
// forgetting a partition is one range deletion. The per-epoch index
// ('e', 'h') is stored, not recomputed, because it depends on the order in
// which segments finished (the superseding rule), which the segments alone
// do not record.
//
// Open scans the database once and builds the in-memory index (per
// partition: segments by id and by start offset; per epoch: offsetToID,
// members, highest offset, sizes), checking keys against values and every
// mapping against its segment (ErrCorruption otherwise). Queries are served
// from memory: SegmentFor is a map lookup and two binary searches, well
// under the 50 µs p99 goal at 100,000 segments (BenchmarkSegmentFor).
//
// # Commit points
//
// Every write (AddSegment, UpdateSegment, PutPartitionDeleteMetadata) is
// one Pebble batch committed with pebble.Sync: the segment's value and
// every index change it implies land together or not at all. The commit
// point is the fsync of Pebble's WAL holding the batch; the change is then
// applied to memory and the call returns. A crash before the fsync loses
// the change (the caller saw no success); after it, Open finds it. A
// failed commit makes the manager refuse further writes (the disk may or
// may not hold the change) until it is reopened.
//
// # Concurrency
//
// A MetadataManager is safe for concurrent use. Writers are serialised and
// hold no lock readers take while they fsync; readers take a read lock for
// the duration of a lookup or a listing copy.
//
// # The remote-log manager
//
// Manager (Kafka: RemoteLogManager) runs per partition a copy and an
// expiration task on leaders and a follower task on followers, at a fixed
// delay or by hand (RunCopy, RunExpiration, RunFollower, each returning
// what the run did: CopyResult, ExpirationResult, FollowerResult), and
// serves reads below the local log start (Read: whole, CRC-checked
// batches with their aborted transactions) and ListOffsets by timestamp
// there (FindOffsetByTimestamp: the segments of the log's lineage whose
// largest timestamp reaches the target, through their uploaded time and
// offset indexes). StopPartitions cancels a
// partition's tasks, waits for running ones and deletes local or remote
// data, keeping the metadata when asked (KeepRemoteLogMetadata). Every install of the log's highest
// offset in remote storage carries the truncation count read under the log
// lock before the task read the epoch cache or the segments (the Inkless
// truncation counter of https://github.com/aiven/inkless/pull/857), so
// progress computed before a truncation is never installed after it; the
// copy task then derives its copied offset again. The decisions are pure
// functions with their own tests: CopyCandidates, FindHighestRemoteOffset,
// FilterLineage, SegmentWithinLineage, PlanRetention, PlanEpochCleanup
// (with the consolidating-partition guard). Commit points: DESIGN.md 5.7;
// the crash argument: docs/remote-tier.md.
//
// # Nothing corrupt is tiered or served
//
// A copy checks every batch of the local segment (framing, CRC and the
// record package's header checks, base offsets increasing inside the
// segment's offsets) in the data plane's own pass over the .log, the one
// that computes the chunk checksums, so the check adds no read. A batch
// that fails makes the copy fail with a *BatchCorruptionError (segment
// base offset, batch position and base offset); its objects and metadata
// are deleted as for any failed copy, the highest offset in remote storage
// does not move, and the copy task stops at that segment (ErrCopyStalled,
// PartitionMetrics.CopyStalledAt) until the log changes under it or the
// partition's tasks are replaced. A remote read checks the same of every
// batch it returns, on top of the chunk, index and manifest checksums, and
// that the batch at an offset-index position holds the indexed offset; a
// data or indexes object longer or shorter than its manifest is corruption
// too. Every corrupt read is a *ReadCorruptionError carrying the fetch
// offset and the segment, counted (RemoteReadCorruptions) and reported
// (ManagerListener.Corruption); no record of it is returned.
//
// A partition switched from classic to diskless is registered with its
// committed seal (Partition.Seal): a read below the seal returns only
// batches that end below it, and a first batch at or across it is refused
// (*SealCapError), since after an unclean election a remote segment can
// cross the seal with records the partition discarded
// (https://github.com/aiven/inkless/pull/857).
//
// A MetadataManager, a StorageManager and a Manager are safe for
// concurrent use; see each type's comment for its locks.
package remote
