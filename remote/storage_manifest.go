package remote

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// The manifest is the last object a copy writes; its presence means the
// copy is complete. It lists the chunks of the segment's .log, where each
// is stored and its checksum, and the auxiliary indexes inside the
// "indexes" object. Big-endian, version 1 or 2:
//
//	 0  magic          [4]byte "TLRS"
//	 4  version        uint8   (manifestV1, or manifestV2 with blocks)
//	 5  flags          uint8   (0; reserved)
//	 6  topic id       [16]byte
//	22  partition      int32
//	26  segment id     [16]byte
//	42  start offset   int64   the segment's first offset (as in its key)
//	50  log size       int64   bytes of the original .log
//	58  chunk size     uint32  raw bytes per chunk, all but the last
//	62  object count   uint32  data objects data-000000 ...
//	66  chunk count    uint32  = ceil(log size / chunk size)
//	70  index count    uint8
//	71  objects        object count x stored size int64
//	    chunks         chunk count x 33 bytes:
//	                     raw offset int64, raw length uint32, codec uint8,
//	                     object uint32, stored offset int64 (inside the
//	                     object), stored length uint32, CRC-32C uint32 of
//	                     the stored bytes
//	    indexes        index count x 21 bytes, by increasing type:
//	                     type uint8, offset int64 and size int64 inside
//	                     the "indexes" object, CRC-32C uint32 of the bytes
//	    version 2 only:
//	    block size     uint32  1 to chunk size - 1
//	    blocks         per chunk in order, ceil(raw length / block size)
//	                     x CRC-32C uint32 of the chunk's raw bytes
//	                     [b*block size, min((b+1)*block size, raw length))
//	    crc            uint32  CRC-32C (Castagnoli) of every byte before it
//
// Chunk k covers the raw bytes [k*chunkSize, min((k+1)*chunkSize, log
// size)). Chunks are stored in order: each data object holds a run of
// consecutive chunks back to back from offset 0, and its size is the end
// of its last chunk. Codec 0 stores the raw bytes (stored length = raw
// length); codec 1 stores one zstd frame that is strictly smaller than the
// raw bytes (a chunk that does not shrink is stored raw). The indexes are
// concatenated in type order from offset 0; the offset, time, producer
// snapshot and leader-epoch indexes are always present, the transaction
// index only when the segment has aborted transactions, the producer
// batches index (type 6, tierlog's .producerbatches bytes) only when the
// copy uploaded one.
//
// Version 2 is written for an uncompressed segment whose chunks are longer
// than StorageOptions.BlockSize: every chunk is raw (codec 0), and the
// block checksums let a read fetch and verify only the blocks its range
// touches instead of whole chunks. Version 1 manifests (compressed
// segments, and every manifest written before blocks existed) are read as
// before, chunk by chunk.
//
// The encoding is canonical: decodeManifest accepts exactly the bytes
// encodeManifest produces for some valid manifest, so every field the
// reader relies on (offsets, lengths, object numbers) is checked once, at
// decode, and never again on the read path.
const (
	manifestMagic    = "TLRS"
	manifestV1       = 1
	manifestV2       = 2
	manifestFixedLen = 71
	manifestChunkLen = 33
	manifestIndexLen = 21

	codecNone = 0
	codecZstd = 1

	// MaxChunkBytes bounds StorageOptions.ChunkSize: a reader holds one
	// raw and one stored chunk in memory.
	MaxChunkBytes = 64 << 20
	// maxChunksPerSegment bounds the chunk count of one segment, and so the
	// manifest (about 2.7 MiB at the bound): 64 GiB at the default chunk
	// size, far above Kafka's 2 GiB segments.
	maxChunksPerSegment = 1 << 16
	// maxBlocksPerSegment bounds the block checksums of a version 2
	// manifest (4 MiB of them: 16 GiB at the default block size); a
	// segment that would have more is written as version 1.
	maxBlocksPerSegment = 1 << 20
	// maxIndexBytes bounds each auxiliary index (Kafka's index files are
	// 10 MiB by default; segment.index.bytes).
	maxIndexBytes = 512 << 20
)

// manifest describes one copied segment. Immutable once built: it is
// shared by the cache and by concurrent readers.
type manifest struct {
	topicID     UUID
	partition   int32
	segmentID   UUID
	startOffset int64
	logSize     int64
	chunkSize   int64
	// objectSizes[i] is the stored size of data object i.
	objectSizes []int64
	chunks      []manifestChunk
	// indexes are sorted by type.
	indexes []manifestIndex
	// blockSize and blocks are version 2's block checksums, chunk by
	// chunk (blocksPerChunk of each but the last); blockSize 0 without.
	blockSize int64
	blocks    []uint32
	// framed is layout version 3 (storage_locator.go): no chunks, the
	// blocks' checksums are trailers in the data object; chunkSize is
	// blockSize.
	framed bool
}

// blocksPerChunk is the number of blocks of a full chunk.
func (m *manifest) blocksPerChunk() int64 { return (m.chunkSize + m.blockSize - 1) / m.blockSize }

// blockCount returns the number of blocks of a segment of logSize bytes
// in chunks of chunkSize and blocks of blockSize.
func blockCount(logSize, chunkSize, blockSize int64) int64 {
	full, last := logSize/chunkSize, logSize%chunkSize
	return full*((chunkSize+blockSize-1)/blockSize) + (last+blockSize-1)/blockSize
}

// The read path works on units: the chunks, or with block checksums the
// blocks, each verified on its own before any of its bytes is served.

// numUnits returns the number of read units.
func (m *manifest) numUnits() int {
	if m.framed {
		return int(m.numBlocks())
	}
	if m.blockSize == 0 {
		return len(m.chunks)
	}
	return len(m.blocks)
}

// unitBytes is the largest raw and stored length of a unit.
func (m *manifest) unitBytes() int64 {
	if m.framed {
		return m.blockSize + trailerLen
	}
	if m.blockSize == 0 {
		return m.chunkSize
	}
	return m.blockSize
}

// unitNoun names a unit in errors.
func (m *manifest) unitNoun() string {
	if m.blockSize == 0 {
		return "chunk"
	}
	return "block"
}

// unitAt returns the unit holding raw byte pos (0 <= pos < logSize).
func (m *manifest) unitAt(pos int64) int {
	if m.framed {
		return int(pos / m.blockSize)
	}
	k := pos / m.chunkSize
	if m.blockSize == 0 {
		return int(k)
	}
	return int(k*m.blocksPerChunk() + (pos-k*m.chunkSize)/m.blockSize)
}

// unit returns read unit i: a chunk, or a block as a raw chunk of its own.
func (m *manifest) unit(i int) manifestChunk {
	if m.framed {
		return m.framedUnit(i)
	}
	if m.blockSize == 0 {
		return m.chunks[i]
	}
	bpc := m.blocksPerChunk()
	c := &m.chunks[int64(i)/bpc]
	off := (int64(i) % bpc) * m.blockSize
	n := min(m.blockSize, c.rawLen-off)
	return manifestChunk{rawOffset: c.rawOffset + off, rawLen: n, codec: codecNone, object: c.object,
		storedOffset: c.storedOffset + off, storedLen: n, crc: m.blocks[i]}
}

type manifestChunk struct {
	rawOffset    int64
	rawLen       int64
	codec        uint8
	object       int
	storedOffset int64
	storedLen    int64
	crc          uint32
}

func (c *manifestChunk) storedEnd() int64 { return c.storedOffset + c.storedLen }

type manifestIndex struct {
	typ    IndexType
	offset int64
	size   int64
	crc    uint32
}

// index returns the entry of type t, if present.
func (m *manifest) index(t IndexType) (manifestIndex, bool) {
	for _, ix := range m.indexes {
		if ix.typ == t {
			return ix, true
		}
	}
	return manifestIndex{}, false
}

// manifestHeaderLen is the part every version starts with: magic,
// version, flags, topic id, partition, segment id, start offset.
const manifestHeaderLen = 50

// encodedLen returns the size of the manifest's encoding.
func (m *manifest) encodedLen() int {
	if m.framed {
		if _, ok := m.index(IndexProducerBatches); ok {
			return manifestHeaderLen + locatorBatchesLen + crcLen
		}
		return manifestHeaderLen + locatorLen + crcLen
	}
	n := manifestFixedLen + 8*len(m.objectSizes) + manifestChunkLen*len(m.chunks) +
		manifestIndexLen*len(m.indexes) + crcLen
	if m.blockSize > 0 {
		n += 4 + 4*len(m.blocks)
	}
	return n
}

// encodeManifest appends the encoding of m to dst. m must be valid (the
// copy builds it so; decodeManifest of the result checks it again in
// tests).
func encodeManifest(dst []byte, m *manifest) []byte {
	start := len(dst)
	dst = append(dst, manifestMagic...)
	version := uint8(manifestV1)
	switch {
	case m.framed:
		version = layoutFramed
	case m.blockSize > 0:
		version = manifestV2
	}
	dst = append(dst, version, 0)
	dst = append(dst, m.topicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.partition))
	dst = append(dst, m.segmentID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.startOffset))
	if m.framed {
		dst = encodeLocator(dst, m)
		return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.logSize))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.chunkSize))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.objectSizes)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.chunks)))
	dst = append(dst, uint8(len(m.indexes)))
	for _, s := range m.objectSizes {
		dst = binary.BigEndian.AppendUint64(dst, uint64(s))
	}
	for i := range m.chunks {
		c := &m.chunks[i]
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.rawOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.rawLen))
		dst = append(dst, c.codec)
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.object))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.storedOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.storedLen))
		dst = binary.BigEndian.AppendUint32(dst, c.crc)
	}
	for _, ix := range m.indexes {
		dst = append(dst, uint8(ix.typ))
		dst = binary.BigEndian.AppendUint64(dst, uint64(ix.offset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(ix.size))
		dst = binary.BigEndian.AppendUint32(dst, ix.crc)
	}
	if m.blockSize > 0 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.blockSize))
		for _, crc := range m.blocks {
			dst = binary.BigEndian.AppendUint32(dst, crc)
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// manifestError is what decodeManifest returns; the caller turns it into a
// *CorruptionError naming the segment and key.
type manifestError struct{ reason string }

func (e *manifestError) Error() string { return "manifest: " + e.reason }

func badManifest(format string, args ...any) error {
	return &manifestError{reason: fmt.Sprintf(format, args...)}
}

// decodeManifest parses a manifest. It never panics and allocates only
// after checking that the counts fit the bytes present. Anything but a
// canonical encoding of a valid manifest is a *manifestError.
func decodeManifest(b []byte) (*manifest, error) {
	if len(b) < manifestFixedLen+crcLen {
		return nil, badManifest("%d bytes is too short", len(b))
	}
	body, sum := b[:len(b)-crcLen], binary.BigEndian.Uint32(b[len(b)-crcLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, badManifest("checksum %08x, stored %08x", got, sum)
	}
	d := decoder{b: body}
	if string(d.take(4)) != manifestMagic {
		return nil, badManifest("bad magic")
	}
	version := d.u8()
	if version != manifestV1 && version != manifestV2 && version != layoutFramed {
		return nil, badManifest("version %d, want %d, %d or %d", version, manifestV1, manifestV2, layoutFramed)
	}
	if f := d.u8(); f != 0 {
		return nil, badManifest("flags %#x", f)
	}
	m := &manifest{}
	copy(m.topicID[:], d.take(16))
	m.partition = int32(d.u32())
	copy(m.segmentID[:], d.take(16))
	if version == layoutFramed {
		return decodeFramedManifest(m, &d)
	}
	start, logSize := d.u64(), d.u64()
	chunkSize := d.u32()
	nObjects, nChunks, nIndexes := d.u32(), d.u32(), d.u8()
	switch {
	case m.partition < 0:
		return nil, badManifest("partition %d", m.partition)
	case start > math.MaxInt64 || logSize > math.MaxInt64:
		return nil, badManifest("start offset %d or log size %d out of range", start, logSize)
	case chunkSize == 0 || chunkSize > MaxChunkBytes:
		return nil, badManifest("chunk size %d", chunkSize)
	}
	m.startOffset, m.logSize, m.chunkSize = int64(start), int64(logSize), int64(chunkSize)
	if want := (logSize + uint64(chunkSize) - 1) / uint64(chunkSize); uint64(nChunks) != want || nChunks > maxChunksPerSegment {
		return nil, badManifest("%d chunks for %d bytes in chunks of %d", nChunks, logSize, chunkSize)
	}
	if nObjects > nChunks || (nChunks > 0) != (nObjects > 0) || nIndexes > numIndexTypes {
		return nil, badManifest("%d objects for %d chunks, %d indexes", nObjects, nChunks, nIndexes)
	}
	rest := uint64(8)*uint64(nObjects) + manifestChunkLen*uint64(nChunks) + manifestIndexLen*uint64(nIndexes)
	var nBlocks int64
	if version == manifestV2 {
		if rest+4 > uint64(len(d.b)) {
			return nil, badManifest("%d bytes of tables, want more than %d", len(d.b), rest+4)
		}
		blockSize := binary.BigEndian.Uint32(d.b[rest:])
		if blockSize == 0 || blockSize >= chunkSize {
			return nil, badManifest("block size %d for chunks of %d", blockSize, chunkSize)
		}
		m.blockSize = int64(blockSize)
		if nBlocks = blockCount(m.logSize, m.chunkSize, m.blockSize); nBlocks > maxBlocksPerSegment {
			return nil, badManifest("%d blocks, more than %d", nBlocks, maxBlocksPerSegment)
		}
		rest += 4 + 4*uint64(nBlocks)
	}
	if rest != uint64(len(d.b)) {
		return nil, badManifest("%d bytes of tables, want %d", len(d.b), rest)
	}
	if err := m.decodeTables(&d, int(nObjects), int(nChunks), int(nIndexes)); err != nil {
		return nil, err
	}
	if m.blockSize > 0 {
		for k := range m.chunks {
			if m.chunks[k].codec != codecNone {
				return nil, badManifest("chunk %d compressed in a manifest with blocks", k)
			}
		}
		d.u32() // the block size, read above
		m.blocks = make([]uint32, nBlocks)
		for i := range m.blocks {
			m.blocks[i] = d.u32()
		}
	}
	if d.bad || len(d.b) != 0 {
		return nil, badManifest("tables do not fill the manifest") // unreachable: lengths checked up front
	}
	return m, nil
}

// decodeFramedManifest reads the rest of a version 3 manifest: the start
// offset and the locator; d holds exactly those bytes.
func decodeFramedManifest(m *manifest, d *decoder) (*manifest, error) {
	n := len(d.b) - 8
	if n != locatorLen && n != locatorBatchesLen {
		return nil, badManifest("version %d of %d bytes, want %d or %d", layoutFramed,
			manifestHeaderLen-8+len(d.b)+crcLen, manifestHeaderLen+locatorLen+crcLen, manifestHeaderLen+locatorBatchesLen+crcLen)
	}
	start := d.u64()
	switch {
	case m.partition < 0:
		return nil, badManifest("partition %d", m.partition)
	case start > math.MaxInt64:
		return nil, badManifest("start offset %d out of range", start)
	}
	m.startOffset = int64(start)
	if err := decodeLocator(m, d.take(n), m.segmentID); err != nil {
		return nil, badManifest("%v", err)
	}
	return m, nil
}

// decodeTables reads and checks the object, chunk and index tables; d
// holds exactly their bytes (checked by the caller).
func (m *manifest) decodeTables(d *decoder, nObjects, nChunks, nIndexes int) error {
	m.objectSizes = make([]int64, nObjects)
	for i := range m.objectSizes {
		m.objectSizes[i] = int64(d.u64())
	}
	m.chunks = make([]manifestChunk, nChunks)
	for k := range m.chunks {
		c := &m.chunks[k]
		rawOffset, rawLen, codec := d.u64(), d.u32(), d.u8()
		object, storedOffset, storedLen, crc := d.u32(), d.u64(), d.u32(), d.u32()
		wantOffset := int64(k) * m.chunkSize
		if rawOffset != uint64(wantOffset) || int64(rawLen) != min(m.chunkSize, m.logSize-wantOffset) {
			return badManifest("chunk %d covers [%d, +%d), want [%d, +%d)", k, rawOffset, rawLen,
				wantOffset, min(m.chunkSize, m.logSize-wantOffset))
		}
		switch {
		case codec == codecNone && storedLen != rawLen,
			codec == codecZstd && (storedLen == 0 || storedLen >= rawLen),
			codec > codecZstd:
			return badManifest("chunk %d: codec %d stores %d bytes for %d", k, codec, storedLen, rawLen)
		}
		// Chunks fill the objects in order, back to back from offset 0.
		wantObject, wantStored := uint64(0), uint64(0)
		if k > 0 {
			prev := &m.chunks[k-1]
			wantObject, wantStored = uint64(prev.object), uint64(prev.storedEnd())
			if object != uint32(wantObject) {
				wantObject, wantStored = wantObject+1, 0
			}
		}
		if uint64(object) != wantObject || storedOffset != wantStored || wantObject >= uint64(nObjects) {
			return badManifest("chunk %d stored at object %d offset %d, want object %d offset %d",
				k, object, storedOffset, wantObject, wantStored)
		}
		*c = manifestChunk{rawOffset: wantOffset, rawLen: int64(rawLen), codec: codec, object: int(object),
			storedOffset: int64(storedOffset), storedLen: int64(storedLen), crc: crc}
	}
	// Every object holds at least one chunk and ends with its last one.
	if nChunks > 0 && m.chunks[nChunks-1].object != nObjects-1 {
		return badManifest("%d objects, chunks use %d", nObjects, m.chunks[nChunks-1].object+1)
	}
	for k := range m.chunks {
		c := &m.chunks[k]
		if k+1 < nChunks && m.chunks[k+1].object == c.object {
			continue
		}
		if got := m.objectSizes[c.object]; got != c.storedEnd() {
			return badManifest("object %d of %d bytes, its chunks end at %d", c.object, got, c.storedEnd())
		}
	}
	return m.decodeIndexes(d, nIndexes)
}

// decodeIndexes reads and checks the index table.
func (m *manifest) decodeIndexes(d *decoder, nIndexes int) error {
	m.indexes = make([]manifestIndex, nIndexes)
	offset := int64(0)
	for i := range m.indexes {
		typ, off, size, crc := IndexType(d.u8()), d.u64(), d.u64(), d.u32()
		if !typ.valid() || (i > 0 && typ <= m.indexes[i-1].typ) {
			return badManifest("index %d has type %d after %d", i, typ, m.prevIndexType(i))
		}
		if off != uint64(offset) || size > maxIndexBytes {
			return badManifest("index %s at [%d, +%d), want offset %d and at most %d bytes", typ, off, size, offset, maxIndexBytes)
		}
		m.indexes[i] = manifestIndex{typ: typ, offset: offset, size: int64(size), crc: crc}
		offset += int64(size)
	}
	for _, t := range requiredIndexTypes {
		if _, ok := m.index(t); !ok {
			return badManifest("no %s index", t)
		}
	}
	return nil
}

func (m *manifest) prevIndexType(i int) IndexType {
	if i == 0 {
		return 0
	}
	return m.indexes[i-1].typ
}

// indexesSize is the size of the "indexes" object.
func (m *manifest) indexesSize() int64 {
	if len(m.indexes) == 0 {
		return 0
	}
	last := m.indexes[len(m.indexes)-1]
	return last.offset + last.size
}
