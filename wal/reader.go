package wal

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
)

// ReaderOptions configure a Reader. Zero values mean the defaults.
type ReaderOptions struct {
	// Store holds the objects. Required.
	Store objstore.Store
	// ControlPlane answers where the batches are. Required.
	ControlPlane ControlPlane
	// Cache, if non-nil, is looked up before any GET (a Writer on the
	// same broker fills it).
	Cache *ObjectCache
	// ReadConcurrency is how many GETs one Fetch runs at once. Default 8.
	ReadConcurrency int
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Reader serves fetches of many partitions from WAL objects.
//
// Concurrency: safe for concurrent use; it holds no lock across I/O (the
// cache's mutex is taken only for lookups).
type Reader struct {
	opts    ReaderOptions
	metrics readerCounters
}

// NewReader returns a Reader.
func NewReader(opts ReaderOptions) (*Reader, error) {
	if opts.Store == nil || opts.ControlPlane == nil {
		return nil, invalidf("reader needs a Store and a ControlPlane")
	}
	setDefault(&opts.ReadConcurrency, defaultUploads)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Reader{opts: opts}, nil
}

// FetchResult answers one partition of a Fetch.
type FetchResult struct {
	// Err is FindBatches' *PartitionError, or, when not even the first
	// batch could be served, an *StorageError (ErrObjectRead, retriable) or
	// a *BatchReadError (ErrCorruption or ErrInconsistentAnswer). When a
	// later batch fails, the good prefix is served with Err nil, as
	// Kafka serves the valid prefix of a log; the next fetch, starting
	// at the failed batch, reports it.
	Err error
	// Records holds the batches in offset order, each with its assigned
	// base offset written in (outside the CRC). It is the Reader's own
	// copy.
	Records []byte
	// LogStartOffset and HighWatermark are W and HW as FindBatches saw
	// them.
	LogStartOffset int64
	HighWatermark  int64
}

// BatchReadError reports a batch whose bytes do not match its
// coordinates. It unwraps to Err (ErrCorruption or ErrInconsistentAnswer)
// and to Cause (the record package's error), if any.
type BatchReadError struct {
	ObjectKey  string
	ByteOffset int64
	Partition  TopicIDPartition
	BaseOffset int64
	Err        error
	Cause      error
	Detail     string
}

func (e *BatchReadError) Error() string {
	msg := fmt.Sprintf("%v: partition %s, batch at offset %d, object %q byte %d: %s",
		e.Err, e.Partition, e.BaseOffset, e.ObjectKey, e.ByteOffset, e.Detail)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *BatchReadError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// objectRange is the part of one object a fetch reads.
type objectRange struct {
	start, end int64 // [start, end) in the object
	data       []byte
	err        error
}

// Fetch finds the batches of every partition of req, reads each object
// once (one ranged GET from its first to its last needed byte, unless the
// cache holds it), checks every batch and writes in its assigned offsets.
// The returned error is for the whole call (the control plane failed);
// results[i] answers req.Partitions[i].
func (r *Reader) Fetch(ctx context.Context, req FindBatchesRequest) ([]FetchResult, error) {
	r.metrics.fetches.Add(1)
	found, err := r.opts.ControlPlane.FindBatches(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(found) != len(req.Partitions) {
		return nil, fmt.Errorf("%w: %d find results for %d partitions", ErrInconsistentAnswer, len(found), len(req.Partitions))
	}
	ranges := planRanges(found)
	r.readRanges(ctx, ranges)
	out := make([]FetchResult, len(found))
	for i, f := range found {
		out[i] = FetchResult{Err: f.Err, LogStartOffset: f.LogStartOffset, HighWatermark: f.HighWatermark}
		if f.Err == nil {
			out[i].Records, out[i].Err = r.assemble(req.Partitions[i].Partition, f.Batches, ranges)
		}
	}
	return out, nil
}

// planRanges returns, per object, the smallest range covering every
// batch the fetch needs from it (neighbours coalesce into one GET; the
// bytes of other partitions in between are read and dropped, which is
// cheaper than a GET per batch).
func planRanges(found []FindBatchesResult) map[string]*objectRange {
	ranges := map[string]*objectRange{}
	for _, f := range found {
		for _, b := range f.Batches {
			if b.ByteOffset < 0 || b.Size <= 0 || b.ByteOffset > maxObjectBytes || b.Size > maxObjectBytes {
				continue // assemble reports it
			}
			rg, ok := ranges[b.ObjectKey]
			if !ok {
				ranges[b.ObjectKey] = &objectRange{start: b.ByteOffset, end: b.ByteOffset + b.Size}
				continue
			}
			rg.start, rg.end = min(rg.start, b.ByteOffset), max(rg.end, b.ByteOffset+b.Size)
		}
	}
	return ranges
}

// readRanges fills every range from the cache or with one GET each, at
// most ReadConcurrency at once.
func (r *Reader) readRanges(ctx context.Context, ranges map[string]*objectRange) {
	sem := make(chan struct{}, r.opts.ReadConcurrency)
	var wg sync.WaitGroup
	for key, rg := range ranges {
		if c := r.opts.Cache; c != nil {
			if obj, ok := c.Get(key); ok && int64(len(obj)) >= rg.end {
				rg.data = obj[rg.start:rg.end]
				r.metrics.cacheHits.Add(1)
				continue
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			data, err := objstore.ReadRange(ctx, r.opts.Store, key, rg.start, rg.end-rg.start)
			r.metrics.gets.Add(1)
			if err != nil {
				r.metrics.getErrors.Add(1)
				rg.err = &StorageError{ObjectKey: key, Err: ErrObjectRead, Cause: err}
				return
			}
			r.metrics.getBytes.Add(int64(len(data)))
			rg.data = data
		}()
	}
	wg.Wait()
}

// assemble copies a partition's batches out of the read ranges, checking
// each against its coordinates, and stops at the first that fails.
func (r *Reader) assemble(tp TopicIDPartition, batches []BatchInfo, ranges map[string]*objectRange) ([]byte, error) {
	var out []byte
	if n := assembledBytes(batches, ranges); n > 0 {
		out = make([]byte, 0, n)
	}
	next := int64(-1)
	for _, info := range batches {
		raw, err := sliceBatch(tp, info, ranges[info.ObjectKey], next)
		if err == nil {
			err = checkBatch(tp, info, raw)
		}
		if err != nil {
			if len(out) == 0 {
				r.metrics.failedPartitions.Add(1)
				r.opts.Logger.Warn("wal: fetch failed", zap.Stringer("partition", tp), zap.Error(err))
				return nil, err
			}
			r.metrics.truncatedPartitions.Add(1)
			return out, nil
		}
		start := len(out)
		out = append(out, raw...)
		b, _ := record.ReadBatch(out[start:]) // checked above
		b.SetBaseOffset(info.BaseOffset)
		next = info.LastOffset + 1
	}
	return out, nil
}

// assembledBytes is the size of a partition's answer when every batch
// checks: one allocation instead of a growing buffer (a fetch of 1 MiB
// grown by append allocated about 5 MiB and copied most of it again).
// Only sizes that lie inside a range read count, so coordinates that do
// not check cannot make it allocate more than the fetch read.
func assembledBytes(batches []BatchInfo, ranges map[string]*objectRange) int {
	var n int64
	for _, info := range batches {
		rg := ranges[info.ObjectKey]
		if rg == nil || rg.err != nil || info.ByteOffset < rg.start || info.Size <= 0 ||
			info.ByteOffset+info.Size > rg.start+int64(len(rg.data)) {
			break // assemble stops here
		}
		n += info.Size
	}
	return int(n)
}

func sliceBatch(tp TopicIDPartition, info BatchInfo, rg *objectRange, next int64) ([]byte, error) {
	bad := func(format string, args ...any) error {
		return &BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: ErrInconsistentAnswer, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case rg == nil || info.ByteOffset < 0 || info.Size <= 0:
		return nil, bad("byte range [%d, +%d) is not a range", info.ByteOffset, info.Size)
	case info.LastOffset < info.BaseOffset || (next >= 0 && info.BaseOffset < next):
		return nil, bad("offsets [%d, %d] after %d", info.BaseOffset, info.LastOffset, next)
	case rg.err != nil:
		return nil, rg.err
	case info.ByteOffset < rg.start || info.ByteOffset+info.Size > rg.start+int64(len(rg.data)):
		return nil, bad("byte range [%d, +%d) outside the %d bytes read", info.ByteOffset, info.Size, len(rg.data))
	}
	return rg.data[info.ByteOffset-rg.start : info.ByteOffset-rg.start+info.Size], nil
}

// checkBatch checks that raw is one whole, intact v2 batch covering the
// offsets its coordinates say.
func checkBatch(tp TopicIDPartition, info BatchInfo, raw []byte) error {
	corrupt := func(cause error, format string, args ...any) error {
		return &BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: ErrCorruption, Cause: cause, Detail: fmt.Sprintf(format, args...)}
	}
	b, err := record.ReadBatch(raw)
	if err == nil {
		err = b.Validate()
	}
	switch {
	case err != nil:
		return corrupt(err, "batch does not check")
	case int64(b.Size()) != info.Size:
		return corrupt(nil, "batch of %d bytes, coordinates say %d", b.Size(), info.Size)
	case int64(b.LastOffsetDelta()) != info.LastOffset-info.BaseOffset:
		return corrupt(nil, "batch covers %d offsets, coordinates say %d", int64(b.LastOffsetDelta())+1, info.LastOffset-info.BaseOffset+1)
	}
	return nil
}

// ReaderMetrics is a snapshot of a Reader's counters.
type ReaderMetrics struct {
	Fetches   int64
	Gets      int64
	GetBytes  int64
	GetErrors int64
	// CacheHits counts objects served from the cache instead of a GET.
	CacheHits int64
	// FailedPartitions counts partitions answered with an error because
	// their first batch failed; TruncatedPartitions those served a
	// prefix because a later one did.
	FailedPartitions    int64
	TruncatedPartitions int64
}

type readerCounters struct {
	fetches, gets, getBytes, getErrors, cacheHits atomic.Int64
	failedPartitions, truncatedPartitions         atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (r *Reader) Metrics() ReaderMetrics {
	c := &r.metrics
	return ReaderMetrics{Fetches: c.fetches.Load(), Gets: c.gets.Load(), GetBytes: c.getBytes.Load(),
		GetErrors: c.getErrors.Load(), CacheHits: c.cacheHits.Load(),
		FailedPartitions: c.failedPartitions.Load(), TruncatedPartitions: c.truncatedPartitions.Load()}
}
