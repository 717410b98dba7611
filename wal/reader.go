package wal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
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
	// MaxCoalesceGap: the ranges one Fetch needs from one object (one
	// per partition) are read with one GET when the bytes between them
	// are at most this many; the bytes in between are read and dropped.
	// Default 1 MiB; negative: one GET per partition and object.
	MaxCoalesceGap int64
	// AnswerPoolBytes bounds the bytes of released answer buffers
	// (Release) the Reader keeps for the answers of later fetches.
	// Default DefaultAnswerPoolBytes; negative: keep none.
	AnswerPoolBytes int64
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// defaultMaxCoalesceGap is ReaderOptions.MaxCoalesceGap's default: a
// GET's fixed cost (tens of milliseconds on S3) buys about 1 MiB of
// transfer, so reading up to that much of other partitions' bytes is
// cheaper than a second request.
const defaultMaxCoalesceGap = 1 << 20

// Reader serves fetches of many partitions from WAL objects.
//
// Concurrency: safe for concurrent use; it holds no lock across I/O (the
// cache's mutex is taken only for lookups).
type Reader struct {
	opts    ReaderOptions
	answers answerPool
	metrics readerCounters
}

// NewReader returns a Reader.
func NewReader(opts ReaderOptions) (*Reader, error) {
	if opts.Store == nil || opts.ControlPlane == nil {
		return nil, invalidf("reader needs a Store and a ControlPlane")
	}
	setDefault(&opts.ReadConcurrency, defaultUploads)
	if opts.MaxCoalesceGap == 0 {
		opts.MaxCoalesceGap = defaultMaxCoalesceGap
	}
	if opts.AnswerPoolBytes == 0 {
		opts.AnswerPoolBytes = DefaultAnswerPoolBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Reader{opts: opts, answers: answerPool{max: opts.AnswerPoolBytes}}, nil
}

// FetchResult answers one partition of a Fetch.
//
// What the Reader verifies, per partition, before a batch is served:
//   - coordinates: a byte range inside the object (a range past the
//     object's end is ErrCorruption: the object is shorter than what
//     was committed), LastOffset >= BaseOffset;
//   - offsets: the first batch does not end before the requested
//     offset, and each later batch starts exactly one past the last
//     offset of the batch before it (a gap or an overlap is
//     ErrInconsistentAnswer at that batch). The first batch may start
//     after the requested offset, which FindBatchesResult documents
//     (the WAL holds nothing at it); the Reader cannot tell that from a
//     skipped first batch, so a caller that needs contiguity with its
//     own log (consolidate.Fetcher) checks it against its log end. A
//     later row of the answer that holds offsets between the requested
//     offset and such a first batch (rows out of order) shows the first
//     batch skipped them: the whole answer is refused, no prefix;
//   - bytes: one whole v2 batch whose CRC checks, of the committed size,
//     covering the committed number of offsets;
//   - binding: when the row has one (BatchInfo.Binding.Known), the
//     batch's CRC field, partition leader epoch field (which that CRC
//     does not cover), producer id, producer epoch and base sequence
//     equal the ones committed: bytes of another batch, another
//     partition or another version of the object are ErrCorruption.
//     Rows without one get the checks above only.
//
// When every row has a binding, Records is therefore a prefix of the
// batches committed for the partition from the first one served, each
// byte-identical to the committed batch (up to CRC-32C collisions) except
// its base offset (the assigned offset, written in).
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
	// copy, the caller's until it passes the result to Release. Never
	// nil: empty when there is nothing to serve or on Err, so an encoder
	// writes an empty record set, not a null one (size -1, which
	// consumers refuse).
	Records []byte
	// LogStartOffset and HighWatermark are W and HW as FindBatches saw
	// them.
	LogStartOffset int64
	HighWatermark  int64
	// buf is the whole buffer Records lies in, from the Reader's answer
	// pool: Release returns it.
	buf []byte
}

// Release gives the buffers of fetch results back to the Reader, which
// reads the answers of later fetches into them (the answer pool,
// ReaderOptions.AnswerPoolBytes): no zeroing and no page faults of fresh
// memory. The caller must not use any result's Records, or a slice of
// them, after the call (their bytes are overwritten; invariants builds
// overwrite them at once). Releasing is optional: a result never
// released is garbage collected as any slice; a result released twice
// is a bug (two answers would share a buffer). Results of another
// Reader, and zero results, are ignored only if they hold no pooled
// buffer: release a Reader's results to that Reader.
func (r *Reader) Release(res ...FetchResult) {
	for i := range res {
		r.answers.put(res[i].buf)
	}
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

// rangeKey names the bytes one partition of a fetch needs from one
// object: results[part] answers req.Partitions[part].
type rangeKey struct {
	part int
	key  string
}

// objectRange is the part of one object a fetch reads for one partition.
type objectRange struct {
	key        string
	start, end int64 // [start, end) in the object
	// data holds [start, start+len(data)): all of the range, or, when
	// the object turned out shorter (objectSize >= 0), the part of it
	// the object holds.
	data []byte
	// objectSize is the object's size when it is shorter than end (the
	// batches past it are corruption), else -1.
	objectSize int64
	err        error
	// dst, when not nil, is where a GET reads the range: len end-start.
	// placed: dst is the range's part of its partition's answer
	// (placeRanges), so the batches are checked and served where they
	// were read and assemble copies nothing.
	dst    []byte
	placed bool
	// A placed range's batches (of partition tp, from index firstBatch
	// of its answer) are checked as each chunk of them is read, while
	// the bytes are in the CPU's cache, on the reading goroutine
	// (readScattered): checkErr[k] is checkBatch's answer for
	// batches[k], valid when checked (the read succeeded).
	tp         TopicIDPartition
	batches    []BatchInfo
	firstBatch int
	checkErr   []error
	checked    bool
}

// Fetch finds the batches of every partition of req, reads the bytes it
// needs of each object once (one ranged GET per object, or per group of
// nearby partitions: MaxCoalesceGap; none when the cache holds the
// object), checks every
// batch (see FetchResult) and writes in its assigned offsets. The
// returned error is for the whole call: the control plane failed
// (ErrFindFailed wrapping its error; retriable), or ctx ended, or the
// plane is closed or refused the request as invalid (those errors as
// they are). results[i] answers req.Partitions[i].
func (r *Reader) Fetch(ctx context.Context, req FindBatchesRequest) ([]FetchResult, error) {
	r.metrics.fetches.Add(1)
	found, err := r.opts.ControlPlane.FindBatches(ctx, req)
	if err != nil {
		return nil, findFailed(err)
	}
	if len(found) != len(req.Partitions) {
		return nil, fmt.Errorf("%w: %d find results for %d partitions", ErrInconsistentAnswer, len(found), len(req.Partitions))
	}
	ranges := planRanges(found)
	answers := r.placeRanges(req, found, ranges)
	r.readRanges(ctx, ranges)
	out := make([]FetchResult, len(found))
	for i, f := range found {
		out[i] = FetchResult{Err: f.Err, LogStartOffset: f.LogStartOffset, HighWatermark: f.HighWatermark}
		if f.Err == nil {
			out[i].Records, out[i].buf, out[i].Err = r.assemble(i, req.Partitions[i], f.Batches, ranges, answers[i])
		}
		if out[i].Records == nil {
			out[i].Records = []byte{} // an empty record set, never a null one
		}
		if out[i].buf == nil && answers[i] != nil {
			r.answers.put(answers[i]) // nothing served from it
		}
	}
	return out, nil
}

// planRanges returns, per partition and object, the smallest range
// covering every batch the fetch needs from it. A partition's batches in
// one object are contiguous (the object groups them by partition), so
// this costs no extra bytes. readRanges then reads the ranges of one
// object that lie close together with one GET (coalesce).
func planRanges(found []FindBatchesResult) map[rangeKey]*objectRange {
	// The ranges come from one slab (and the map is sized once): a run
	// of batches in one object is one range, so the runs bound them.
	runs := 0
	for _, f := range found {
		for j, b := range f.Batches {
			if j == 0 || b.ObjectKey != f.Batches[j-1].ObjectKey {
				runs++
			}
		}
	}
	ranges := make(map[rangeKey]*objectRange, runs)
	slab := make([]objectRange, 0, runs)
	for i, f := range found {
		for _, b := range f.Batches {
			if b.ByteOffset < 0 || b.Size <= 0 || b.ByteOffset > maxObjectBytes || b.Size > maxObjectBytes {
				continue // assemble reports it
			}
			k := rangeKey{i, b.ObjectKey}
			rg, ok := ranges[k]
			if !ok {
				r := objectRange{key: b.ObjectKey, start: b.ByteOffset, end: b.ByteOffset + b.Size, objectSize: -1}
				if len(slab) < cap(slab) {
					slab = append(slab, r)
					ranges[k] = &slab[len(slab)-1]
				} else {
					ranges[k] = newRange(r) // an object's batches split by another's
				}
				continue
			}
			rg.start, rg.end = min(rg.start, b.ByteOffset), max(rg.end, b.ByteOffset+b.Size)
		}
	}
	return ranges
}

// newRange returns a copy of r of its own (r, a loop variable, does not
// escape).
func newRange(r objectRange) *objectRange { return &r }

// placeRanges allocates, for each partition whose batches lie in one
// contiguous run per object (contiguousRuns: what a writer's objects
// give), the buffer of its whole answer, and makes each of its ranges
// read into its part of it (objectRange.dst, placed), in the answer's
// order. The batches are then checked and served where the GET put them:
// no copy between the object's bytes and the answer, and no second
// buffer. Other partitions (coordinates that are no range, an object's
// batches split by another's) get nil: their ranges read into buffers
// of their own and assemble copies the batches out, checking each the
// same way.
//
// The answer is allocated before the reads, from the coordinates: no
// more than the ranges' bytes, which the reads need anyway.
func (r *Reader) placeRanges(req FindBatchesRequest, found []FindBatchesResult, ranges map[rangeKey]*objectRange) [][]byte {
	answers := make([][]byte, len(found))
	for i, f := range found {
		if f.Err != nil {
			continue
		}
		total, ok := contiguousRuns(f.Batches)
		if !ok || total == 0 {
			continue
		}
		out := r.answers.get(total)
		// One slice of check answers for the partition: each range's
		// batches are a run of f.Batches.
		checkErr := make([]error, len(f.Batches))
		var pos int64
		for j, b := range f.Batches {
			if j > 0 && b.ObjectKey == f.Batches[j-1].ObjectKey {
				continue // the run goes on
			}
			end := j + 1
			for end < len(f.Batches) && f.Batches[end].ObjectKey == b.ObjectKey {
				end++
			}
			rg := ranges[rangeKey{i, b.ObjectKey}]
			n := rg.end - rg.start
			rg.dst, rg.placed = out[pos:pos+n:pos+n], true
			rg.tp, rg.batches, rg.firstBatch = req.Partitions[i].Partition, f.Batches[j:end], j
			rg.checkErr = checkErr[j:end:end]
			pos += n
		}
		invariants.Assertf(pos == total, "placed %d of %d bytes", pos, total)
		answers[i] = out
	}
	return answers
}

// contiguousRuns reports whether batches, in answer order, lie in one
// run per object, each batch starting where the one before it in the
// run ends, every coordinate a range planRanges reads; and their bytes
// in all. A run's object range (planRanges: from its first batch's start
// to its last's end) is then exactly its batches.
func contiguousRuns(batches []BatchInfo) (int64, bool) {
	var total int64
	var keys []string // of the runs so far
	for j, b := range batches {
		if b.ByteOffset < 0 || b.Size <= 0 || b.ByteOffset > maxObjectBytes || b.Size > maxObjectBytes {
			return 0, false
		}
		total += b.Size
		if j > 0 && b.ObjectKey == batches[j-1].ObjectKey {
			if b.ByteOffset != batches[j-1].ByteOffset+batches[j-1].Size {
				return 0, false
			}
			continue
		}
		if slices.Contains(keys, b.ObjectKey) {
			return 0, false
		}
		keys = append(keys, b.ObjectKey)
	}
	return total, true
}

// readRanges fills every range: the ranges of one object that lie within
// maxCoalesceGap of each other share one read (from the cache or one GET),
// at most ReadConcurrency GETs at once. Coalescing does not change what
// a partition is served: a shared read that finds the object short is
// read to the object's end (read), and each range is then cut from it
// as if read alone (fill), so a short object or one partition's
// past-the-end coordinate still fails only the partitions whose bytes
// are missing.
func (r *Reader) readRanges(ctx context.Context, ranges map[rangeKey]*objectRange) {
	var gets []*readGroup
	for _, g := range coalesce(ranges, r.opts.MaxCoalesceGap) {
		if c := r.opts.Cache; c != nil {
			if obj, ok := c.Get(g.key); ok {
				// The cache holds whole objects: one shorter than the
				// range is short, as a store's would be. Its bytes are
				// shared: placed ranges get a copy.
				g.clip(obj)
				g.fillMembers()
				g.placeMembers()
				r.metrics.cacheHits.Add(1)
				continue
			}
		}
		gets = append(gets, g)
	}
	// min(ReadConcurrency, GETs) readers take the GETs in turn, the
	// calling goroutine one of them: a fetch of one object starts no
	// goroutine, and a fetch of many starts ReadConcurrency - 1, not one
	// per object (a goroutine per GET was 17% of a consolidation's CPU).
	var next atomic.Int64
	work := func() {
		for i := next.Add(1) - 1; i < int64(len(gets)); i = next.Add(1) - 1 {
			r.readGroup(ctx, gets[i])
		}
	}
	var wg sync.WaitGroup
	for range min(r.opts.ReadConcurrency, len(gets)) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// readGroup is one read of an object serving the ranges of several
// partitions: objectRange is the span read, members the ranges cut from it.
type readGroup struct {
	objectRange
	members []*objectRange
}

// coalesce groups the ranges by object and, within an object, merges
// ranges (in start order) whose gap is at most maxGap bytes (negative:
// never merge). A merged read fetches the bytes in the gaps too (other
// partitions' batches), traded for one GET fewer.
func coalesce(ranges map[rangeKey]*objectRange, maxGap int64) []*readGroup {
	// One sorted slice of every range (by object, then start) whose runs
	// are the groups' members, and one slab of groups: a few
	// allocations per fetch, not a few per object.
	all := make([]*objectRange, 0, len(ranges))
	for _, rg := range ranges {
		all = append(all, rg)
	}
	slices.SortFunc(all, func(a, b *objectRange) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	slab := make([]readGroup, 0, len(all))
	groups := make([]*readGroup, 0, len(all))
	var g *readGroup
	first := 0
	for i, rg := range all {
		if g == nil || rg.key != g.key || maxGap < 0 || rg.start-g.end > maxGap {
			if g != nil {
				g.members = all[first:i:i]
			}
			slab = append(slab, readGroup{objectRange: objectRange{key: rg.key, start: rg.start, end: rg.end, objectSize: -1}})
			g, first = &slab[len(slab)-1], i
			groups = append(groups, g)
		}
		g.end = max(g.end, rg.end)
	}
	if g != nil {
		g.members = all[first:len(all):len(all)]
	}
	return groups
}

// readGroup fills g's members with one GET of g's span, straight into
// each member's dst when the members are disjoint (readScattered; the
// bytes between them are dropped), else into one buffer the members are
// cut from. A GET that finds the object short falls back to read's
// Stat and read to the object's end, the members cut from that as
// before and placed members copied into their dst.
func (r *Reader) readGroup(ctx context.Context, g *readGroup) {
	if g.disjoint() {
		for _, rg := range g.members {
			if rg.dst == nil {
				rg.dst = make([]byte, rg.end-rg.start)
			}
		}
		r.metrics.gets.Add(1)
		err := readScattered(ctx, r.opts.Store, g)
		if err == nil {
			r.metrics.getBytes.Add(g.end - g.start)
			for _, rg := range g.members {
				rg.data = rg.dst
			}
			return
		}
		r.metrics.getErrors.Add(1)
		for _, rg := range g.members {
			rg.checked = false // the fallback reads the bytes again
		}
		r.readFailed(ctx, &g.objectRange, err)
	} else {
		r.read(ctx, &g.objectRange)
	}
	g.fillMembers()
	g.placeMembers()
}

// disjoint reports whether g's members (in start order, as coalesce
// leaves them) do not overlap, so that one GET can fill each in turn.
// Overlapping ranges of two partitions come only from coordinates that
// do not check; they are read the general way.
func (g *readGroup) disjoint() bool {
	for i := 1; i < len(g.members); i++ {
		if g.members[i].start < g.members[i-1].end {
			return false
		}
	}
	return true
}

// readScattered reads [g.start, g.end) of g's object with one GET into
// its members' dst in turn, dropping the bytes between them. Like
// objstore.ReadRange it counts the bytes itself: a body that ends early
// is an error wrapping objstore.ErrShortRead, one with bytes past the
// range objstore.ErrSizeMismatch. What a failed read left in the dst is
// overwritten by the fallback (readGroup).
func readScattered(ctx context.Context, s objstore.Store, g *readGroup) error {
	body, err := s.Get(ctx, g.key, g.start, g.end-g.start)
	if err != nil {
		return err
	}
	defer body.Close()
	pos := g.start
	short := func(n int64, err error) error {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return objstore.NewOpError(objstore.OpGet, g.key, fmt.Errorf("%w: [%d, %d): got %d of %d bytes",
				objstore.ErrShortRead, g.start, g.end, pos-g.start+n, g.end-g.start))
		}
		return objstore.NewOpError(objstore.OpGet, g.key, err)
	}
	for _, rg := range g.members {
		if gap := rg.start - pos; gap > 0 {
			if n, err := discard(body, gap); err != nil {
				return short(n, err)
			}
			pos += gap
		}
		if n, err := readChecked(body, rg); err != nil {
			return short(n, err)
		}
		pos += int64(len(rg.dst))
	}
	if pos != g.end {
		// The members end before the span: not what coalesce builds.
		return objstore.NewOpError(objstore.OpGet, g.key, fmt.Errorf("%w: members end at %d, the read at %d", objstore.ErrInvalidArgument, pos, g.end))
	}
	var one [1]byte
	if m, err := body.Read(one[:]); m > 0 {
		return objstore.NewOpError(objstore.OpGet, g.key, fmt.Errorf("%w: [%d, %d): body holds more than %d bytes",
			objstore.ErrSizeMismatch, g.start, g.end, g.end-g.start))
	} else if err != nil && err != io.EOF {
		return objstore.NewOpError(objstore.OpGet, g.key, err)
	}
	return nil
}

// discardBuffers holds the scratch buffers discard reads other
// partitions' bytes into: large, so that dropping the gap between two
// ranges of a coalesced read takes few read calls (io.Discard's 8 KiB
// made the gaps a third of a 64-partition consolidation's read calls).
var discardBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// discard reads and drops n bytes of body; it returns how many it read
// before an error.
func discard(body io.Reader, n int64) (int64, error) {
	bp := discardBuffers.Get().(*[]byte)
	defer discardBuffers.Put(bp)
	buf := *bp
	var read int64
	for read < n {
		m, err := io.ReadFull(body, buf[:min(int64(len(buf)), n-read)])
		read += int64(m)
		if err != nil {
			return read, err
		}
	}
	return read, nil
}

// checkChunkBytes is how much of a placed range readChecked reads
// before it checks the batches read: small enough to be still in the
// CPU's cache when their CRCs are computed (reading a whole object range
// first and checking it later read the bytes from memory twice).
const checkChunkBytes = 256 << 10

// readChecked reads rg.dst from body and, for a placed range, checks its
// batches chunk by chunk as they arrive (checkBatch, on this reading
// goroutine: the checks of one fetch's objects run in parallel). It
// returns the bytes read before an error.
func readChecked(body io.Reader, rg *objectRange) (int64, error) {
	if !rg.placed {
		n, err := io.ReadFull(body, rg.dst)
		return int64(n), err
	}
	if len(rg.checkErr) != len(rg.batches) {
		rg.checkErr = make([]error, len(rg.batches))
	}
	clear(rg.checkErr)
	rg.checked = false
	var read int64
	for k := 0; k < len(rg.batches); {
		// A chunk: whole batches, up to checkChunkBytes (at least one).
		end, m := k, int64(0)
		for end < len(rg.batches) && (end == k || m+rg.batches[end].Size <= checkChunkBytes) {
			m += rg.batches[end].Size
			end++
		}
		n, err := io.ReadFull(body, rg.dst[read:read+m])
		if err != nil {
			return read + int64(n), err
		}
		for ; k < end; k++ {
			info := rg.batches[k]
			off := info.ByteOffset - rg.start
			rg.checkErr[k] = checkBatch(rg.tp, info, rg.dst[off:off+info.Size])
		}
		read += m
	}
	invariants.Assertf(read == int64(len(rg.dst)), "a placed range of %d bytes holds batches of %d", len(rg.dst), read)
	rg.checked = true
	return read, nil
}

// placeMembers copies the bytes of each placed member into its dst (the
// member was cut from a shared read or the cache); unplaced members keep
// theirs, and assemble copies their batches out.
func (g *readGroup) placeMembers() {
	for _, rg := range g.members {
		if rg.placed && rg.err == nil {
			rg.data = rg.dst[:copy(rg.dst, rg.data)]
		}
	}
}

// fillMembers cuts each member range out of the group's read.
func (g *readGroup) fillMembers() {
	for _, rg := range g.members {
		if g.err != nil {
			rg.err = g.err
			continue
		}
		// g.data holds [g.start, g.start+len(g.data)); the object
		// ends there when g.objectSize >= 0.
		have := g.start + int64(len(g.data))
		if g.objectSize >= 0 && g.objectSize < rg.end {
			rg.objectSize = g.objectSize
		}
		lo, hi := min(rg.start, have), min(rg.end, have)
		rg.data = g.data[lo-g.start : hi-g.start]
	}
}

// clip sets rg's data from the whole object obj.
func (rg *objectRange) clip(obj []byte) {
	n := int64(len(obj))
	if n < rg.end {
		rg.objectSize = n
	}
	rg.data = obj[min(rg.start, n):min(rg.end, n)]
}

// read fills rg with one GET. A range past the object's end
// (objstore.ErrInvalidRange, what the mem, fs and s3 stores answer) or a
// body that ends early (objstore.ErrShortRead, which a cut connection also
// gives) is followed by a Stat: an object shorter than the range is read
// up to its end with a second GET, and the batches past its end are
// corruption (assemble); otherwise the read failed and is retriable.
func (r *Reader) read(ctx context.Context, rg *objectRange) {
	data, err := r.get(ctx, rg.key, rg.start, rg.end)
	if err != nil {
		r.readFailed(ctx, rg, err)
		return
	}
	rg.data = data
}

// readFailed finishes rg after its GET failed with err (read's doc): an
// object shorter than the range is read to its end, anything else is a
// retriable *StorageError.
func (r *Reader) readFailed(ctx context.Context, rg *objectRange, err error) {
	if errors.Is(err, objstore.ErrInvalidRange) || errors.Is(err, objstore.ErrShortRead) {
		if info, serr := r.opts.Store.Stat(ctx, rg.key); serr == nil && info.Size < rg.end {
			var part []byte
			var perr error
			if info.Size > rg.start {
				part, perr = r.get(ctx, rg.key, rg.start, info.Size)
			}
			if perr == nil {
				rg.data, rg.objectSize = part, info.Size
				return
			}
			err = perr
		}
	}
	rg.err = &StorageError{ObjectKey: rg.key, Err: ErrObjectRead, Cause: err}
}

// get reads [start, end) of key, counted.
func (r *Reader) get(ctx context.Context, key string, start, end int64) ([]byte, error) {
	data, err := objstore.ReadRange(ctx, r.opts.Store, key, start, end-start)
	r.metrics.gets.Add(1)
	if err != nil {
		r.metrics.getErrors.Add(1)
		return nil, err
	}
	r.metrics.getBytes.Add(int64(len(data)))
	return data, nil
}

// assemble checks a partition's batches against their coordinates, in
// order, and stops at the first that fails. placed is the partition's
// answer the reads filled in place (placeRanges), nil when the batches
// are copied out of the read ranges instead; either way every batch is
// checked before it is served, and its assigned offset written in. It
// returns the answer and the pooled buffer it lies in (nil when it
// served nothing).
func (r *Reader) assemble(part int, p FindPartition, batches []BatchInfo, ranges map[rangeKey]*objectRange, placed []byte) (out, buf []byte, _ error) {
	tp := p.Partition
	if placed != nil {
		out = placed[:0]
	} else if n := assembledBytes(part, batches, ranges); n > 0 {
		out = r.answers.get(int64(n))[:0]
	}
	next := int64(-1)
	for j, info := range batches {
		rg := ranges[rangeKey{part, info.ObjectKey}]
		raw, err := sliceBatch(tp, info, rg, p.Offset, next)
		if err == nil {
			if rg.checked {
				err = rg.checkErr[j-rg.firstBatch] // checked as it was read
			} else {
				err = checkBatch(tp, info, raw)
			}
		}
		if err != nil {
			r.countBatchError(err)
			if len(out) == 0 || skippedStart(p.Offset, batches[0], info) {
				r.metrics.failedPartitions.Add(1)
				r.opts.Logger.Warn("wal: fetch failed", zap.Stringer("partition", tp), zap.Error(err))
				if placed == nil {
					r.answers.put(out)
				}
				return nil, nil, err
			}
			r.metrics.truncatedPartitions.Add(1)
			r.opts.Logger.Warn("wal: fetch served a prefix", zap.Stringer("partition", tp), zap.Error(err))
			return out, out[:cap(out)], nil
		}
		start := len(out)
		if placed != nil {
			// The batch was read where the answer has it.
			invariants.Assertf(&raw[0] == &placed[start], "batch at offset %d not read in place", info.BaseOffset)
			out = out[:start+len(raw)]
		} else {
			out = append(out, raw...)
		}
		b, _ := record.ReadBatch(out[start:]) // checked above
		b.SetBaseOffset(info.BaseOffset)
		next = info.LastOffset + 1
	}
	if cap(out) == 0 {
		return out, nil, nil
	}
	return out, out[:cap(out)], nil
}

// skippedStart reports whether the refused row bad shows that the
// answer's first batch, served as the start of the answer, skipped
// offsets the WAL holds: first starts past the requested offset (which
// FindBatchesResult allows only where the WAL holds nothing) and bad
// holds offsets between the two. Rows out of order then make the prefix
// before bad no good prefix: it would serve a consumer the records past
// a hole and let a consolidating log at its seal start past it.
func skippedStart(offset int64, first, bad BatchInfo) bool {
	if mutation.Disabled(mutation.WALReadSkippedStart) {
		return false
	}
	return first.BaseOffset > offset && bad.BaseOffset < first.BaseOffset && bad.LastOffset >= offset
}

func (r *Reader) countBatchError(err error) {
	switch {
	case errors.Is(err, ErrObjectRead):
	case errors.Is(err, ErrCorruption):
		r.metrics.corruptBatches.Add(1)
	case errors.Is(err, ErrInconsistentAnswer):
		r.metrics.inconsistentAnswers.Add(1)
	}
}

// assembledBytes is the size of a partition's answer when every batch
// checks: one allocation instead of a growing buffer (a fetch of 1 MiB
// grown by append allocated about 5 MiB and copied most of it again).
// Only sizes that lie inside a range read count, so coordinates that do
// not check cannot make it allocate more than the fetch read.
func assembledBytes(part int, batches []BatchInfo, ranges map[rangeKey]*objectRange) int {
	var n int64
	for _, info := range batches {
		rg := ranges[rangeKey{part, info.ObjectKey}]
		if rg == nil || rg.err != nil || info.ByteOffset < rg.start || info.Size <= 0 ||
			info.ByteOffset+info.Size > rg.start+int64(len(rg.data)) {
			break // assemble stops here
		}
		n += info.Size
	}
	return int(n)
}

// sliceBatch returns the bytes of info from rg after checking its
// coordinates: offset is the requested offset, next the offset the batch
// must start at (-1 for the first batch).
func sliceBatch(tp TopicIDPartition, info BatchInfo, rg *objectRange, offset, next int64) ([]byte, error) {
	bad := func(format string, args ...any) error {
		return &BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: ErrInconsistentAnswer, Detail: fmt.Sprintf(format, args...)}
	}
	end := info.ByteOffset + info.Size
	switch {
	case rg == nil || info.ByteOffset < 0 || info.Size <= 0:
		return nil, bad("byte range [%d, +%d) is not a range", info.ByteOffset, info.Size)
	case info.LastOffset < info.BaseOffset || (next >= 0 && info.BaseOffset < next):
		return nil, bad("offsets [%d, %d] after %d", info.BaseOffset, info.LastOffset, next)
	case next >= 0 && info.BaseOffset > next && !mutation.Disabled(mutation.WALReadGap):
		return nil, bad("offsets [%d, %d] leave a gap after %d", info.BaseOffset, info.LastOffset, next-1)
	case next < 0 && info.LastOffset < offset && !mutation.Disabled(mutation.WALReadGap):
		return nil, bad("first batch [%d, %d] ends before the requested offset %d", info.BaseOffset, info.LastOffset, offset)
	case rg.err != nil:
		return nil, rg.err
	case rg.objectSize >= 0 && end > rg.objectSize:
		return nil, &BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: ErrCorruption,
			Detail: fmt.Sprintf("byte range [%d, %d) lies past the end of the object (%d bytes)", info.ByteOffset, end, rg.objectSize)}
	case info.ByteOffset < rg.start || end > rg.start+int64(len(rg.data)):
		return nil, bad("byte range [%d, +%d) outside the %d bytes read", info.ByteOffset, info.Size, len(rg.data))
	}
	return rg.data[info.ByteOffset-rg.start : end-rg.start], nil
}

// checkBatch checks that raw is one whole, intact v2 batch covering the
// offsets its coordinates say and, when the row has a binding, that it is
// the batch committed there.
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
	if info.Binding.Known && !mutation.Disabled(mutation.WALReadBinding) {
		if d := bindingMismatch(info.Binding, b); d != "" {
			return corrupt(nil, "not the batch committed at these coordinates: %s", d)
		}
	}
	return nil
}

// bindingMismatch names the first field of b that differs from the
// committed binding, "" when none does.
func bindingMismatch(want BatchBinding, b record.Batch) string {
	switch {
	case b.CRC() != want.CRC:
		return fmt.Sprintf("CRC field 0x%08x, committed 0x%08x", b.CRC(), want.CRC)
	case b.PartitionLeaderEpoch() != want.PartitionLeaderEpoch:
		return fmt.Sprintf("partition leader epoch %d, committed %d", b.PartitionLeaderEpoch(), want.PartitionLeaderEpoch)
	case b.ProducerID() != want.ProducerID:
		return fmt.Sprintf("producer id %d, committed %d", b.ProducerID(), want.ProducerID)
	case b.ProducerEpoch() != want.ProducerEpoch:
		return fmt.Sprintf("producer epoch %d, committed %d", b.ProducerEpoch(), want.ProducerEpoch)
	case b.BaseSequence() != want.BaseSequence:
		return fmt.Sprintf("base sequence %d, committed %d", b.BaseSequence(), want.BaseSequence)
	}
	return ""
}

// ReaderMetrics is a snapshot of a Reader's counters.
type ReaderMetrics struct {
	Fetches   int64
	Gets      int64
	GetBytes  int64
	GetErrors int64
	// CacheHits counts reads served from the cache instead of a GET
	// (like Gets, one per coalesced range of an object: see
	// ReaderOptions.MaxCoalesceGap).
	CacheHits int64
	// FailedPartitions counts partitions answered with an error because
	// their first batch failed; TruncatedPartitions those served a
	// prefix because a later one did.
	FailedPartitions    int64
	TruncatedPartitions int64
	// CorruptBatches counts batches refused as ErrCorruption (bytes that
	// do not check, are not the committed batch, or lie past the
	// object's end); InconsistentAnswers those refused as
	// ErrInconsistentAnswer (coordinates that are no range, offsets
	// with a gap or an overlap). Each is a partition served an error or
	// a prefix, and the same batch counts again at every fetch of it.
	CorruptBatches      int64
	InconsistentAnswers int64
}

type readerCounters struct {
	fetches, gets, getBytes, getErrors, cacheHits atomic.Int64
	failedPartitions, truncatedPartitions         atomic.Int64
	corruptBatches, inconsistentAnswers           atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (r *Reader) Metrics() ReaderMetrics {
	c := &r.metrics
	return ReaderMetrics{Fetches: c.fetches.Load(), Gets: c.gets.Load(), GetBytes: c.getBytes.Load(),
		GetErrors: c.getErrors.Load(), CacheHits: c.cacheHits.Load(),
		FailedPartitions: c.failedPartitions.Load(), TruncatedPartitions: c.truncatedPartitions.Load(),
		CorruptBatches: c.corruptBatches.Load(), InconsistentAnswers: c.inconsistentAnswers.Load()}
}
