package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// locatorsForTest copies segments in layout version 3 and returns their
// metadata with the locator as custom metadata.
func locatorsForTest(t testing.TB) []SegmentMetadata {
	ctx := context.Background()
	var out []SegmentMetadata
	for _, cfg := range []struct {
		blockSize, size int
		txn, batches    bool
	}{{300, 10_500, true, false}, {0, 700, false, false}, {1, 0, false, false}, {16 << 10, 100_000, true, false},
		{300, 10_500, true, true}, {0, 700, false, true}} {
		s := newTestStorage(t, newMemStore(), StorageOptions{BlockSize: cfg.blockSize})
		c := newTestCopy(storageTopic, 5, 10, cfg.size, cfg.txn)
		if cfg.batches {
			c.data.ProducerBatches = segmentBytes(9, 131)
		}
		custom, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		if cfg.batches {
			require.Len(t, custom, locatorBatchesLen)
		} else {
			require.Len(t, custom, locatorLen)
		}
		c.m.CustomMetadata = custom
		out = append(out, c.m)
	}
	return out
}

// resealLocator recomputes the checksum of a locator after an edit, so
// only its consistency checks (and the reads) can object.
func resealLocator(b []byte, id UUID) []byte {
	body := len(b) - crcLen
	sum := crc32.Update(crc32.Update(0, castagnoli, id[:]), castagnoli, b[:body])
	binary.BigEndian.PutUint32(b[body:], sum)
	return b
}

func TestLocatorCodec(t *testing.T) {
	for _, m := range locatorsForTest(t) {
		b := m.CustomMetadata
		require.LessOrEqual(t, len(b), 128, "Kafka's default remote.log.metadata.custom.metadata.max.bytes")
		man, err := manifestFromLocator(&m)
		require.NoError(t, err)
		require.Equal(t, b, encodeLocator(nil, man))
		checkUnitsTile(t, man)
		for i := range b {
			for bit := range 8 {
				b[i] ^= 1 << bit
				_, err := manifestFromLocator(&m)
				var le *locatorError
				require.ErrorAs(t, err, &le, "byte %d bit %d", i, bit)
				b[i] ^= 1 << bit
			}
		}
		for n := range len(b) {
			short := m
			short.CustomMetadata = b[:n]
			_, err := manifestFromLocator(&short)
			require.Error(t, err, "cut to %d", n)
		}
		// A locator moved onto another segment's metadata.
		other := m
		other.SegmentID = NewSegmentID(storageTopic)
		_, err = manifestFromLocator(&other)
		require.ErrorContains(t, err, "checksum")
	}
}

// TestLocatorRejectsInconsistent: a locator with a valid checksum whose
// fields are out of range or contradict the metadata is refused.
func TestLocatorRejectsInconsistent(t *testing.T) {
	m := locatorsForTest(t)[0] // blocks of 300, a transaction index
	for name, edit := range map[string]func(b []byte){
		"version 2":            func(b []byte) { b[0] = 2 },
		"flags":                func(b []byte) { b[1] = 1 },
		"block size 0":         func(b []byte) { binary.BigEndian.PutUint32(b[2:], 0) },
		"block size too large": func(b []byte) { binary.BigEndian.PutUint32(b[2:], MaxChunkBytes+1) },
		"log size one more":    func(b []byte) { binary.BigEndian.PutUint64(b[6:], uint64(m.SizeBytes+1)) },
		"log size huge":        func(b []byte) { binary.BigEndian.PutUint64(b[6:], 1<<62) },
		"log size negative":    func(b []byte) { binary.BigEndian.PutUint64(b[6:], 1<<63) },
		"index too large":      func(b []byte) { binary.BigEndian.PutUint32(b[locatorIndexesPos:], maxIndexBytes+1) },
		"empty index with a checksum": func(b []byte) {
			binary.BigEndian.PutUint32(b[locatorIndexesPos+8:], 0)
		},
		"no transaction index, the metadata has one": func(b []byte) {
			clear(b[locatorIndexesPos+3*8 : locatorIndexesPos+4*8])
		},
	} {
		t.Run(name, func(t *testing.T) {
			bad := m
			bad.CustomMetadata = slices.Clone(m.CustomMetadata)
			edit(bad.CustomMetadata)
			resealLocator(bad.CustomMetadata, m.SegmentID.ID)
			_, err := manifestFromLocator(&bad)
			var le *locatorError
			require.ErrorAs(t, err, &le)
		})
	}
	// With the producer batches entry.
	mb := locatorsForTest(t)[4]
	require.Len(t, mb.CustomMetadata, locatorBatchesLen)
	for name, edit := range map[string]func(b []byte) []byte{
		"flags 0":             func(b []byte) []byte { b[1] = 0; return b },
		"flags 3":             func(b []byte) []byte { b[1] = 3; return b },
		"empty batches index": func(b []byte) []byte { clear(b[locatorBodyLen : locatorBodyLen+8]); return b },
		"batches index too large": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[locatorBodyLen:], maxIndexBytes+1)
			return b
		},
		"flag without the entry": func(b []byte) []byte { return append(b[:locatorBodyLen], 0, 0, 0, 0) },
		"entry without the flag": func(b []byte) []byte {
			b = append(slices.Clone(m.CustomMetadata[:locatorBodyLen]), 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			bad := mb
			bad.CustomMetadata = edit(slices.Clone(mb.CustomMetadata))
			resealLocator(bad.CustomMetadata, mb.SegmentID.ID)
			_, err := manifestFromLocator(&bad)
			var le *locatorError
			require.ErrorAs(t, err, &le)
		})
	}
}

// TestLocatorThatLies: locators that decode but describe other bytes than
// the objects hold (another block size, index sizes that add up to more
// or less than the indexes object) fail the reads with a
// *CorruptionError, never with wrong bytes or a panic.
func TestLocatorThatLies(t *testing.T) {
	ctx := context.Background()
	for _, storeName := range []string{"mem", "fs"} {
		t.Run(storeName, func(t *testing.T) {
			store := objstore.Store(newMemStore())
			if storeName == "fs" {
				store = newFSStore(t)
			}
			s := newTestStorage(t, store, StorageOptions{BlockSize: 1000, ManifestCacheEntries: -1})
			c := newTestCopy(storageTopic, 6, 0, 10_500, true)
			c.data.ProducerBatches = segmentBytes(8, 131)
			custom, err := s.CopySegment(ctx, &c.m, c.data)
			require.NoError(t, err)
			keys, err := s.keysFor(&c.m)
			require.NoError(t, err)
			lie := func(edit func(b []byte)) *SegmentMetadata {
				m := c.m
				m.CustomMetadata = slices.Clone(custom)
				edit(m.CustomMetadata)
				resealLocator(m.CustomMetadata, m.SegmentID.ID)
				return &m
			}
			for _, bs := range []uint32{999, 1001, 500, 2000, 20_000} {
				m := lie(func(b []byte) { binary.BigEndian.PutUint32(b[2:], bs) })
				for _, r := range [][2]int64{{0, 10}, {5000, 100}, {10_400, -1}, {0, -1}} {
					_, err := fetchAll(ctx, s, m, r[0], r[1])
					requireCorrupt(t, err, keys.data(0))
				}
			}
			types := append(locatorIndexTypes[:], IndexProducerBatches)
			for i, t0 := range types {
				for _, delta := range []int32{-1, 1} {
					m := lie(func(b []byte) {
						p := b[locatorIndexesPos+8*i:]
						binary.BigEndian.PutUint32(p, uint32(int32(binary.BigEndian.Uint32(p))+delta))
					})
					_, err := s.FetchIndex(ctx, m, t0)
					requireCorrupt(t, err, keys.indexes())
				}
			}
			// The truth reads.
			m := c.m
			m.CustomMetadata = custom
			got, err := fetchAll(ctx, s, &m, 0, -1)
			require.NoError(t, err)
			require.Equal(t, c.src, got)
		})
	}
}

// FuzzDecodeLocator: the decoder never panics; whatever it accepts
// re-encodes to exactly the input, within the bounds the reader relies
// on, and its blocks tile the log and the data object.
func FuzzDecodeLocator(f *testing.F) {
	id := storageTopic
	seg := SegmentID{TopicIDPartition: id, ID: UUID{7}}
	for _, m := range locatorsForTest(f) {
		man, err := manifestFromLocator(&m)
		require.NoError(f, err)
		man.segmentID = seg.ID
		f.Add(encodeLocator(nil, man))
	}
	f.Add([]byte{})
	f.Add(make([]byte, locatorLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &manifest{segmentID: seg.ID}
		if err := decodeLocator(m, b, seg.ID); err != nil {
			var le *locatorError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *locatorError", err)
			}
			return
		}
		if again := encodeLocator(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
		if m.blockSize < 1 || m.blockSize > MaxChunkBytes || m.logSize < 0 || m.logSize > maxFramedLogBytes {
			t.Fatalf("block size %d, log size %d out of range", m.blockSize, m.logSize)
		}
		for _, ix := range m.indexes {
			if ix.size < 0 || ix.size > maxIndexBytes {
				t.Fatalf("index %+v out of range", ix)
			}
		}
		checkUnitsTile(t, m)
	})
}

// TestFramedReaderAtAnyOrder: the data object reads the same whatever the
// order and size of the reads (front to back, random pieces, parallel
// parts that start inside blocks), and every trailer is its block's
// checksum; only bytes not read in order within their block are read
// twice.
func TestFramedReaderAtAnyOrder(t *testing.T) {
	const size, bs = 100_003, 1000
	src := segmentBytes(3, size)
	id := UUID{9}
	want := make([]byte, 0, framedObjectSize(size, bs))
	for i := int64(0); i*bs < size; i++ {
		block := src[i*bs : min((i+1)*bs, size)]
		want = append(want, block...)
		want = binary.BigEndian.AppendUint32(want, crc32.Update(blockSeed(id, i), castagnoli, block))
	}
	require.EqualValues(t, len(want), framedObjectSize(size, bs))

	// Both ways of reading the source: one ReadAt and a spread in place,
	// and a vectored read straight into place.
	for _, vectored := range []bool{false, true} {
		source := func() io.ReaderAt {
			if vectored {
				return &vecReader{r: bytes.NewReader(src)}
			}
			return bytes.NewReader(src)
		}
		t.Run(fmt.Sprintf("vectored=%t", vectored), func(t *testing.T) {
			testFramedReaderAt(t, source, want, id, size, bs)
		})
	}
	// A log shorter than its size fails the read, never a short trailer.
	for _, short := range []io.ReaderAt{bytes.NewReader(src[:size-10]), &vecReader{r: bytes.NewReader(src[:size-10])}} {
		fr := newFramedReaderAt(short, id, size, bs)
		_, err := io.ReadAll(io.NewSectionReader(fr, 0, fr.size))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
}

// vecReader is a VectorReaderAt over r that counts its calls (from
// parallel parts too).
type vecReader struct {
	r            io.ReaderAt
	calls, plain atomic.Int64
}

func (v *vecReader) ReadAt(p []byte, off int64) (int, error) {
	v.plain.Add(1)
	return v.r.ReadAt(p, off)
}

// callCounter counts the ReadAt calls made through it.
type callCounter struct {
	r io.ReaderAt
	n int
}

func (c *callCounter) ReadAt(p []byte, off int64) (int, error) {
	c.n++
	return c.r.ReadAt(p, off)
}

func (v *vecReader) ReadvAt(bufs [][]byte, off int64) (int, error) {
	v.calls.Add(1)
	n := 0
	for _, b := range bufs {
		m, err := v.r.ReadAt(b, off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func testFramedReaderAt(t *testing.T, source func() io.ReaderAt, want []byte, id UUID, size, bs int64) {
	seq := newFramedReaderAt(source(), id, size, bs)
	reads := &callCounter{r: seq}
	got, err := io.ReadAll(io.NewSectionReader(reads, 0, seq.size))
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, seq.reread, "a front-to-back read checksums every byte once")
	if v, ok := seq.r.(*vecReader); ok {
		require.Zero(t, v.plain.Load(), "no ReadAt of a vectored source")
		require.LessOrEqual(t, v.calls.Load(), int64(reads.n), "at most one vectored read per ReadAt")
		require.Positive(t, v.calls.Load())
	}

	rng := rand.New(rand.NewPCG(4, 5))
	for range 20 {
		fr := newFramedReaderAt(source(), id, size, bs)
		out := make([]byte, fr.size)
		// Parts of a random size, read concurrently, each front to back
		// in random pieces.
		part := 500 + rng.Int64N(20_000)
		var wg sync.WaitGroup
		var errs [256]error
		for p, off := 0, int64(0); off < fr.size; p, off = p+1, off+part {
			end := min(off+part, fr.size)
			piece := 1 + rng.Int64N(3000)
			wg.Go(func() {
				for at := off; at < end; at += piece {
					n := min(piece, end-at)
					if _, err := fr.ReadAt(out[at:at+n], at); err != nil && errs[p%256] == nil {
						errs[p%256] = err
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs[:]...))
		require.Equal(t, want, out, "parts of %d bytes", part)
		require.LessOrEqual(t, fr.reread, (fr.size/part+1)*bs, "at most a block per part is read twice")
	}

	// A read past the end is io.EOF after the bytes there are.
	n, err := seq.ReadAt(make([]byte, 10), seq.size-4)
	require.Equal(t, 4, n)
	require.ErrorIs(t, err, io.EOF)
}

// TestStorageFramedMultipart: a segment larger than a multipart part
// uploads through parallel parts that start inside blocks; the object is
// the framed layout, read back whole and in ranges.
func TestStorageFramedMultipart(t *testing.T) {
	ctx := context.Background()
	store := newMemStore() // parts of 5 MiB, four at a time
	s := newTestStorage(t, store, StorageOptions{})
	c := newTestCopy(storageTopic, 8, 0, 12<<20+5, false)
	custom, err := s.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)
	c.m.CustomMetadata = custom
	mt := s.Metrics()
	require.LessOrEqual(t, mt.ChecksumRereadBytes, int64(3*defaultBlockSize), "a block per part boundary at most")
	keys, err := s.keysFor(&c.m)
	require.NoError(t, err)
	info, err := store.Stat(ctx, keys.data(0))
	require.NoError(t, err)
	require.Equal(t, framedObjectSize(int64(len(c.src)), defaultBlockSize), info.Size)
	cold := newTestStorage(t, store, StorageOptions{ManifestCacheEntries: -1})
	got, err := fetchAll(ctx, cold, &c.m, 0, -1)
	require.NoError(t, err)
	require.True(t, bytes.Equal(c.src, got))
	for _, start := range []int64{5<<20 - 10, 10<<20 + 3, int64(len(c.src)) - 16<<10} {
		got, err := fetchAll(ctx, cold, &c.m, start, 16<<10)
		require.NoError(t, err)
		require.Equal(t, c.src[start:start+16<<10], got)
	}
	require.Zero(t, cold.Metrics().ManifestMisses)
}

// TestBlockSeedIsTheCRCOfIDAndBlock pins blockSeed's table loop to what
// the trailers were defined as: crc32.Update over the 16 id bytes and the
// big-endian block number.
func TestBlockSeedIsTheCRCOfIDAndBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for range 1000 {
		var id UUID
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		block := rng.Int64()
		var b [24]byte
		copy(b[:], id[:])
		binary.BigEndian.PutUint64(b[16:], uint64(block))
		require.Equal(t, crc32.Update(0, castagnoli, b[:]), blockSeed(id, block), "id %x block %d", id, block)
	}
}
