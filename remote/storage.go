package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/remote/objstore"
)

// IndexType names an auxiliary file of a remote segment. The values are
// the manifest's type bytes. Kafka: RemoteStorageManager.IndexType.
type IndexType int8

const (
	// IndexOffset is the segment's .index (sparse offset -> position).
	IndexOffset IndexType = iota + 1
	// IndexTimestamp is the segment's .timeindex.
	IndexTimestamp
	// IndexProducerSnapshot is the producer snapshot at the next segment's
	// base offset (Kafka's .snapshot bytes).
	IndexProducerSnapshot
	// IndexTransaction is the segment's .txnindex; absent when the segment
	// has no aborted transactions.
	IndexTransaction
	// IndexLeaderEpoch is the leader-epoch checkpoint text of the entries
	// before the segment end: the whole history up to it, not only the
	// segment's epochs, so a follower can rebuild its cache from one segment.
	IndexLeaderEpoch
	// IndexProducerBatches is tierlog's producer batches file at the next
	// segment's base offset (the .producerbatches bytes that go with the
	// IndexProducerSnapshot part: every producer's whole dedup window,
	// which Kafka's snapshot lacks); absent in segments copied without it
	// (and before it existed), whose rebuilds load Kafka's window.
	IndexProducerBatches

	numIndexTypes = 6
)

// requiredIndexTypes are uploaded with every segment.
var requiredIndexTypes = [...]IndexType{IndexOffset, IndexTimestamp, IndexProducerSnapshot, IndexLeaderEpoch}

// String returns Kafka's name of the index type.
func (t IndexType) String() string {
	switch t {
	case IndexOffset:
		return "OFFSET"
	case IndexTimestamp:
		return "TIMESTAMP"
	case IndexProducerSnapshot:
		return "PRODUCER_SNAPSHOT"
	case IndexTransaction:
		return "TRANSACTION"
	case IndexLeaderEpoch:
		return "LEADER_EPOCH"
	case IndexProducerBatches:
		return "PRODUCER_BATCHES"
	}
	return "IndexType(" + strconv.Itoa(int(t)) + ")"
}

func (t IndexType) valid() bool { return t >= IndexOffset && t <= IndexProducerBatches }

// SegmentData is what a copy uploads for one local segment. Kafka:
// LogSegmentData. The copy reads the slices and Log only during
// CopySegment and keeps no reference to them.
type SegmentData struct {
	// Log is the segment's .log file; read only in [0, LogSize). It must
	// not change during the copy (a rolled segment below the last stable
	// offset never does): the chunk checksums are computed from the bytes
	// the upload reads (see CopySegment), and re-reads must return them.
	// With a store that uploads front to back (fs, mem, a single-part S3
	// put) the upload (the compressing pass of a compressed copy) reads
	// [0, LogSize) once, in order: the Manager checks the segment's batches
	// in that pass, so a failed ReadAt there must fail the copy. As
	// io.ReaderAt promises, parallel ReadAt calls must be safe: a multipart
	// upload reads parts concurrently.
	Log io.ReaderAt
	// LogSize is the size of the .log in bytes; it must equal the
	// metadata's SizeBytes.
	LogSize int64
	// OffsetIndex and TimeIndex are the .index and .timeindex bytes.
	OffsetIndex, TimeIndex []byte
	// TxnIndex is the .txnindex bytes. Empty: no aborted transactions,
	// nothing is uploaded and FetchIndex(IndexTransaction) is
	// ErrIndexNotFound; it must agree with the metadata's TxnIndexEmpty.
	TxnIndex []byte
	// ProducerSnapshot is the producer snapshot at the next segment's base
	// offset (Kafka .snapshot bytes).
	ProducerSnapshot []byte
	// ProducerBatches is the producer batches file that goes with
	// ProducerSnapshot (tierlog's .producerbatches bytes: every
	// producer's dedup window). Empty: nothing is uploaded and
	// FetchIndex(IndexProducerBatches) is ErrIndexNotFound.
	ProducerBatches []byte
	// LeaderEpochs is the leader's epoch cache restricted to entries before
	// the segment end: EntriesInRange(-1, nextBase). Strictly increasing in
	// both fields, non-negative, each starting at or below the segment's
	// EndOffset. Stored in Kafka's leader-epoch-checkpoint text format.
	LeaderEpochs []epochcache.Entry
}

// StorageOptions configure a StorageManager. The zero value is valid:
// every field has a default.
type StorageOptions struct {
	// KeyPrefix is prepended verbatim to every key (end it with '/' for a
	// directory-like prefix). It must pass objstore.ValidatePrefix and make
	// valid keys. Default none. Kafka (Aiven's RSM): key.prefix.
	KeyPrefix string
	// ChunkSize is the bytes of segment data per chunk, 1 to
	// MaxChunkBytes: the unit of checksums, of compression and of reads (a
	// fetch reads whole chunks, so it bounds the read amplification of a
	// small fetch). Default 1 MiB: a Kafka fetch reads about 1 MiB of a
	// partition (max.partition.fetch.bytes), so it touches one or two
	// chunks. Kafka (Aiven's RSM): chunk.size.
	ChunkSize int
	// BlockSize is the bytes per checksum of an uncompressed segment. In
	// layout version 3 (the default; 1 to MaxChunkBytes, else version 1)
	// each block of the data object is followed by its CRC-32C, so a read
	// fetches the blocks its range touches and their trailers, in one Get:
	// at 4 KiB, a 16 KiB read fetches at most 20 KiB and 20 bytes. With
	// ChecksumsInManifest, the bytes per checksum inside each chunk: its
	// manifest (version 2) also holds a CRC-32C per block, so a read
	// fetches and verifies only the blocks its range touches (rather than
	// one or two whole chunks), for 4 manifest bytes per block (16 KiB per
	// 64 MiB at 16 KiB). At least 1; a BlockSize at or above ChunkSize, or
	// a segment that would have more than 2^20 blocks, writes no blocks
	// (version 1). Negative writes no blocks. Compressed chunks have none:
	// a zstd frame is verified and decoded whole. Default 4 KiB in version
	// 3 (trailers add 0.1% to the stored bytes; measured, a warm 16 KiB
	// read on the fs store takes 1.5x a raw ranged read at 4 KiB and 1.9x
	// at 16 KiB, whose two blocks are twice the bytes read and checked),
	// 16 KiB with ChecksumsInManifest (the manifest every cold read
	// fetches stays small).
	BlockSize int
	// ChecksumsInManifest writes an uncompressed segment in manifest
	// version 2 (or 1): the data object is the .log byte for byte and the
	// checksums are in the manifest, which a read must fetch first. By
	// default (false) it is written in layout version 3: a CRC-32C
	// trailer after every BlockSize block of the data object, and a
	// locator of 58 bytes returned as the segment's custom metadata, so a
	// read with the metadata needs no manifest (storage_locator.go). For
	// readers that predate version 3.
	ChecksumsInManifest bool
	// Compression compresses each chunk with zstd; a chunk that does not
	// shrink is stored raw. Default false: Kafka batches are usually
	// compressed by producers already. Kafka (Aiven's RSM):
	// compression.enabled.
	Compression bool
	// DataObjectBytes bounds the stored bytes of one data object of a
	// compressed segment, and so the memory a compressed copy holds (one
	// such buffer plus two chunks). At least ChunkSize. Default the larger
	// of 16 MiB and ChunkSize. An uncompressed segment is always one data
	// object uploaded straight from SegmentData.Log.
	DataObjectBytes int
	// ReadAheadBytes bounds the stored bytes one ranged Get of a fetch asks
	// for (a Get always covers at least one chunk). A longer range is read
	// in several Gets as its body is consumed, so a caller that asks for
	// the rest of a segment and stops after a few batches (Kafka's
	// fetchLogSegment(start) pattern: a stream to the segment end, read up
	// to max.partition.fetch.bytes, about 1 MiB) does not leave a large
	// transfer behind. Default twice ChunkSize.
	ReadAheadBytes int
	// ManifestCacheEntries is how many decoded manifests are kept (LRU,
	// keyed by segment id) so that fetches from a hot segment read only
	// data. A manifest takes about 33 bytes per chunk (33 KiB for 1 GiB at
	// the default chunk size). Default 256; negative disables the cache.
	ManifestCacheEntries int
	// SequentialUploads makes a copy upload its data objects, then its
	// indexes object, from the calling goroutine; a failed data upload
	// leaves the indexes unsent. Default false: the indexes upload
	// beside the data, which saves a round trip per copy. For
	// deterministic harnesses: which of a copy's uploads a store fault
	// hits, and what reaches the store, then does not depend on the Go
	// scheduler.
	SequentialUploads bool
	// Logger receives copy, delete and corruption events. Default
	// zap.NewNop().
	Logger *zap.Logger
}

const (
	defaultChunkSize            = 1 << 20
	defaultDataObjectBytes      = 16 << 20
	defaultManifestCacheEntries = 256
	defaultBlockSize            = 4 << 10
	defaultManifestBlockSize    = 16 << 10
	// checksumBlockBytes is the read size of the checksum pass of an
	// uncompressed copy.
	checksumBlockBytes = 1 << 20
)

// StorageMetrics are the StorageManager's counters since it was made.
type StorageMetrics struct {
	SegmentsCopied  int64 // CopySegment calls that succeeded
	SegmentsDeleted int64 // DeleteSegment calls that succeeded, and segments DeleteOrphans removed
	ObjectsPut      int64 // objects stored (data, indexes, manifests)
	BytesPut        int64 // stored bytes of those objects
	ObjectsDeleted  int64 // Delete calls that succeeded (missing objects included)
	GetRequests     int64 // Get calls issued (manifests, indexes, data ranges)
	BytesFetched    int64 // stored bytes received from Get bodies
	ChunksFetched   int64 // data chunks read and verified
	ManifestHits    int64 // manifests served from the cache
	ManifestMisses  int64 // manifests read from the store
	LocatorReads    int64 // layouts taken from the segment's custom metadata (no manifest Get)
	// ChecksumRereadBytes are bytes of uncompressed copies read a second
	// time to checksum them, because the upload did not read them in
	// order within their chunk (0 for a store that reads each part front
	// to back from a chunk boundary).
	ChecksumRereadBytes int64
	// SpeculativeReads are data Gets a fetch issued beside the Get of a
	// manifest not cached (counted in GetRequests too), guessing this
	// manager's own layout; SpeculativeServed those whose bytes the
	// manifest confirmed and the fetch served (the others' bytes are
	// counted in BytesFetched and dropped).
	SpeculativeReads, SpeculativeServed int64
	Corruptions                         int64 // *CorruptionError results
	Errors                              int64 // calls (and reads of fetched segments) that failed, corruption included
}

// storageCounters are the atomics behind StorageMetrics.
type storageCounters struct {
	segmentsCopied, segmentsDeleted, objectsPut, bytesPut, objectsDeleted  atomic.Int64
	getRequests, bytesFetched, chunksFetched, manifestHits, manifestMisses atomic.Int64
	corruptions, errors, checksumRereadBytes, locatorReads                 atomic.Int64
	speculativeReads, speculativeServed                                    atomic.Int64
}

// StorageManager is the data plane of the remote tier: it uploads, reads
// and deletes the objects of remote segments in an objstore.Store. Kafka:
// RemoteStorageManager. It keeps no state besides a cache of manifests: the
// metadata plane (MetadataManager) says which segments exist.
//
// # Object layout
//
// Each copy attempt (SegmentID) writes under its own prefix (see
// storage_keys.go and DESIGN.md 5.6):
//
//	<prefix><topic>-<topic id>/<partition>/<start offset>-<segment id>/
//	    data-000000 ...   the .log: blocks each followed by its CRC-32C
//	                      (version 3), or chunks (raw or zstd per chunk)
//	    indexes           offset, time, producer snapshot, [txn,] epochs
//	    manifest          the layout: the locator (version 3), or chunk
//	                      and index tables with CRC-32Cs
//
// The manifest is written last: its presence means the copy is complete.
// Every block, chunk and index carries a CRC-32C of its stored bytes, so
// ranged reads, which no store can checksum, are verified end to end. In
// version 3 the locator, returned as custom metadata, lets a read skip the
// manifest (storage_locator.go).
//
// # Concurrency
//
// Safe for concurrent use. The only lock is the manifest cache's mutex, a
// leaf held for map and list updates only; no I/O runs under it.
type StorageManager struct {
	store  objstore.Store
	opts   StorageOptions // defaults filled in, immutable
	logger *zap.Logger

	encoder *zstd.Encoder // EncodeAll only: safe for concurrent use
	decoder *zstd.Decoder // DecodeAll only, capped by cap(dst)

	cache   *manifestCache // nil when disabled
	metrics storageCounters
}

// NewStorageManager returns a StorageManager writing to store. The store
// is the caller's: the manager never closes it.
func NewStorageManager(store objstore.Store, opts StorageOptions) (*StorageManager, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: remote: nil object store", ErrInvalidArgument)
	}
	if err := validateKeyPrefix(opts.KeyPrefix); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) (*StorageManager, error) {
		return nil, fmt.Errorf("%w: remote: storage options: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if opts.ChunkSize == 0 {
		opts.ChunkSize = defaultChunkSize
	}
	if opts.ChunkSize < 0 || opts.ChunkSize > MaxChunkBytes {
		return bad("chunk size %d, want 1 to %d", opts.ChunkSize, MaxChunkBytes)
	}
	if opts.DataObjectBytes == 0 {
		opts.DataObjectBytes = max(defaultDataObjectBytes, opts.ChunkSize)
	}
	if opts.DataObjectBytes < opts.ChunkSize {
		return bad("data object bytes %d below the chunk size %d", opts.DataObjectBytes, opts.ChunkSize)
	}
	if opts.ReadAheadBytes == 0 {
		opts.ReadAheadBytes = 2 * opts.ChunkSize
	}
	if opts.ReadAheadBytes < 0 {
		return bad("read-ahead bytes %d", opts.ReadAheadBytes)
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = defaultBlockSize
		if opts.ChecksumsInManifest {
			opts.BlockSize = defaultManifestBlockSize
		}
	}
	if opts.ManifestCacheEntries == 0 {
		opts.ManifestCacheEntries = defaultManifestCacheEntries
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &StorageManager{store: store, opts: opts, logger: opts.Logger}
	if opts.ManifestCacheEntries > 0 {
		s.cache = newManifestCache(opts.ManifestCacheEntries)
	}
	var err error
	// EncodeAll and DecodeAll on nil streams start no goroutines, so the
	// manager needs no Close.
	s.encoder, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(0))
	if err != nil {
		return nil, fmt.Errorf("remote: zstd encoder: %w", err)
	}
	s.decoder, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(MaxChunkBytes))
	if err != nil {
		return nil, fmt.Errorf("remote: zstd decoder: %w", err)
	}
	return s, nil
}

// Metrics returns the counters.
func (s *StorageManager) Metrics() StorageMetrics {
	c := &s.metrics
	return StorageMetrics{
		SegmentsCopied: c.segmentsCopied.Load(), SegmentsDeleted: c.segmentsDeleted.Load(),
		ObjectsPut: c.objectsPut.Load(), BytesPut: c.bytesPut.Load(), ObjectsDeleted: c.objectsDeleted.Load(),
		GetRequests: c.getRequests.Load(), BytesFetched: c.bytesFetched.Load(), ChunksFetched: c.chunksFetched.Load(),
		ManifestHits: c.manifestHits.Load(), ManifestMisses: c.manifestMisses.Load(), LocatorReads: c.locatorReads.Load(),
		ChecksumRereadBytes: c.checksumRereadBytes.Load(),
		SpeculativeReads:    c.speculativeReads.Load(), SpeculativeServed: c.speculativeServed.Load(),
		Corruptions: c.corruptions.Load(), Errors: c.errors.Load(),
	}
}

// count records a failed call (and a corruption) in the metrics and
// returns err unchanged.
func (s *StorageManager) count(err error) error {
	if err != nil && !errors.Is(err, ErrIndexNotFound) { // an answer, not a failure
		s.metrics.errors.Add(1)
		if errors.Is(err, ErrCorrupt) {
			s.metrics.corruptions.Add(1)
		}
	}
	return err
}

// CopySegment uploads data for m: its data objects, then the "indexes"
// object, then the manifest (the commit point: a segment without a
// manifest reads as ErrSegmentDataNotFound). m.SegmentID must be fresh for
// the attempt (the Manager commits m as COPY_SEGMENT_STARTED before calling
// this, so a crash leaves objects the metadata can name); a retry of the
// same m overwrites the same keys, so CopySegment is idempotent.
//
// An uncompressed segment in layout version 3 (the default; see
// StorageOptions.ChecksumsInManifest) returns its locator, 58 bytes, as
// custom metadata: stored in the segment's metadata (the Manager does, as
// Kafka stores RemoteLogSegmentMetadata.customMetadata), it lets a read
// find and verify the bytes without the manifest. Other layouts return
// nil: everything a read needs is in the manifest.
//
// The copy checks that data agrees with m (LogSize == m.SizeBytes, a
// transaction index iff !m.TxnIndexEmpty, the leader epochs well formed)
// and fails with ErrInvalidArgument otherwise, before uploading anything.
//
// The data objects and the "indexes" object upload concurrently; the
// manifest waits for both.
//
// An uncompressed segment is one data object: objstore.PutLarge uploads it
// from Log (multipart where the store supports it) and the chunk checksums
// are computed from the bytes as the upload reads them, so Log is read
// once; only bytes a store reads out of order within a chunk are read
// again afterwards to checksum them (StorageMetrics.ChecksumRereadBytes). A
// compressed segment is compressed chunk by chunk into a buffer of at most
// DataObjectBytes, uploaded as one data object whenever the next chunk
// would not fit: stored sizes are only known after compressing, and the
// Store interface has no streaming multipart upload, so bounded objects
// keep memory bounded without a local spool file.
func (s *StorageManager) CopySegment(ctx context.Context, m *SegmentMetadata, data SegmentData) (customMetadata []byte, err error) {
	begin := time.Now()
	keys, err := s.checkCopy(m, data)
	if err != nil {
		return nil, s.count(err)
	}
	man := &manifest{
		topicID: m.SegmentID.TopicIDPartition.TopicID, partition: m.SegmentID.TopicIDPartition.Partition,
		segmentID: m.SegmentID.ID, startOffset: m.StartOffset, logSize: data.LogSize,
		chunkSize: int64(s.opts.ChunkSize),
	}
	// The data objects and the indexes object are independent: they
	// upload at once (they fill different fields of man). Only the
	// manifest, the commit point, waits for both. A failure of one does
	// not cancel the other: a cancelled request may still be applied by
	// the store after the cleanup of the failed copy listed the segment's
	// objects, leaving an object of no segment; waiting for its answer
	// settles it before the copy returns.
	uctx, failFast := ctx, func() {}
	if mutation.Disabled(mutation.CopySettlesUploads) {
		var cancel context.CancelFunc
		uctx, cancel = context.WithCancel(ctx)
		defer cancel()
		failFast = cancel
	}
	indexesDone := make(chan error, 1)
	putIndexes := func() {
		err := s.putIndexes(uctx, keys, data, man)
		if err != nil {
			failFast()
		}
		indexesDone <- err
	}
	if !s.opts.SequentialUploads {
		go putIndexes()
	}
	switch {
	case s.opts.Compression:
		err = s.putCompressed(uctx, keys, data, man)
	case s.writesFramed(data.LogSize):
		err = s.putFramed(uctx, keys, data, man)
	default:
		err = s.putPlain(uctx, keys, data, man)
	}
	if err != nil {
		failFast()
	}
	if s.opts.SequentialUploads {
		if err == nil {
			putIndexes()
		} else {
			indexesDone <- nil // not sent: the data's failure is the cause
		}
	}
	err = cmp.Or(err, <-indexesDone)
	if err == nil {
		b := encodeManifest(make([]byte, 0, man.encodedLen()), man)
		err = s.put(ctx, keys.manifest(), b)
	}
	if err == nil && man.framed {
		customMetadata = encodeLocator(make([]byte, 0, maxLocatorLen), man)
	}
	if err != nil {
		s.logger.Warn("remote segment copy failed", zap.Stringer("segment", m.SegmentID), zap.Error(err))
		return nil, s.count(fmt.Errorf("remote: copy segment %s: %w", m.SegmentID, err))
	}
	if s.cache != nil {
		s.cache.add(m.SegmentID, man, keys)
	}
	s.metrics.segmentsCopied.Add(1)
	s.logger.Debug("remote segment copied", zap.Stringer("segment", m.SegmentID),
		zap.Int64("start-offset", m.StartOffset), zap.Int64("log-bytes", data.LogSize),
		zap.Int("data-objects", len(man.objectSizes)), zap.Int("chunks", len(man.chunks)),
		zap.Duration("took", time.Since(begin)))
	return customMetadata, nil
}

// checkCopy validates a copy's arguments and returns its keys.
func (s *StorageManager) checkCopy(m *SegmentMetadata, data SegmentData) (segmentKeys, error) {
	keys, err := s.keysFor(m)
	if err != nil {
		return keys, err
	}
	if err := m.Validate(); err != nil {
		return keys, err
	}
	bad := func(format string, args ...any) (segmentKeys, error) {
		return keys, fmt.Errorf("%w: remote: copy segment %s: %s", ErrInvalidArgument, m.SegmentID, fmt.Sprintf(format, args...))
	}
	switch {
	case data.LogSize != m.SizeBytes:
		return bad("log size %d differs from the metadata's size %d", data.LogSize, m.SizeBytes)
	case data.LogSize > 0 && data.Log == nil:
		return bad("nil log of %d bytes", data.LogSize)
	case (len(data.TxnIndex) == 0) != m.TxnIndexEmpty:
		return bad("transaction index of %d bytes but TxnIndexEmpty=%t", len(data.TxnIndex), m.TxnIndexEmpty)
	case (data.LogSize+int64(s.opts.ChunkSize)-1)/int64(s.opts.ChunkSize) > maxChunksPerSegment:
		return bad("%d bytes make more than %d chunks of %d", data.LogSize, maxChunksPerSegment, s.opts.ChunkSize)
	}
	for _, ix := range [...][]byte{data.OffsetIndex, data.TimeIndex, data.TxnIndex, data.ProducerSnapshot, data.ProducerBatches} {
		if len(ix) > maxIndexBytes {
			return bad("index of %d bytes, more than %d", len(ix), maxIndexBytes)
		}
	}
	for i, e := range data.LeaderEpochs {
		switch {
		case e.Epoch < 0 || e.StartOffset < 0:
			return bad("negative leader epoch entry %s", e)
		case e.StartOffset > m.EndOffset:
			return bad("leader epoch entry %s starts after the segment end %d", e, m.EndOffset)
		case i > 0 && (e.Epoch <= data.LeaderEpochs[i-1].Epoch || e.StartOffset <= data.LeaderEpochs[i-1].StartOffset):
			return bad("leader epochs not strictly increasing: %s then %s", data.LeaderEpochs[i-1], e)
		}
	}
	return keys, nil
}

// put stores b under key, counting it.
func (s *StorageManager) put(ctx context.Context, key string, b []byte) error {
	if err := s.store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}); err != nil {
		return err
	}
	s.metrics.objectsPut.Add(1)
	s.metrics.bytesPut.Add(int64(len(b)))
	return nil
}

// putPlain uploads an uncompressed segment as one data object straight
// from data.Log, checksumming the bytes as the upload reads them (a
// checksumReaderAt), so the segment is read once. Bytes the upload did not
// read in order inside their chunk (a store that reads out of order, or
// reads a part twice after a retry that started mid-chunk) are checksummed
// afterwards by a read of just those bytes, counted in
// StorageMetrics.ChecksumRereadBytes.
func (s *StorageManager) putPlain(ctx context.Context, keys segmentKeys, data SegmentData, man *manifest) error {
	if data.LogSize == 0 {
		return nil
	}
	if bs := int64(s.opts.BlockSize); bs > 0 && bs < man.chunkSize && blockCount(data.LogSize, man.chunkSize, bs) <= maxBlocksPerSegment {
		man.blockSize = bs
	}
	cr := newChecksumReaderAt(data.Log, data.LogSize, man.chunkSize, man.blockSize)
	key := keys.data(0)
	if err := objstore.PutLarge(ctx, s.store, key, cr, data.LogSize, objstore.MultipartOptions{}); err != nil {
		return err
	}
	s.metrics.objectsPut.Add(1)
	s.metrics.bytesPut.Add(data.LogSize)
	reread, err := cr.finish(ctx)
	s.metrics.checksumRereadBytes.Add(reread)
	if err != nil {
		return err
	}
	for k, sum := range cr.sums {
		off := int64(k) * man.chunkSize
		n := min(man.chunkSize, data.LogSize-off)
		man.chunks = append(man.chunks, manifestChunk{rawOffset: off, rawLen: n, codec: codecNone,
			object: 0, storedOffset: off, storedLen: n, crc: sum.crc})
	}
	man.blocks = cr.blocks
	man.objectSizes = []int64{data.LogSize}
	return nil
}

// checksumReaderAt passes ReadAt calls through to r and computes the
// CRC-32C of each chunk of the bytes they return: a read that continues a
// chunk where its checksummed prefix ends extends it; other bytes (re-reads,
// reads ahead of the prefix) are not fed. The segment is immutable during a
// copy, so every read of a position returns the same bytes and the sums are
// those of the bytes uploaded. With a block size, each chunk's block sums
// are computed alongside (blocks, chunk by chunk as the manifest stores
// them). finish completes the chunks the reads left short.
type checksumReaderAt struct {
	r                    io.ReaderAt
	size                 int64
	chunkSize, blockSize int64 // blockSize 0: no block sums
	// mu guards sums and blocks. Held for CRC-32C of one read only
	// (several GB/s), so a multipart upload's parallel part reads wait on
	// it briefly.
	mu     sync.Mutex
	sums   []chunkSum
	blocks []uint32
}

type chunkSum struct {
	fed int64 // bytes of the chunk checksummed so far, from its start
	crc uint32
}

func newChecksumReaderAt(r io.ReaderAt, size, chunkSize, blockSize int64) *checksumReaderAt {
	c := &checksumReaderAt{r: r, size: size, chunkSize: chunkSize, blockSize: blockSize,
		sums: make([]chunkSum, (size+chunkSize-1)/chunkSize)}
	if blockSize > 0 {
		c.blocks = make([]uint32, blockCount(size, chunkSize, blockSize))
	}
	return c
}

func (c *checksumReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	if n > 0 && off >= 0 {
		c.mu.Lock()
		c.feed(p[:n], off)
		c.mu.Unlock()
	}
	return n, err
}

// feed checksums the bytes b read at off that extend their chunks'
// checksummed prefixes.
//
// REQUIRES: c.mu held.
func (c *checksumReaderAt) feed(b []byte, off int64) {
	for len(b) > 0 && off < c.size {
		k := off / c.chunkSize
		start := k * c.chunkSize
		n := min(int64(len(b)), start+min(c.chunkSize, c.size-start)-off)
		if sum := &c.sums[k]; sum.fed == off-start {
			c.extend(k, sum, b[:n])
		}
		b, off = b[n:], off+n
	}
}

// extend adds b, the next bytes of chunk k, to its sums.
//
// REQUIRES: c.mu held.
func (c *checksumReaderAt) extend(k int64, sum *chunkSum, b []byte) {
	sum.crc = crc32.Update(sum.crc, castagnoli, b)
	fed := int64(len(b))
	if c.blockSize > 0 {
		first := k * ((c.chunkSize + c.blockSize - 1) / c.blockSize)
		for pos := sum.fed; len(b) > 0; {
			i := first + pos/c.blockSize
			n := min(int64(len(b)), c.blockSize-pos%c.blockSize)
			if pos%c.blockSize == 0 {
				c.blocks[i] = 0
			}
			c.blocks[i] = crc32.Update(c.blocks[i], castagnoli, b[:n])
			b, pos = b[n:], pos+n
		}
	}
	sum.fed += fed
}

// finish reads and checksums what the upload's reads left unfed and
// returns how many bytes that took.
func (c *checksumReaderAt) finish(ctx context.Context) (reread int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var buf *[]byte
	defer func() { putBuffer(buf) }()
	for k := range c.sums {
		sum := &c.sums[k]
		start := int64(k) * c.chunkSize
		n := min(c.chunkSize, c.size-start)
		for sum.fed < n {
			if err := ctx.Err(); err != nil {
				return reread, err
			}
			if buf == nil {
				buf = getBuffer(int(min(int64(checksumBlockBytes), c.chunkSize)))
			}
			b := (*buf)[:min(int64(len(*buf)), n-sum.fed)]
			if err := readFullAt(c.r, b, start+sum.fed); err != nil {
				return reread, err
			}
			reread += int64(len(b))
			c.extend(int64(k), sum, b)
		}
	}
	return reread, nil
}

// putCompressed compresses data.Log chunk by chunk into data objects of at
// most DataObjectBytes stored bytes each.
func (s *StorageManager) putCompressed(ctx context.Context, keys segmentKeys, data SegmentData, man *manifest) error {
	if data.LogSize == 0 {
		return nil
	}
	raw := getBuffer(int(man.chunkSize))
	defer putBuffer(raw)
	zbuf := getBuffer(int(man.chunkSize))
	defer putBuffer(zbuf)
	object := getBuffer(s.opts.DataObjectBytes)
	defer putBuffer(object)
	group := (*object)[:0]
	flush := func() error {
		if err := s.put(ctx, keys.data(len(man.objectSizes)), group); err != nil {
			return err
		}
		man.objectSizes = append(man.objectSizes, int64(len(group)))
		group = group[:0]
		return nil
	}
	for off := int64(0); off < data.LogSize; off += man.chunkSize {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(man.chunkSize, data.LogSize-off)
		chunk := (*raw)[:n]
		if err := readFullAt(data.Log, chunk, off); err != nil {
			return err
		}
		stored, codec := s.encoder.EncodeAll(chunk, (*zbuf)[:0]), uint8(codecZstd)
		if len(stored) >= len(chunk) {
			stored, codec = chunk, codecNone
		}
		if len(group)+len(stored) > s.opts.DataObjectBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		man.chunks = append(man.chunks, manifestChunk{rawOffset: off, rawLen: n, codec: codec,
			object: len(man.objectSizes), storedOffset: int64(len(group)), storedLen: int64(len(stored)),
			crc: crc32.Checksum(stored, castagnoli)})
		group = append(group, stored...)
	}
	return flush()
}

// readFullAt reads exactly len(b) bytes of r at off.
func readFullAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("remote: read segment log [%d, %d): got %d bytes: %w", off, off+int64(len(b)), n, err)
}

// putIndexes uploads the "indexes" object: the auxiliary indexes
// concatenated in type order, without copying them.
func (s *StorageManager) putIndexes(ctx context.Context, keys segmentKeys, data SegmentData, man *manifest) error {
	epochs := appendEpochCheckpoint(nil, data.LeaderEpochs)
	parts := []struct {
		t IndexType
		b []byte
	}{
		{IndexOffset, data.OffsetIndex},
		{IndexTimestamp, data.TimeIndex},
		{IndexProducerSnapshot, data.ProducerSnapshot},
		{IndexTransaction, data.TxnIndex},
		{IndexLeaderEpoch, epochs},
		{IndexProducerBatches, data.ProducerBatches},
	}
	var ra multiReaderAt
	for _, p := range parts {
		if (p.t == IndexTransaction || p.t == IndexProducerBatches) && len(p.b) == 0 {
			continue
		}
		man.indexes = append(man.indexes, manifestIndex{typ: p.t, offset: ra.size, size: int64(len(p.b)),
			crc: crc32.Checksum(p.b, castagnoli)})
		ra.add(p.b)
	}
	// A SectionReader is an io.Seeker, so a store that retries a Put
	// (the S3 adapter) can rewind it.
	if err := s.store.Put(ctx, keys.indexes(), io.NewSectionReader(&ra, 0, ra.size), ra.size, objstore.PutOptions{}); err != nil {
		return err
	}
	s.metrics.objectsPut.Add(1)
	s.metrics.bytesPut.Add(ra.size)
	return nil
}

// multiReaderAt is the concatenation of byte slices as an io.ReaderAt.
type multiReaderAt struct {
	parts  [][]byte
	starts []int64
	size   int64
}

func (m *multiReaderAt) add(b []byte) {
	if len(b) == 0 {
		return
	}
	m.parts = append(m.parts, b)
	m.starts = append(m.starts, m.size)
	m.size += int64(len(b))
}

func (m *multiReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("remote: negative offset %d", off)
	}
	if off >= m.size {
		return 0, io.EOF
	}
	n := 0
	// The part holding off: the last start at or below it.
	i, found := slices.BinarySearch(m.starts, off)
	if !found {
		i--
	}
	for ; i >= 0 && i < len(m.parts) && n < len(p); i++ {
		at := off + int64(n) - m.starts[i]
		n += copy(p[n:], m.parts[i][at:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// DeleteSegment deletes every object of m's copy attempt: the manifest
// first (so a crash part-way leaves a segment that reads as incomplete,
// never one that reads as complete with missing data), then whatever a
// listing of the segment's prefix finds. It is idempotent: missing objects
// are success, and a segment never copied deletes nothing. A store whose
// listings lag behind its writes may leave objects a listing missed;
// DeleteOrphans removes them later.
func (s *StorageManager) DeleteSegment(ctx context.Context, m *SegmentMetadata) error {
	keys, err := s.keysFor(m)
	if err != nil {
		return s.count(err)
	}
	if s.cache != nil {
		s.cache.remove(m.SegmentID)
	}
	if err := s.deletePrefix(ctx, keys.dir, nil); err != nil {
		return s.count(fmt.Errorf("remote: delete segment %s: %w", m.SegmentID, err))
	}
	if s.cache != nil {
		// A fetch that read the manifest while it was being deleted may
		// have cached it again.
		s.cache.remove(m.SegmentID)
	}
	s.metrics.segmentsDeleted.Add(1)
	s.logger.Debug("remote segment deleted", zap.Stringer("segment", m.SegmentID))
	return nil
}

// deletePrefix deletes the manifest under dir, then the other objects:
// listed ones, those of known (a listing already made; nil to list now).
func (s *StorageManager) deletePrefix(ctx context.Context, dir string, known []string) error {
	if err := s.delete(ctx, dir+manifestObject); err != nil {
		return err
	}
	if known == nil {
		err := objstore.ListAll(ctx, s.store, dir, func(o objstore.ObjectInfo) error {
			known = append(known, o.Key)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, k := range known {
		if k == dir+manifestObject {
			continue
		}
		if err := s.delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func (s *StorageManager) delete(ctx context.Context, key string) error {
	if err := s.store.Delete(ctx, key); err != nil {
		return err
	}
	s.metrics.objectsDeleted.Add(1)
	return nil
}

// DeleteOrphans lists every object of tp and deletes the segments whose id
// keep rejects, manifest first; it returns the ids it deleted completely,
// ordered by start offset. Such objects are what a crash between the
// metadata and the upload leaves (the Manager's DeleteSegment of a
// COPY_SEGMENT_STARTED segment removes them too), or what lost metadata
// leaves behind. keep must return true for every segment the metadata
// knows in any state (COPY_SEGMENT_STARTED included: its copy may be
// running); it is called once per segment found, with no lock held.
// Objects under the partition's prefix whose keys do not parse as this
// layout are left alone (and logged). A failure to delete one segment does
// not stop the sweep: the errors are joined and returned with the ids that
// were deleted.
func (s *StorageManager) DeleteOrphans(ctx context.Context, tp TopicIDPartition, keep func(SegmentID) bool) (deleted []SegmentID, err error) {
	if err := validatePartitionForKeys(tp); err != nil {
		return nil, s.count(err)
	}
	if keep == nil {
		return nil, s.count(fmt.Errorf("%w: remote: nil keep function", ErrInvalidArgument))
	}
	prefix := s.partitionPrefix(tp)
	type found struct {
		id   SegmentID
		dir  string
		keys []string
	}
	var segments []*found // in key order, so by start offset
	err = objstore.ListAll(ctx, s.store, prefix, func(o objstore.ObjectInfo) error {
		rest, ok := strings.CutPrefix(o.Key, prefix)
		var uuid UUID
		var start int64
		if ok {
			uuid, start, _, ok = parseSegmentObject(rest)
		}
		if !ok {
			s.logger.Warn("remote: object of an unknown layout under a partition prefix left alone",
				zap.String("key", o.Key))
			return nil
		}
		dir := fmt.Sprintf("%s%0*d-%s/", prefix, offsetDigits, start, uuid)
		if n := len(segments); n == 0 || segments[n-1].dir != dir {
			segments = append(segments, &found{id: SegmentID{TopicIDPartition: tp, ID: uuid}, dir: dir})
		}
		f := segments[len(segments)-1]
		f.keys = append(f.keys, o.Key)
		return nil
	})
	if err != nil {
		return nil, s.count(fmt.Errorf("remote: list orphans of %s: %w", tp, err))
	}
	var errs []error
	for _, f := range segments {
		if keep(f.id) {
			continue
		}
		if s.cache != nil {
			s.cache.remove(f.id)
		}
		if err := s.deletePrefix(ctx, f.dir, f.keys); err != nil {
			errs = append(errs, fmt.Errorf("remote: delete orphan %s: %w", f.id, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		deleted = append(deleted, f.id)
		s.metrics.segmentsDeleted.Add(1)
		s.logger.Info("remote orphan segment deleted", zap.Stringer("segment", f.id), zap.Int("objects", len(f.keys)))
	}
	return deleted, s.count(errors.Join(errs...))
}

// Buffers of chunk size and smaller are pooled: a fetch holds one or two
// for its lifetime, a copy two or three.
var bufferPool sync.Pool // of *[]byte

// getBuffer returns a pooled buffer of length n.
func getBuffer(n int) *[]byte {
	if p, ok := bufferPool.Get().(*[]byte); ok {
		if cap(*p) >= n {
			*p = (*p)[:n]
			return p
		}
		bufferPool.Put(p)
	}
	b := make([]byte, n)
	return &b
}

func putBuffer(p *[]byte) {
	if p != nil {
		bufferPool.Put(p)
	}
}
