package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/tierlog/tierlog/remote/objstore"
)

// Layout version 3 ("framed") stores the checksums of an uncompressed
// segment inside its data object, after the bytes they cover, so that one
// ranged Get returns both the data and what verifies it. The data object
// data-000000 is the .log cut into blocks of block size B (the last one
// shorter), each followed by a 4-byte trailer:
//
//	block i       raw bytes [i*B, min((i+1)*B, log size)) of the .log
//	trailer i     uint32 big-endian CRC-32C (Castagnoli) of
//	              segment id [16]byte, i as uint64 big-endian, block i
//
// so block i starts at stored offset i*(B+4) and the object has log size
// + 4*ceil(log size / B) bytes. Seeding each trailer with the segment id
// and the block number makes a block served from another segment's object,
// or from another place of the same object, fail its check like a flipped
// bit does.
//
// Everything else a read needs is the locator, which CopySegment returns
// as the segment's custom metadata (Kafka: KIP-917's
// RemoteLogSegmentMetadata.customMetadata, bounded by
// remote.log.metadata.custom.metadata.max.bytes, 128 by default), so that
// a read of a segment whose metadata is known issues no Get but the data's
// or the index's own. Big-endian, locatorLen bytes:
//
//	 0  version      uint8   3 (layoutFramed)
//	 1  flags        uint8   0, or locatorFlagBatches (the other bits
//	                         are reserved, 0)
//	 2  block size   uint32  1 to MaxChunkBytes
//	 6  log size     int64   bytes of the original .log, at most
//	                         maxFramedLogBytes; equal to the metadata's
//	                         SizeBytes
//	14  indexes      5 x (size uint32, CRC-32C uint32) in type order:
//	                   offset, time, producer snapshot, transaction,
//	                   leader epoch; concatenated in the "indexes" object
//	                   from offset 0 in that order. The transaction index
//	                   is absent when its size is 0; an empty index has
//	                   CRC 0.
//	54  batches      only with locatorFlagBatches: size uint32 (at least
//	                 1) and CRC-32C uint32 of the producer batches index,
//	                 after the leader-epoch index in the "indexes" object
//	54  crc          uint32  (at 62 with locatorFlagBatches) CRC-32C of
//	                         the segment id [16]byte followed by every byte
//	                         before it: a locator copied onto another
//	                         segment's metadata fails it
//
// A locator is 58 bytes (locatorLen) without the producer batches index
// (segments copied before it existed, or without one) and 66 with it.
//
// The manifest object of version 3 holds the same bytes after the header
// every manifest starts with (see storage_manifest.go), so a read without
// the locator (metadata registered without the custom metadata) reads the
// manifest as before and finds the same layout.
const (
	layoutFramed      = 3
	locatorLen        = 58
	trailerLen        = 4
	locatorBodyLen    = locatorLen - crcLen
	locatorIndexesPos = 14
	// locatorFlagBatches says the locator has the producer batches
	// index's entry (locatorBatchesLen bytes in all).
	locatorFlagBatches = 1
	locatorBatchesLen  = locatorLen + 8
	// maxLocatorLen is the longest locator.
	maxLocatorLen = locatorBatchesLen
	// maxFramedLogBytes bounds the log size of a framed segment, so that
	// stored offsets cannot overflow (Kafka's segments stay below 2 GiB:
	// positions are int32). A larger segment is written in version 1 or
	// 2.
	maxFramedLogBytes = 1 << 40
)

// locatorIndexTypes is the order of the locator's index entries that
// every locator has (the producer batches entry follows them when its
// flag is set).
var locatorIndexTypes = [...]IndexType{IndexOffset, IndexTimestamp, IndexProducerSnapshot,
	IndexTransaction, IndexLeaderEpoch}

// source names where a layout's sizes come from, in errors.
func (m *manifest) source() string {
	if m.framed {
		return "layout (locator or manifest)"
	}
	return "manifest"
}

// numBlocks is the block count of a framed segment.
func (m *manifest) numBlocks() int64 { return (m.logSize + m.blockSize - 1) / m.blockSize }

// framedUnit returns block i of a framed segment as a read unit: its
// stored bytes are the block and its trailer.
func (m *manifest) framedUnit(i int) manifestChunk {
	off := int64(i) * m.blockSize
	n := min(m.blockSize, m.logSize-off)
	return manifestChunk{rawOffset: off, rawLen: n, codec: codecNone,
		storedOffset: int64(i) * (m.blockSize + trailerLen), storedLen: n + trailerLen}
}

// framedObjectSize is the size of the data object of a framed segment.
func framedObjectSize(logSize, blockSize int64) int64 {
	return logSize + trailerLen*((logSize+blockSize-1)/blockSize)
}

// blockSeed returns the CRC-32C state a trailer starts from: the segment
// id and the block number.
//
// It is crc32.Update(0, castagnoli, id || big-endian block) computed
// byte by byte from the table, because a buffer handed to crc32.Update
// escapes to the heap: one allocation per block read otherwise.
func blockSeed(segmentID UUID, block int64) uint32 {
	return blockSeedAfter(idCRCState(segmentID), block)
}

// idCRCState is the CRC-32C register (not yet inverted) after the 16 id
// bytes: the part of every block's seed that one segment shares.
func idCRCState(segmentID UUID) uint32 {
	crc := ^uint32(0)
	for _, b := range segmentID {
		crc = castagnoli[byte(crc)^b] ^ crc>>8
	}
	return crc
}

// blockSeedAfter finishes blockSeed from idCRCState's register.
func blockSeedAfter(idState uint32, block int64) uint32 {
	crc := idState
	for shift := 56; shift >= 0; shift -= 8 {
		crc = castagnoli[byte(crc)^byte(uint64(block)>>shift)] ^ crc>>8
	}
	return ^crc
}

// encodeLocator appends the locator of framed manifest m to dst.
func encodeLocator(dst []byte, m *manifest) []byte {
	start := len(dst)
	batches, withBatches := m.index(IndexProducerBatches)
	flags := uint8(0)
	if withBatches {
		flags = locatorFlagBatches
	}
	dst = append(dst, layoutFramed, flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.blockSize))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.logSize))
	for _, t := range locatorIndexTypes {
		ix, _ := m.index(t)
		dst = binary.BigEndian.AppendUint32(dst, uint32(ix.size))
		dst = binary.BigEndian.AppendUint32(dst, ix.crc)
	}
	if withBatches {
		dst = binary.BigEndian.AppendUint32(dst, uint32(batches.size))
		dst = binary.BigEndian.AppendUint32(dst, batches.crc)
	}
	sum := crc32.Update(crc32.Update(0, castagnoli, m.segmentID[:]), castagnoli, dst[start:])
	return binary.BigEndian.AppendUint32(dst, sum)
}

// locatorError is what decodeLocator returns; the caller turns it into a
// *CorruptionError naming the segment.
type locatorError struct{ reason string }

func (e *locatorError) Error() string { return "locator: " + e.reason }

func badLocator(format string, args ...any) error {
	return &locatorError{reason: fmt.Sprintf(format, args...)}
}

// decodeLocator parses the locator b of segment id into m's layout
// fields (block size, log size, objects, indexes); the ids and start
// offset are the caller's. It never panics and accepts exactly what
// encodeLocator produces for some valid framed manifest; anything else is
// a *locatorError.
func decodeLocator(m *manifest, b []byte, segmentID UUID) error {
	if len(b) != locatorLen && len(b) != locatorBatchesLen {
		return badLocator("%d bytes, want %d or %d", len(b), locatorLen, locatorBatchesLen)
	}
	body := len(b) - crcLen
	sum := binary.BigEndian.Uint32(b[body:])
	if got := crc32.Update(crc32.Update(0, castagnoli, segmentID[:]), castagnoli, b[:body]); got != sum {
		return badLocator("checksum %08x, stored %08x", got, sum)
	}
	if b[0] != layoutFramed {
		return badLocator("version %d, want %d", b[0], layoutFramed)
	}
	withBatches := len(b) == locatorBatchesLen
	wantFlags := uint8(0)
	if withBatches {
		wantFlags = locatorFlagBatches
	}
	if b[1] != wantFlags {
		return badLocator("flags %#x in %d bytes", b[1], len(b))
	}
	blockSize, logSize := binary.BigEndian.Uint32(b[2:]), binary.BigEndian.Uint64(b[6:])
	if blockSize == 0 || blockSize > MaxChunkBytes {
		return badLocator("block size %d", blockSize)
	}
	if logSize > maxFramedLogBytes {
		return badLocator("log size %d, more than %d", logSize, uint64(maxFramedLogBytes))
	}
	m.blockSize, m.logSize, m.chunkSize, m.framed = int64(blockSize), int64(logSize), int64(blockSize), true
	m.objectSizes = nil
	if logSize > 0 {
		m.objectSizes = []int64{framedObjectSize(m.logSize, m.blockSize)}
	}
	m.indexes = make([]manifestIndex, 0, numIndexTypes)
	offset := int64(0)
	for i, t := range locatorIndexTypes {
		p := b[locatorIndexesPos+8*i:]
		size, crc := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		switch {
		case size > maxIndexBytes:
			return badLocator("%s index of %d bytes, more than %d", t, size, maxIndexBytes)
		case size == 0 && crc != 0:
			return badLocator("empty %s index with checksum %08x", t, crc)
		case size == 0 && t == IndexTransaction:
			continue // absent
		}
		m.indexes = append(m.indexes, manifestIndex{typ: t, offset: offset, size: int64(size), crc: crc})
		offset += int64(size)
	}
	if withBatches {
		p := b[locatorBodyLen:]
		size, crc := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if size == 0 || size > maxIndexBytes {
			return badLocator("%s index of %d bytes, want 1 to %d", IndexProducerBatches, size, maxIndexBytes)
		}
		m.indexes = append(m.indexes, manifestIndex{typ: IndexProducerBatches, offset: offset, size: int64(size), crc: crc})
	}
	return nil
}

// framedReaderAt is the data object of a framed segment as an
// io.ReaderAt over the .log r: the block bytes are read from r straight
// into the caller's buffer, and each trailer is the CRC-32C of its block,
// computed from the bytes as the upload reads them. A read that continues
// a block where its checksummed prefix ends extends it; a trailer whose
// block was not read in order (a multipart part that starts inside a
// block, a retried part) is computed by reading the rest of its block
// once more (counted in reread). The .log is immutable during a copy, so
// every read of a position returns the same bytes and the trailers are
// those of the bytes uploaded.
type framedReaderAt struct {
	r                  io.ReaderAt
	vec                VectorReaderAt // r's, when it has one
	segmentID          UUID
	logSize, blockSize int64
	size               int64 // of the data object
	// mu guards the fields below. Held for the CRC-32C of one read (or
	// the re-read of one block), so parallel part reads wait on it
	// briefly.
	mu        sync.Mutex
	fed       []int64  // per block: bytes checksummed from its start
	crc       []uint32 // per block: the CRC-32C state of those bytes
	reread    int64
	rereadBuf []byte
}

// VectorReaderAt is an optional interface of SegmentData.Log. ReadvAt
// reads consecutive bytes from off into bufs, one buffer after the other,
// as ReadAt would into their concatenation, and returns fewer bytes than
// they hold only with an error (io.EOF at the end). With it, the copy of an
// uncompressed segment (layout version 3) reads the log straight into the
// data object's layout, each block in front of its trailer, with one call
// per upload read; without it, one ReadAt and a move of the blocks in
// place. The log package's SegmentFiles.Log has it (one preadv(2) of the
// segment file on Linux).
type VectorReaderAt interface {
	ReadvAt(bufs [][]byte, off int64) (int, error)
}

func newFramedReaderAt(r io.ReaderAt, segmentID UUID, logSize, blockSize int64) *framedReaderAt {
	n := (logSize + blockSize - 1) / blockSize
	f := &framedReaderAt{r: r, segmentID: segmentID, logSize: logSize, blockSize: blockSize,
		size: framedObjectSize(logSize, blockSize), fed: make([]int64, n), crc: make([]uint32, n)}
	f.vec, _ = r.(VectorReaderAt)
	idState := idCRCState(segmentID)
	for i := range f.crc {
		f.crc[i] = blockSeedAfter(idState, int64(i))
	}
	return f
}

// blockLen is the raw length of block i.
func (f *framedReaderAt) blockLen(i int64) int64 { return min(f.blockSize, f.logSize-i*f.blockSize) }

// ReadAt reads the data object's bytes [off, off+len(p)) with one read
// of the source per call, not one per block (at 4 KiB blocks a 1 MiB
// upload read would be 256 preads): a VectorReaderAt source reads each
// block's log bytes straight into its place; any other source reads them
// with one ReadAt into p and they are spread out in place (last block
// first, so nothing is overwritten before it moves) to make room for the
// trailers. The trailers are filled in last, front to back. A source that
// ends early fails the read with nothing served (n 0).
func (f *framedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("remote: negative offset %d", off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.size)
	frame := f.blockSize + trailerLen
	first, last := off/frame, (end-1)/frame
	// The log bytes of block i inside [off, end) belong at p[dst:]; read
	// in one go they land at p[src:] (dst >= src, more so for later
	// blocks).
	rawStart := f.rawPos(off)
	piece := func(i int64) (dst, src, n, in int64) {
		lo, hi := max(off, i*frame), min(end, i*frame+f.blockLen(i))
		if hi <= lo {
			return 0, 0, 0, 0
		}
		in = lo - i*frame
		return lo - off, i*f.blockSize + in - rawStart, hi - lo, in
	}
	feed := func(i, dst, n, in int64) {
		f.mu.Lock()
		if f.fed[i] == in {
			f.crc[i] = crc32.Update(f.crc[i], castagnoli, p[dst:dst+n])
			f.fed[i] += n
		}
		f.mu.Unlock()
	}
	if f.vec != nil {
		bufs := make([][]byte, 0, last-first+1)
		for i := first; i <= last; i++ {
			if dst, _, n, _ := piece(i); n > 0 {
				bufs = append(bufs, p[dst:dst+n])
			}
		}
		if err := readvFullAt(f.vec, bufs, rawStart); err != nil {
			return 0, err
		}
		for i := first; i <= last; i++ {
			if dst, _, n, in := piece(i); n > 0 {
				feed(i, dst, n, in)
			}
		}
	} else {
		if err := readFullAt(f.r, p[:f.rawPos(end)-rawStart], rawStart); err != nil {
			return 0, err
		}
		// Each block's checksum is fed right after its move, while its
		// bytes are in the CPU cache; blocks have independent checksums,
		// so the order across blocks does not matter.
		for i := last; i >= first; i-- {
			dst, src, n, in := piece(i)
			if n == 0 {
				continue
			}
			if dst != src {
				copy(p[dst:dst+n], p[src:src+n])
			}
			feed(i, dst, n, in)
		}
	}
	for i := first; i <= last; i++ {
		bl := f.blockLen(i)
		tlo, thi := max(off, i*frame+bl), min(end, i*frame+bl+trailerLen)
		if thi <= tlo {
			continue
		}
		sum, err := f.trailer(i)
		if err != nil {
			return 0, err
		}
		var t [trailerLen]byte
		binary.BigEndian.PutUint32(t[:], sum)
		copy(p[tlo-off:thi-off], t[tlo-(i*frame+bl):])
	}
	if n := int(end - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

// readvFullAt fills bufs from r at off, or fails.
func readvFullAt(r VectorReaderAt, bufs [][]byte, off int64) error {
	want := 0
	for _, b := range bufs {
		want += len(b)
	}
	n, err := r.ReadvAt(bufs, off)
	if n == want {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("remote: read segment log [%d, %d): got %d bytes: %w", off, off+int64(want), n, err)
}

// rawPos returns the log offset of data-object offset stored: a
// position inside a trailer counts as the end of its block.
func (f *framedReaderAt) rawPos(stored int64) int64 {
	frame := f.blockSize + trailerLen
	i, in := stored/frame, stored%frame
	if i*f.blockSize >= f.logSize {
		return f.logSize
	}
	return i*f.blockSize + min(in, f.blockLen(i))
}

// trailer returns the CRC-32C of block i, reading what the upload left
// unchecksummed of it.
func (f *framedReaderAt) trailer(i int64) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bl := f.blockLen(i)
	for f.fed[i] < bl {
		if f.rereadBuf == nil {
			f.rereadBuf = make([]byte, f.blockSize)
		}
		b := f.rereadBuf[:bl-f.fed[i]]
		if err := readFullAt(f.r, b, i*f.blockSize+f.fed[i]); err != nil {
			return 0, err
		}
		f.reread += int64(len(b))
		f.crc[i] = crc32.Update(f.crc[i], castagnoli, b)
		f.fed[i] = bl
	}
	return f.crc[i], nil
}

// putFramed uploads an uncompressed segment in layout version 3: one data
// object read from data.Log through a framedReaderAt, so the segment is
// read once and its checksums are computed on the way.
func (s *StorageManager) putFramed(ctx context.Context, keys segmentKeys, data SegmentData, man *manifest) error {
	man.framed, man.blockSize, man.chunkSize = true, int64(s.opts.BlockSize), int64(s.opts.BlockSize)
	if data.LogSize == 0 {
		return nil
	}
	fr := newFramedReaderAt(data.Log, man.segmentID, data.LogSize, man.blockSize)
	if err := objstore.PutLarge(ctx, s.store, keys.data(0), fr, fr.size, objstore.MultipartOptions{}); err != nil {
		return err
	}
	s.metrics.objectsPut.Add(1)
	s.metrics.bytesPut.Add(fr.size)
	// Blocks the upload never read (none for a store that reads every
	// byte it stores) have no trailer in the object; nothing to finish.
	fr.mu.Lock()
	s.metrics.checksumRereadBytes.Add(fr.reread)
	fr.mu.Unlock()
	man.objectSizes = []int64{fr.size}
	return nil
}

// writesFramed reports whether a copy of logSize bytes uses layout
// version 3.
func (s *StorageManager) writesFramed(logSize int64) bool {
	bs := int64(s.opts.BlockSize)
	return !s.opts.Compression && !s.opts.ChecksumsInManifest && bs > 0 && bs <= MaxChunkBytes &&
		logSize <= maxFramedLogBytes && (logSize+bs-1)/bs <= maxBlocksPerSegment
}
