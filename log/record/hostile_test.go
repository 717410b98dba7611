package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// fixup rewrites the Length field and the CRC of a batch after a test
// edits it, so that only the checks after the CRC can catch the edit.
func fixup(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
	return b
}

// iterate decodes every record of buf, which must frame, and returns the
// number of records and the Iter's error. The error must be typed.
func iterate(t testing.TB, it *Iter, buf []byte) (int, error) {
	t.Helper()
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	it.Reset(b)
	n := 0
	for it.Next() {
		r := it.Record()
		for h := r.Headers(); h.Next(); {
		}
		n++
	}
	err = it.Err()
	if err != nil {
		var ce *CorruptBatchError
		var se *DecompressedSizeError
		require.True(t, errors.As(err, &ce) || errors.As(err, &se), "untyped error %T: %v", err, err)
	}
	return n, err
}

// TestHostileTruncatedRecords cuts the records section of a batch of each
// codec at every byte, with a fixed-up length and CRC: the batch validates
// but the Iter must fail, typed, without panicking.
func TestHostileTruncatedRecords(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.Compression = c
			full := build(t, opts, mixedRecords()[:5]...)
			var it Iter
			step := 1
			if testing.Short() {
				step = 7
			}
			for cut := HeaderSize; cut < len(full); cut += step {
				buf := fixup(append([]byte{}, full[:cut]...))
				b, err := ReadBatch(buf)
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				_, err = iterate(t, &it, buf)
				require.Error(t, err, "cut at %d of %d", cut, len(full))
				// And the unfixed prefix is a torn tail.
				_, err = ReadBatch(full[:cut])
				require.ErrorIs(t, err, ErrTornTail)
			}
		})
	}
}

// TestHostileBitFlips flips random bits after the CRC field and fixes the
// CRC: decoding may succeed or fail, but never panics and fails typed.
func TestHostileBitFlips(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rounds := 400
	if testing.Short() {
		rounds = 50
	}
	for _, c := range allCodecs {
		opts := DefaultBuilderOptions()
		opts.Compression = c
		full := build(t, opts, append(mixedRecords()[:5], numbered(20, 0)...)...)
		it := NewIter(IterOptions{MaxDecompressedBytes: 1 << 20})
		for i := 0; i < rounds; i++ {
			buf := append([]byte{}, full...)
			for f := 0; f <= rng.IntN(3); f++ {
				p := offAttributes + rng.IntN(len(buf)-offAttributes)
				buf[p] ^= 1 << rng.IntN(8)
			}
			fixup(buf)
			iterate(t, it, buf) //nolint:errcheck // only typed-ness and no panic matter
		}
	}
}

func TestHostileHugeCounts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		count, delta  int32
		records       []byte
		wantSubstring string
	}{
		{"count-maxint", math.MaxInt32, math.MaxInt32, rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(0)), "cannot fit"},
		{"key-maxint", 1, 0, rawRecord([]byte{0}, v(0), v(0), v(math.MaxInt32), v(-1), v(0)), "malformed key"},
		{"headers-maxint", 1, 0, rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(math.MaxInt32)), "header count"},
		{"length-maxint", 1, 0, append(v(math.MaxInt32), make([]byte, 10)...), "length out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var it Iter
			batch := rawBatch(tc.records, tc.count, tc.delta)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := iterate(t, &it, batch)
			runtime.ReadMemStats(&after)
			require.ErrorContains(t, err, tc.wantSubstring)
			// Nothing is sized by a hostile count or length: only the
			// error allocates.
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10))
		})
	}
	t.Run("declared-batch-length-maxint", func(t *testing.T) {
		buf := build(t, DefaultBuilderOptions(), numbered(1, 0)...)
		binary.BigEndian.PutUint32(buf[offLength:], math.MaxInt32)
		_, err := ReadBatch(buf)
		var te *TornTailError
		require.ErrorAs(t, err, &te)
		require.Equal(t, MaxBatchSize, te.Declared)
	})
}

// TestHostileZipBomb compresses far more than the limit: every codec must
// stop at the limit with a *DecompressedSizeError, without growing its
// buffer past it.
func TestHostileZipBomb(t *testing.T) {
	const limit = 1 << 20
	value := make([]byte, 8<<20) // compresses to almost nothing
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.BaseOffset = 77
			opts.Compression = c
			buf := build(t, opts, rec{Value: value})
			if c != CompressionNone {
				require.Less(t, len(buf), len(value)/10, "the bomb must be small")
			}
			it := NewIter(IterOptions{MaxDecompressedBytes: limit})
			_, err := iterate(t, it, buf)
			var se *DecompressedSizeError
			require.ErrorAs(t, err, &se)
			require.ErrorIs(t, err, ErrDecompressedTooLarge)
			require.False(t, errors.Is(err, ErrCorruption))
			require.Equal(t, int64(77), se.BaseOffset)
			require.Equal(t, c, se.Compression)
			require.Equal(t, limit, se.Limit)
			require.LessOrEqual(t, cap(it.dec.buf), limit+256<<10)

			// The same batch decodes under the default limit.
			n, err := iterate(t, &Iter{}, buf)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		})
	}
	t.Run("zstd-without-content-size", func(t *testing.T) {
		// A streamed zstd frame does not declare its size up front; the
		// decoder must still stop at the limit.
		var zb bytes.Buffer
		w, err := zstd.NewWriter(&zb)
		require.NoError(t, err)
		raw := rawRecord([]byte{0}, v(0), v(0), v(-1), v(int32(len(value))), value, v(0))
		for i := 0; i < 4; i++ {
			_, err = w.Write(raw)
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		batch := rawBatch(zb.Bytes(), 4, 3)
		batch[offAttributes+1] |= byte(CompressionZstd)
		fixup(batch)
		it := NewIter(IterOptions{MaxDecompressedBytes: limit})
		_, err = iterate(t, it, batch)
		require.ErrorIs(t, err, ErrDecompressedTooLarge)
		require.LessOrEqual(t, cap(it.dec.buf), 2*limit)
	})
	t.Run("snappy-declared-length", func(t *testing.T) {
		// A raw snappy block whose header claims 2 GiB: refused before
		// any allocation.
		block := binary.AppendUvarint(nil, 2<<30)
		batch := rawBatch(append(block, 0), 1, 0)
		batch[offAttributes+1] |= byte(CompressionSnappy)
		fixup(batch)
		_, err := iterate(t, NewIter(IterOptions{MaxDecompressedBytes: limit}), batch)
		require.ErrorIs(t, err, ErrDecompressedTooLarge)
	})
}

func TestHostileCodecGarbage(t *testing.T) {
	garbage := [][]byte{
		nil,
		{0},
		[]byte("definitely not compressed data at all"),
		append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff),
		append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xff),
		append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0),
		{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff},       // gzip header, no body
		{0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7, 1}, // lz4 frame header, cut
		{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58},          // zstd magic, cut
	}
	for _, c := range allCodecs[1:] {
		for _, g := range garbage {
			batch := rawBatch(g, 1, 0)
			batch[offAttributes+1] |= byte(c)
			fixup(batch)
			_, err := iterate(t, &Iter{}, batch)
			require.ErrorIs(t, err, ErrCorruption, "%s %x", c, g)
		}
	}
	// The public Decompressor reports the same errors, without an offset.
	d := NewDecompressor(0)
	_, err := d.Decompress(CompressionGzip, []byte("junk"))
	var ce *CorruptBatchError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(-1), ce.BaseOffset)
	_, err = d.Decompress(Compression(6), []byte("junk"))
	require.ErrorIs(t, err, ErrCorruption)
}
