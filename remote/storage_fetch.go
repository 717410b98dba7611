package remote

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote/objstore"
)

// maxManifestBytes is the size of the largest manifest decodeManifest can
// accept; a larger object is corrupt and is not read past this.
const maxManifestBytes = manifestFixedLen + (8+manifestChunkLen)*maxChunksPerSegment +
	manifestIndexLen*numIndexTypes + 4 + 4*maxBlocksPerSegment + crcLen

// FetchSegment returns the bytes [start, start+length) of the segment's
// original .log; length -1 means to the end, and start == size (or length
// 0) gives an empty body. Kafka: fetchLogSegment (whose end position is
// inclusive; here it is a length).
//
// Only the chunks the range touches are read: one ranged Get per data
// object the range spans (one for an uncompressed segment) and per
// ReadAheadBytes of stored bytes. The first Get is issued before
// FetchSegment returns, so that a missing object is reported here; later
// ones as the body reaches them. Ask for the bytes you need: a unit (a
// block of an uncompressed segment with block checksums, else a
// chunk) is read whole even for one byte of it. Each unit is checked
// against its CRC-32C before any of its bytes are returned, and a
// compressed chunk decompressed into a buffer of exactly its raw length.
// With the locator of layout version 3 in m.CustomMetadata (what
// CopySegment returned), no manifest is read: a range of at most
// ReadAheadBytes is one Get of the blocks it touches and their trailers.
// Otherwise, when the manifest is not cached, a short range's data Get is
// issued beside the manifest's, guessing this manager's own layout
// (speculativeRange), so a cold read waits for one round trip; the bytes
// are served only if the manifest confirms the guess.
//
// The body yields exactly the range and then io.EOF, or fails: a chunk
// that fails its checksum or does not decompress to its raw length is a
// *CorruptionError, a body the store cuts short wraps objstore.ErrShortRead,
// and once ctx is done reads fail with its error. Never a short read that
// looks complete. The caller must Close the body.
//
// A range outside [0, size] fails with ErrInvalidArgument; a segment
// without a manifest with ErrSegmentDataNotFound.
func (s *StorageManager) FetchSegment(ctx context.Context, m *SegmentMetadata, start, length int64) (io.ReadCloser, error) {
	if start < 0 || length < -1 {
		return nil, s.count(fmt.Errorf("%w: remote: fetch segment: start %d length %d", ErrInvalidArgument, start, length))
	}
	spec := s.speculate(ctx, m, start, length)
	man, keys, err := s.loadManifest(ctx, m)
	if err != nil {
		spec.discard()
		return nil, s.count(err)
	}
	if start > man.logSize || (length >= 0 && length > man.logSize-start) {
		spec.discard()
		return nil, s.count(fmt.Errorf("%w: remote: fetch [%d, +%d) of segment %s of %d bytes",
			ErrInvalidArgument, start, length, m.SegmentID, man.logSize))
	}
	end := man.logSize
	if length >= 0 {
		end = start + length
	}
	if start == end {
		spec.discard()
		return io.NopCloser(strings.NewReader("")), nil
	}
	r := &segmentReader{ctx: ctx, s: s, man: man, keys: keys, id: m.SegmentID, idState: idCRCState(man.segmentID),
		start: start, end: end, next: man.unitAt(start), last: man.unitAt(end - 1)}
	if spec.serve(r) {
		return r, nil
	}
	if err := r.openRun(); err != nil {
		_ = r.Close()
		return nil, s.count(err)
	}
	return r, nil
}

// speculativeRange is the ranged Get of a fetch whose manifest is not
// cached and whose metadata carries no locator, issued beside the
// manifest's Get so that a cold read waits for one round trip instead of
// two. It guesses the layout this manager writes (uncompressed, one data
// object; version 3 blocks with their trailers, or version 2 blocks of
// BlockSize aligned to the chunks): the blocks the range touches are at
// offsets the block size gives. The bytes are served only if the manifest
// confirms that layout, and are verified against its block checksums like
// any others; otherwise they are dropped and the fetch reads as usual.
type speculativeRange struct {
	s      *StorageManager
	key    string
	lo, hi int64
	cancel context.CancelFunc
	done   chan struct{}
	buf    []byte // the bytes [lo, hi), when err is nil
	got    int64  // bytes received
	err    error
}

// speculate starts the speculative Get of a fetch, or returns nil when
// the manifest is cached or the range does not fit the guess: compression
// on, no blocks, a range longer than ReadAheadBytes, or one that reaches
// the segment's last block (a read of the object's tail asks for it to
// the object's end, to check the object's size).
func (s *StorageManager) speculate(ctx context.Context, m *SegmentMetadata, start, length int64) *speculativeRange {
	bs, cs := int64(s.opts.BlockSize), int64(s.opts.ChunkSize)
	if len(m.CustomMetadata) > 0 || length <= 0 || start < 0 || start+length > m.SizeBytes ||
		(s.cache != nil && s.cache.contains(m.SegmentID)) {
		return nil
	}
	frame := bs // the stored bytes per block
	switch {
	case s.writesFramed(m.SizeBytes):
		frame += trailerLen
	case s.opts.Compression || bs <= 0 || bs >= cs || cs%bs != 0:
		return nil
	}
	first, end := start/bs, (start+length+bs-1)/bs // blocks [first, end)
	lo, hi := first*frame, end*frame
	if end*bs >= m.SizeBytes || hi-lo > int64(s.opts.ReadAheadBytes) {
		return nil
	}
	keys, err := s.keysFor(m)
	if err != nil {
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	sp := &speculativeRange{s: s, key: keys.data(0), lo: lo, hi: hi, cancel: cancel, done: make(chan struct{})}
	s.metrics.getRequests.Add(1)
	s.metrics.speculativeReads.Add(1)
	go func() {
		defer close(sp.done)
		sp.buf, sp.got, sp.err = s.readSpeculative(sctx, sp.key, lo, hi-lo)
	}()
	return sp
}

// readSpeculative reads exactly n bytes of key at off (one byte more
// than asked for is an error too: the store answered another range).
func (s *StorageManager) readSpeculative(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	body, err := s.store.Get(ctx, key, off, n)
	if err != nil {
		return nil, 0, err
	}
	defer body.Close()
	b := make([]byte, n+1)
	got, err := io.ReadFull(body, b)
	if err != io.ErrUnexpectedEOF || int64(got) != n {
		return nil, int64(got), fmt.Errorf("remote: speculative read of %s: %d of %d bytes: %w", key, got, n, err)
	}
	return b[:n], int64(got), nil
}

// discard drops the speculative read (nil: none), waiting for its
// goroutine.
func (sp *speculativeRange) discard() {
	if sp == nil {
		return
	}
	sp.cancel()
	<-sp.done
	sp.s.metrics.bytesFetched.Add(sp.got)
}

// serve hands the speculative bytes to r as its first (and only) run when
// the manifest confirms they are exactly r's units, and reports whether
// it did; otherwise it discards them.
func (sp *speculativeRange) serve(r *segmentReader) bool {
	if sp == nil {
		return false
	}
	<-sp.done
	sp.cancel()
	man := r.man
	first, last := man.unit(r.next), man.unit(r.last)
	if sp.err != nil || man.blockSize == 0 || len(man.objectSizes) != 1 || r.keys.data(first.object) != sp.key ||
		first.storedOffset != sp.lo || last.storedEnd() != sp.hi || r.last+1 >= man.numUnits() {
		sp.s.metrics.bytesFetched.Add(sp.got)
		return false
	}
	// loadChunk counts the bytes as it reads them, and checks every
	// block's checksum before serving it.
	r.body, r.bodyKey, r.bodyEnd, r.bodyToEnd = io.NopCloser(bytes.NewReader(sp.buf)), sp.key, r.last, false
	sp.s.metrics.speculativeServed.Add(1)
	return true
}

// segmentReader is the body FetchSegment returns. It reads the chunks
// [next, last] in order from runs of chunks in one data object (one ranged
// Get each) and serves the part of each chunk inside [start, end). One
// goroutine at a time.
type segmentReader struct {
	ctx  context.Context
	s    *StorageManager
	man  *manifest
	keys segmentKeys
	id   SegmentID

	idState    uint32 // idCRCState of the segment id, for the trailers' seeds
	start, end int64  // the raw range requested
	next, last int    // next chunk to load; last chunk of the range

	body    io.ReadCloser // the current run's Get body; nil between runs
	bodyKey string
	bodyEnd int // last chunk the current body holds
	// bodyToEnd: the run ends with its object's last chunk and was asked
	// to the object's end, so the body's own end tells whether the object
	// has exactly the size the manifest gives it.
	bodyToEnd bool

	cur    []byte  // unread bytes of the current chunk inside the range
	stored *[]byte // pooled buffer of the current read group
	group  []byte  // stored bytes of units from next on, read and not yet checked
	raw    *[]byte // pooled buffer of its decompressed bytes
	err    error   // sticky: io.EOF, the first failure, or errReaderClosed
}

var errReaderClosed = errors.New("remote: read of a closed segment body")

func (r *segmentReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.next > r.last {
			r.err = io.EOF
			r.closeBody()
			return 0, io.EOF
		}
		if err := r.loadChunk(); err != nil {
			if _, corrupt := err.(*CorruptionError); !corrupt { // it names the segment already
				err = fmt.Errorf("remote: fetch segment %s: %w", r.id, err)
			}
			r.err = r.s.count(err)
			r.closeBody()
			return 0, r.err
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Close releases the body and the buffers; later reads fail.
func (r *segmentReader) Close() error {
	r.closeBody()
	putBuffer(r.stored)
	putBuffer(r.raw)
	r.stored, r.raw, r.cur, r.group = nil, nil, nil, nil
	if r.err == nil || r.err == io.EOF {
		r.err = errReaderClosed
	}
	return nil
}

func (r *segmentReader) closeBody() {
	if r.body != nil {
		_ = r.body.Close()
		r.body = nil
	}
}

// openRun issues the ranged Get of the chunks from r.next on: up to the
// last chunk of the range in the same data object, and at most
// ReadAheadBytes of stored bytes (but at least one chunk). A run that
// ends with the object's last chunk asks for the rest of the object, so
// that an object longer or shorter than the manifest says is corruption
// (a store refusing a range inside the manifest's size is one too),
// never bytes served from an object that does not match its manifest.
func (r *segmentReader) openRun() error {
	first := r.man.unit(r.next)
	j, window, lastUnit := r.next, first.storedLen, first
	for j < r.last {
		c := r.man.unit(j + 1)
		if c.object != first.object || window+c.storedLen > int64(r.s.opts.ReadAheadBytes) {
			break
		}
		window += c.storedLen
		j, lastUnit = j+1, c
	}
	key := r.keys.data(first.object)
	off, n := first.storedOffset, lastUnit.storedEnd()-first.storedOffset
	toEnd := j+1 == r.man.numUnits() || r.man.unit(j+1).object != first.object
	length := n
	if toEnd {
		length = -1
	}
	r.s.metrics.getRequests.Add(1)
	body, err := r.s.store.Get(r.ctx, key, off, length)
	if err != nil {
		switch {
		case objstore.IsNotExist(err):
			return fmt.Errorf("%w: %s: %w", ErrSegmentDataNotFound, r.id, err)
		case errors.Is(err, objstore.ErrInvalidRange):
			return r.s.corruption(&CorruptionError{SegmentID: r.id, Key: key, Offset: off,
				Reason: fmt.Sprintf("object shorter than the manifest's %d bytes: the store refuses [%d, %d)",
					r.man.objectSizes[first.object], off, off+n)})
		}
		return err
	}
	r.body, r.bodyKey, r.bodyEnd, r.bodyToEnd = body, key, j, toEnd
	return nil
}

// sizeMismatch is the corruption of a data object whose end is not where
// the manifest puts it.
func (r *segmentReader) sizeMismatch(c *manifestChunk, format string, args ...any) error {
	return r.s.corruption(&CorruptionError{SegmentID: r.id, Key: r.bodyKey, Offset: c.storedOffset,
		Reason: fmt.Sprintf("object of %d bytes in the %s ", r.man.objectSizes[c.object], r.man.source()) + fmt.Sprintf(format, args...)})
}

// loadChunk verifies and decompresses unit r.next (reading its group
// first when none is left) and points r.cur at its bytes inside the range.
func (r *segmentReader) loadChunk() error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if len(r.group) == 0 {
		if r.body == nil {
			if err := r.openRun(); err != nil {
				return err
			}
		}
		if err := r.readGroup(); err != nil {
			return err
		}
	}
	k := r.next
	unit := r.man.unit(k)
	c := &unit
	stored := r.group[:c.storedLen]
	r.group = r.group[c.storedLen:]
	corrupt := func(format string, args ...any) *CorruptionError {
		return &CorruptionError{SegmentID: r.id, Key: r.bodyKey, Offset: c.storedOffset,
			Reason: fmt.Sprintf("%s %d (raw [%d, %d)): ", r.man.unitNoun(), k, c.rawOffset, c.rawOffset+c.rawLen) + fmt.Sprintf(format, args...)}
	}
	raw := stored
	if r.man.framed {
		raw = stored[:c.rawLen]
		want := binary.BigEndian.Uint32(stored[c.rawLen:])
		if got := crc32.Update(blockSeedAfter(r.idState, int64(k)), castagnoli, raw); got != want {
			return r.s.corruption(corrupt("checksum %08x, trailer says %08x", got, want))
		}
	} else if got := crc32.Checksum(stored, castagnoli); got != c.crc {
		return r.s.corruption(corrupt("checksum %08x, manifest says %08x", got, c.crc))
	}
	if c.codec == codecZstd {
		if r.raw == nil || int64(cap(*r.raw)) < c.rawLen {
			putBuffer(r.raw)
			r.raw = getBuffer(int(r.man.chunkSize))
		}
		// The capacity is the raw length: the decoder stops there
		// (WithDecodeAllCapLimit), so a hostile frame cannot grow it.
		out, err := r.s.decoder.DecodeAll(stored, (*r.raw)[:0:c.rawLen])
		if err != nil {
			return r.s.corruption(corrupt("zstd: %v", err))
		}
		if int64(len(out)) != c.rawLen {
			return r.s.corruption(corrupt("decompressed to %d bytes, want %d", len(out), c.rawLen))
		}
		raw = out
	}
	r.s.metrics.chunksFetched.Add(1)
	lo, hi := max(r.start-c.rawOffset, 0), min(r.end-c.rawOffset, c.rawLen)
	r.cur = raw[lo:hi]
	r.next++
	return nil
}

// readGroupBytes bounds the stored bytes readGroup takes from a body in
// one read. Units smaller than this (4 KiB blocks) are read together, so
// a 16 KiB fetch, which touches five blocks, costs one read of the store's
// body (one pread under the fs store) rather than one per block; a larger
// unit (a 1 MiB chunk) is read alone.
const readGroupBytes = 128 << 10

// readGroup reads the stored bytes of the units from r.next on that the
// current run holds, up to r.last and readGroupBytes (at least one unit),
// into r.group with one ReadFull. Nothing is served before loadChunk has
// checked each unit's checksum. When the group ends the run, the body is
// checked for its end (an object longer than its manifest, or a store
// returning more than the range) and closed.
func (r *segmentReader) readGroup() error {
	k := r.next
	c := r.man.unit(k)
	end, n := k, c.storedLen
	for end < r.bodyEnd {
		u := r.man.unit(end + 1)
		if n+u.storedLen > readGroupBytes {
			break
		}
		end, n = end+1, n+u.storedLen
	}
	if r.stored == nil || int64(cap(*r.stored)) < n {
		putBuffer(r.stored)
		r.stored = getBuffer(int(max(n, r.man.unitBytes(), readGroupBytes)))
	}
	buf := (*r.stored)[:n]
	got, err := io.ReadFull(r.body, buf)
	r.s.metrics.bytesFetched.Add(int64(got))
	if err != nil {
		// Name the unit the body ended in, and how far into it.
		at, into := k, int64(got)
		for u := r.man.unit(at); at < end && into >= u.storedLen; u = r.man.unit(at) {
			at, into = at+1, into-u.storedLen
		}
		u := r.man.unit(at)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			// A clean early end of a read to the object's end is a
			// shorter object, or a store that lies about a cut body:
			// the object's size tells.
			if size, differs := r.s.sizeDiffers(r.ctx, r.bodyKey, r.man.objectSizes[u.object]); r.bodyToEnd && differs {
				return r.sizeMismatch(&u, "has %d: it ends %d bytes into %s %d", size, into, r.man.unitNoun(), at)
			}
			err = fmt.Errorf("%w: %s %d: got %d of %d bytes", objstore.ErrShortRead, r.man.unitNoun(), at, into, u.storedLen)
		}
		return objstore.NewOpError(objstore.OpGet, r.bodyKey, err)
	}
	if end == r.bodyEnd {
		// The run is complete. More bytes to the object's end mean an
		// object longer than its manifest; more in a bounded range, a
		// store returning another range than asked for.
		last := r.man.unit(end)
		var one [1]byte
		if m, err := r.body.Read(one[:]); m > 0 && r.bodyToEnd {
			return r.sizeMismatch(&last, "goes on after its last %s %d", r.man.unitNoun(), end)
		} else if m > 0 {
			return objstore.NewOpError(objstore.OpGet, r.bodyKey,
				fmt.Errorf("%w: body longer than the range ending with %s %d", objstore.ErrSizeMismatch, r.man.unitNoun(), end))
		} else if err != nil && err != io.EOF {
			return objstore.NewOpError(objstore.OpGet, r.bodyKey, err)
		}
		r.closeBody()
	}
	r.group = buf
	return nil
}

// corruption logs a detected corruption and returns err.
func (s *StorageManager) corruption(err *CorruptionError) error {
	s.logger.Warn("remote segment data corrupt", zap.Stringer("segment", err.SegmentID),
		zap.String("key", err.Key), zap.Int64("offset", err.Offset), zap.String("reason", err.Reason))
	return err
}

// FetchIndex returns the auxiliary index t of the segment, checked against
// its CRC-32C (a mismatch is a *CorruptionError). The transaction index of
// a segment without aborted transactions is ErrIndexNotFound. Kafka:
// fetchIndex.
func (s *StorageManager) FetchIndex(ctx context.Context, m *SegmentMetadata, t IndexType) ([]byte, error) {
	b, _, err := s.fetchIndex(ctx, m, t)
	return b, s.count(err)
}

// FetchLeaderEpochs returns the decoded IndexLeaderEpoch index: the
// leader's epoch entries before the segment end (the whole history up to
// it), oldest first. Bytes that pass their checksum but do not parse as the
// canonical checkpoint text of strictly increasing entries are a
// *CorruptionError.
func (s *StorageManager) FetchLeaderEpochs(ctx context.Context, m *SegmentMetadata) ([]epochcache.Entry, error) {
	b, corrupt, err := s.fetchIndex(ctx, m, IndexLeaderEpoch)
	if err != nil {
		return nil, s.count(err)
	}
	entries, reason := parseEpochCheckpoint(b)
	if reason != "" {
		return nil, s.count(s.corruption(corrupt("leader-epoch checkpoint: " + reason)))
	}
	return entries, nil
}

// fetchIndex reads index t; corrupt makes a *CorruptionError about it.
func (s *StorageManager) fetchIndex(ctx context.Context, m *SegmentMetadata, t IndexType) (b []byte, corrupt func(string) *CorruptionError, err error) {
	if !t.valid() {
		return nil, nil, fmt.Errorf("%w: remote: index type %d", ErrInvalidArgument, t)
	}
	man, keys, err := s.loadManifest(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	ix, ok := man.index(t)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s index of segment %s", ErrIndexNotFound, t, m.SegmentID)
	}
	corrupt = func(reason string) *CorruptionError {
		return &CorruptionError{SegmentID: m.SegmentID, Key: keys.indexes(), Offset: ix.offset,
			Reason: t.String() + " index: " + reason}
	}
	b = []byte{}
	if ix.size > 0 {
		var reason string
		b, reason, err = s.readIndexRange(ctx, keys.indexes(), ix, ix.offset+ix.size == man.indexesSize())
		if err != nil {
			if objstore.IsNotExist(err) {
				err = fmt.Errorf("%w: %s: %w", ErrSegmentDataNotFound, m.SegmentID, err)
			}
			return nil, nil, fmt.Errorf("remote: fetch %s index of segment %s: %w", t, m.SegmentID, err)
		}
		if reason != "" {
			return nil, nil, s.corruption(corrupt(reason))
		}
	}
	if got := crc32.Checksum(b, castagnoli); got != ix.crc {
		return nil, nil, s.corruption(corrupt(fmt.Sprintf("checksum %08x, manifest says %08x", got, ix.crc)))
	}
	return b, corrupt, nil
}

// readIndexRange reads index ix of the "indexes" object. The last index
// is read to the object's end, so that an object longer or shorter than
// the manifest says is found; a range the store refuses as past the end
// is a shorter object too. Such a mismatch is returned as a reason (the
// caller makes the *CorruptionError); I/O failures as errors.
func (s *StorageManager) readIndexRange(ctx context.Context, key string, ix manifestIndex, last bool) ([]byte, string, error) {
	s.metrics.getRequests.Add(1)
	if !last {
		b, err := objstore.ReadRange(ctx, s.store, key, ix.offset, ix.size)
		if errors.Is(err, objstore.ErrInvalidRange) {
			return nil, "the indexes object is shorter than the manifest says", nil
		}
		if err == nil {
			s.metrics.bytesFetched.Add(ix.size)
		}
		return b, "", err
	}
	body, err := s.store.Get(ctx, key, ix.offset, -1)
	if errors.Is(err, objstore.ErrInvalidRange) {
		return nil, "the indexes object is shorter than the manifest says", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	// One byte more than the index: enough to see an extension, and a
	// bound on what a hostile object makes us read.
	b := make([]byte, ix.size+1)
	n, err := io.ReadFull(body, b)
	s.metrics.bytesFetched.Add(int64(n))
	switch {
	case err == nil:
		return nil, fmt.Sprintf("the indexes object is longer than the manifest's %d bytes", ix.offset+ix.size), nil
	case err == io.ErrUnexpectedEOF && int64(n) == ix.size:
		return b[:n], "", nil
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if size, differs := s.sizeDiffers(ctx, key, ix.offset+ix.size); differs {
			return nil, fmt.Sprintf("the indexes object has %d bytes, the manifest says %d", size, ix.offset+ix.size), nil
		}
		err = fmt.Errorf("%w: [%d, %d): got %d of %d bytes", objstore.ErrShortRead, ix.offset, ix.offset+ix.size, n, ix.size)
	}
	return nil, "", objstore.NewOpError(objstore.OpGet, key, err)
}

// sizeDiffers reports whether the object under key has a size other than
// want (and which), after a body ended early without an error: either the
// object is shorter than its manifest says, or the store lied about a cut
// body. Only a Stat that succeeds can tell; when it fails, the early end
// stays an I/O failure.
func (s *StorageManager) sizeDiffers(ctx context.Context, key string, want int64) (int64, bool) {
	info, err := s.store.Stat(ctx, key)
	if err != nil {
		return 0, false
	}
	return info.Size, info.Size != want
}

// loadManifest returns the segment's manifest, from the cache or the
// store, checked against m (ids, start offset, size).
func (s *StorageManager) loadManifest(ctx context.Context, m *SegmentMetadata) (*manifest, segmentKeys, error) {
	if m != nil && s.cache != nil {
		// The cached keys are those of the same segment id and start
		// offset, so m would make the same ones.
		if man, keys := s.cache.lookup(m.SegmentID); man != nil && man.startOffset == m.StartOffset {
			s.metrics.manifestHits.Add(1)
			return man, keys, nil
		}
	}
	keys, err := s.keysFor(m)
	if err != nil {
		return nil, keys, err
	}
	if len(m.CustomMetadata) > 0 {
		man, err := manifestFromLocator(m)
		if err != nil {
			return nil, keys, s.corruption(&CorruptionError{SegmentID: m.SegmentID, Offset: -1, Reason: err.Error()})
		}
		s.metrics.locatorReads.Add(1)
		if s.cache != nil {
			s.cache.add(m.SegmentID, man, keys)
		}
		return man, keys, nil
	}
	s.metrics.manifestMisses.Add(1)
	key := keys.manifest()
	b, err := s.readManifest(ctx, key)
	if err != nil {
		if objstore.IsNotExist(err) {
			return nil, keys, fmt.Errorf("%w: %s: %w", ErrSegmentDataNotFound, m.SegmentID, err)
		}
		return nil, keys, fmt.Errorf("remote: read manifest of segment %s: %w", m.SegmentID, err)
	}
	corrupt := func(reason string) error {
		return s.corruption(&CorruptionError{SegmentID: m.SegmentID, Key: key, Offset: -1, Reason: reason})
	}
	if b == nil {
		return nil, keys, corrupt(fmt.Sprintf("manifest larger than %d bytes", maxManifestBytes))
	}
	man, err := decodeManifest(b)
	if err != nil {
		return nil, keys, corrupt(err.Error())
	}
	tp := m.SegmentID.TopicIDPartition
	switch {
	case man.topicID != tp.TopicID || man.partition != tp.Partition || man.segmentID != m.SegmentID.ID:
		return nil, keys, corrupt(fmt.Sprintf("manifest of segment %s:%d/%s", man.topicID, man.partition, man.segmentID))
	case man.startOffset != m.StartOffset:
		return nil, keys, corrupt(fmt.Sprintf("manifest start offset %d, metadata says %d", man.startOffset, m.StartOffset))
	case man.logSize != m.SizeBytes:
		return nil, keys, corrupt(fmt.Sprintf("manifest log size %d, metadata says %d", man.logSize, m.SizeBytes))
	}
	if s.cache != nil {
		s.cache.add(m.SegmentID, man, keys)
	}
	return man, keys, nil
}

// manifestFromLocator builds the layout of m's segment from the locator
// in its custom metadata, checked against the metadata: the log size, and
// a transaction index iff the metadata says the segment has one.
func manifestFromLocator(m *SegmentMetadata) (*manifest, error) {
	tp := m.SegmentID.TopicIDPartition
	man := &manifest{topicID: tp.TopicID, partition: tp.Partition, segmentID: m.SegmentID.ID, startOffset: m.StartOffset}
	if err := decodeLocator(man, m.CustomMetadata, m.SegmentID.ID); err != nil {
		return nil, err
	}
	if man.logSize != m.SizeBytes {
		return nil, badLocator("log size %d, metadata says %d", man.logSize, m.SizeBytes)
	}
	if _, ok := man.index(IndexTransaction); ok == m.TxnIndexEmpty {
		return nil, badLocator("transaction index present %t, metadata says empty %t", ok, m.TxnIndexEmpty)
	}
	return man, nil
}

// readManifest reads the manifest object, at most maxManifestBytes of it:
// nil, nil when it is larger.
func (s *StorageManager) readManifest(ctx context.Context, key string) ([]byte, error) {
	s.metrics.getRequests.Add(1)
	body, err := s.store.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(body, maxManifestBytes+1))
	s.metrics.bytesFetched.Add(n)
	if err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	if n > maxManifestBytes {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// manifestCache is an LRU of decoded manifests by segment id. Manifests
// are immutable, so they are shared with readers without copying.
type manifestCache struct {
	capacity int
	mu       struct {
		sync.Mutex
		order *list.List // of *manifestCacheEntry, most recent first
		byID  map[SegmentID]*list.Element
	}
}

type manifestCacheEntry struct {
	id   SegmentID
	man  *manifest
	keys segmentKeys // of man's segment id and start offset
}

func newManifestCache(capacity int) *manifestCache {
	c := &manifestCache{capacity: capacity}
	c.mu.order = list.New()
	c.mu.byID = make(map[SegmentID]*list.Element)
	return c
}

// contains reports whether id is cached, without refreshing it.
func (c *manifestCache) contains(id SegmentID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.byID[id]
	return ok
}

// get returns the manifest of id (nil when not cached).
func (c *manifestCache) get(id SegmentID) *manifest {
	man, _ := c.lookup(id)
	return man
}

// lookup returns the manifest of id and its keys (nil when not cached).
func (c *manifestCache) lookup(id SegmentID) (*manifest, segmentKeys) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.byID[id]
	if !ok {
		return nil, segmentKeys{}
	}
	c.mu.order.MoveToFront(e)
	ent := e.Value.(*manifestCacheEntry)
	return ent.man, ent.keys
}

func (c *manifestCache) add(id SegmentID, man *manifest, keys segmentKeys) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.mu.byID[id]; ok {
		ent := e.Value.(*manifestCacheEntry)
		ent.man, ent.keys = man, keys
		c.mu.order.MoveToFront(e)
		return
	}
	c.mu.byID[id] = c.mu.order.PushFront(&manifestCacheEntry{id: id, man: man, keys: keys})
	for c.mu.order.Len() > c.capacity {
		oldest := c.mu.order.Back()
		c.mu.order.Remove(oldest)
		delete(c.mu.byID, oldest.Value.(*manifestCacheEntry).id)
	}
}

func (c *manifestCache) remove(id SegmentID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.mu.byID[id]; ok {
		c.mu.order.Remove(e)
		delete(c.mu.byID, id)
	}
}

// appendEpochCheckpoint appends entries in Kafka's leader-epoch-checkpoint
// text format (epochcache.AppendCheckpoint; DESIGN.md 4.2).
func appendEpochCheckpoint(b []byte, entries []epochcache.Entry) []byte {
	return epochcache.AppendCheckpoint(b, entries)
}

// parseEpochCheckpoint parses what appendEpochCheckpoint wrote, and only
// that (the remote copy is written by this package alone, so anything
// else is corruption): the file's syntax (epochcache.ParseCheckpoint),
// entries strictly increasing in epoch and start offset, non-negative,
// and the canonical text. It returns the entries, or a reason.
func parseEpochCheckpoint(text []byte) ([]epochcache.Entry, string) {
	entries, err := epochcache.ParseCheckpoint("remote epoch checkpoint", text)
	if err != nil {
		return nil, err.Error()
	}
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return nil, fmt.Sprintf("entry %d: negative %s", i, e)
		}
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset) {
			return nil, fmt.Sprintf("entries not strictly increasing: %s then %s", entries[i-1], e)
		}
	}
	if !bytes.Equal(appendEpochCheckpoint(nil, entries), text) {
		return nil, "not in canonical form"
	}
	return entries, ""
}
