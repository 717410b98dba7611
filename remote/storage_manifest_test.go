package remote

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// manifestsForTest copies segments under several configurations and
// returns their stored manifests.
func manifestsForTest(t testing.TB) [][]byte {
	ctx := context.Background()
	var out [][]byte
	for _, cfg := range []struct {
		opts StorageOptions
		size int
		txn  bool
	}{
		{StorageOptions{ChunkSize: 1000, ChecksumsInManifest: true}, 10_500, false},
		{StorageOptions{ChunkSize: 1000, Compression: true, DataObjectBytes: 2500}, 10_500, true},
		{StorageOptions{ChunkSize: 64, Compression: true, DataObjectBytes: 64}, 700, false},
		{StorageOptions{ChunkSize: 1000, ChecksumsInManifest: true}, 0, true},
		{StorageOptions{ChunkSize: 1, ChecksumsInManifest: true}, 3, false},
		// Version 2: block checksums, the last chunk and its last block short.
		{StorageOptions{ChunkSize: 1000, BlockSize: 300, ChecksumsInManifest: true}, 10_500, false},
		{StorageOptions{ChunkSize: 2, BlockSize: 1, ChecksumsInManifest: true}, 5, true},
		// Version 3: the locator after the header; the last block short,
		// one block, an empty segment.
		{StorageOptions{BlockSize: 300}, 10_500, true},
		{StorageOptions{}, 700, false},
		{StorageOptions{BlockSize: 1}, 0, false},
	} {
		store := newMemStore()
		s := newTestStorage(t, store, cfg.opts)
		c := newTestCopy(storageTopic, 5, 10, cfg.size, cfg.txn)
		_, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		keys, err := s.keysFor(&c.m)
		require.NoError(t, err)
		b, err := objstore.ReadAll(ctx, store, keys.manifest())
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

func TestManifestCodec(t *testing.T) {
	for _, b := range manifestsForTest(t) {
		m, err := decodeManifest(b)
		require.NoError(t, err)
		require.Equal(t, b, encodeManifest(nil, m))
		require.Equal(t, len(b), m.encodedLen())

		// Every flipped bit is caught (CRC-32C catches all of them).
		for i := range b {
			for bit := range 8 {
				b[i] ^= 1 << bit
				_, err := decodeManifest(b)
				require.Error(t, err, "byte %d bit %d", i, bit)
				b[i] ^= 1 << bit
			}
		}
		for n := range len(b) {
			_, err := decodeManifest(b[:n])
			require.Error(t, err, "truncated to %d", n)
		}
	}
}

// TestManifestRejectsInconsistent: manifests with a valid checksum whose
// fields contradict each other are refused, so the reader can trust every
// offset and length it uses.
func TestManifestRejectsInconsistent(t *testing.T) {
	valid, err := decodeManifest(manifestsForTest(t)[1]) // compressed, several objects, txn index
	require.NoError(t, err)
	require.Greater(t, len(valid.objectSizes), 1)
	zstdChunk := slices.IndexFunc(valid.chunks, func(c manifestChunk) bool { return c.codec == codecZstd })
	require.GreaterOrEqual(t, zstdChunk, 0)
	clone := func() *manifest {
		m := *valid
		m.objectSizes = slices.Clone(valid.objectSizes)
		m.chunks = slices.Clone(valid.chunks)
		m.indexes = slices.Clone(valid.indexes)
		return &m
	}
	for name, mutate := range map[string]func(m *manifest){
		"negative partition":          func(m *manifest) { m.partition = -1 },
		"negative log size":           func(m *manifest) { m.logSize = -1 },
		"chunk size 0":                func(m *manifest) { m.chunkSize = 0 },
		"chunk size too large":        func(m *manifest) { m.chunkSize = MaxChunkBytes + 1 },
		"one chunk too few":           func(m *manifest) { m.chunks = m.chunks[:len(m.chunks)-1] },
		"log size beyond the chunks":  func(m *manifest) { m.logSize += m.chunkSize },
		"raw offset":                  func(m *manifest) { m.chunks[1].rawOffset++ },
		"raw length":                  func(m *manifest) { m.chunks[len(m.chunks)-1].rawLen-- },
		"unknown codec":               func(m *manifest) { m.chunks[0].codec = 2 },
		"raw chunk of another size":   func(m *manifest) { i := m.firstChunk(codecNone); m.chunks[i].storedLen-- },
		"zstd chunk not smaller":      func(m *manifest) { m.chunks[zstdChunk].storedLen = m.chunks[zstdChunk].rawLen },
		"zstd chunk empty":            func(m *manifest) { m.chunks[zstdChunk].storedLen = 0 },
		"stored offset gap":           func(m *manifest) { m.chunks[len(m.chunks)-1].storedOffset++ },
		"object skipped":              func(m *manifest) { m.chunks[len(m.chunks)-1].object++ },
		"first chunk not at object 0": func(m *manifest) { m.chunks[0].object = 1 },
		"object size":                 func(m *manifest) { m.objectSizes[0]++ },
		"object without chunks":       func(m *manifest) { m.objectSizes = append(m.objectSizes, 1) },
		"index order":                 func(m *manifest) { m.indexes[0], m.indexes[1] = m.indexes[1], m.indexes[0] },
		"index offset":                func(m *manifest) { m.indexes[1].offset++ },
		"index type":                  func(m *manifest) { m.indexes[0].typ = 0 },
		"index too large":             func(m *manifest) { m.indexes[len(m.indexes)-1].size = maxIndexBytes + 1 },
		"required index missing":      func(m *manifest) { m.indexes = m.indexes[1:] },
		"duplicate index":             func(m *manifest) { m.indexes = append(m.indexes, m.indexes[len(m.indexes)-1]) },
	} {
		t.Run(name, func(t *testing.T) {
			m := clone()
			mutate(m)
			_, err := decodeManifest(encodeManifest(nil, m))
			var me *manifestError
			require.ErrorAs(t, err, &me)
		})
	}
	// Byte-level: magic, version, flags, trailing bytes; resealed.
	b := encodeManifest(nil, valid)
	reseal := func(b []byte) []byte {
		body := b[:len(b)-crcLen]
		return encodeRaw(body)
	}
	for name, mutate := range map[string]func([]byte) []byte{
		"magic":    func(b []byte) []byte { b[0] = 'X'; return b },
		"version":  func(b []byte) []byte { b[4] = 2; return b },
		"flags":    func(b []byte) []byte { b[5] = 1; return b },
		"trailing": func(b []byte) []byte { return append(b[:len(b)-crcLen:len(b)-crcLen], 0, 0, 0, 0, 0) },
	} {
		_, err := decodeManifest(reseal(mutate(slices.Clone(b))))
		require.Error(t, err, name)
	}
}

func (m *manifest) firstChunk(codec uint8) int {
	return slices.IndexFunc(m.chunks, func(c manifestChunk) bool { return c.codec == codec })
}

// encodeRaw appends the manifest checksum to body.
func encodeRaw(body []byte) []byte {
	return append(slices.Clone(body), be32(crc32c(body))...)
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// FuzzDecodeManifest: the decoder never panics; whatever it accepts
// re-encodes to exactly the input, and its chunks tile the log and its
// objects as the reader assumes.
func FuzzDecodeManifest(f *testing.F) {
	for _, b := range manifestsForTest(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			var me *manifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *manifestError", err)
			}
			return
		}
		if again := encodeManifest(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
		checkUnitsTile(t, m)
	})
}

// checkUnitsTile fails t unless the chunks of m tile the log and its
// objects as the reader assumes, and so do the read units (chunks, or
// blocks, with their trailers in version 3).
func checkUnitsTile(t *testing.T, m *manifest) {
	t.Helper()
	var raw int64
	for k, c := range m.chunks {
		if c.rawOffset != raw || c.rawLen <= 0 || c.rawLen > m.chunkSize || m.unitAt(c.rawOffset) != k && m.blockSize == 0 {
			t.Fatalf("chunk %d does not tile the log: %+v", k, c)
		}
		if c.storedEnd() > m.objectSizes[c.object] || c.storedLen > c.rawLen {
			t.Fatalf("chunk %d outside object %d: %+v", k, c.object, c)
		}
		raw += c.rawLen
	}
	if !m.framed && raw != m.logSize {
		t.Fatalf("chunks cover %d of %d bytes", raw, m.logSize)
	}
	if m.numUnits() > 1<<16 {
		return // a fuzzed log size too large to walk
	}
	raw = 0
	stored := int64(0)
	for i := range m.numUnits() {
		u := m.unit(i)
		if u.rawOffset != raw || u.rawLen <= 0 || u.storedLen > m.unitBytes() || m.unitAt(u.rawOffset) != i ||
			u.storedEnd() > m.objectSizes[u.object] {
			t.Fatalf("unit %d does not tile the log and its objects: %+v", i, u)
		}
		if m.framed && (u.storedOffset != stored || u.storedLen != u.rawLen+trailerLen) {
			t.Fatalf("block %d at stored [%d, +%d), want %d", i, u.storedOffset, u.storedLen, stored)
		}
		raw, stored = raw+u.rawLen, u.storedEnd()
	}
	if raw != m.logSize {
		t.Fatalf("units cover %d of %d bytes", raw, m.logSize)
	}
	if m.framed && m.logSize > 0 && stored != m.objectSizes[0] {
		t.Fatalf("blocks end at %d, object of %d bytes", stored, m.objectSizes[0])
	}
}
