package record

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// scanAll runs a Scanner over buf and returns the base offsets it yielded.
func scanAll(buf []byte, opts ScannerOptions) (*Scanner, []int64) {
	s := NewScanner(buf, opts)
	var offs []int64
	for s.Next() {
		offs = append(offs, s.Batch().BaseOffset())
	}
	return s, offs
}

func offsetsUpTo(k int) []int64 {
	var offs []int64
	for i := 0; i < k; i++ {
		offs = append(offs, int64(i))
	}
	return offs
}

func TestScannerClean(t *testing.T) {
	buf, starts := concat(t, 20)
	s, offs := scanAll(buf, ScannerOptions{})
	require.NoError(t, s.Err())
	require.Equal(t, offsetsUpTo(20), offs)
	require.Equal(t, len(buf), s.ValidBytes())

	s, offs = scanAll(nil, ScannerOptions{})
	require.NoError(t, s.Err())
	require.Empty(t, offs)
	require.Zero(t, s.ValidBytes())

	// Pos and ValidBytes during the scan.
	s = NewScanner(buf, ScannerOptions{StartPos: 1000})
	for i := 0; s.Next(); i++ {
		require.Equal(t, int64(1000+starts[i]), s.Pos())
		require.Equal(t, starts[i]+s.Batch().Size(), s.ValidBytes())
	}
}

// TestTornTail is the batch part of testdata/torn_tail_recovery in
// package log: 20
// single-record batches, garbage from inside batch k to the end. The
// scanner keeps batches 0..k-1 and stops at the start of batch k.
func TestTornTail(t *testing.T) {
	buf, starts := concat(t, 20)
	size := starts[1] // every batch has the same size
	rng := rand.New(rand.NewPCG(2, 0))
	for _, k := range []int{0, 1, 7, 13, 19} {
		t.Run("truncated", func(t *testing.T) {
			// A crash mid-write: the file ends inside batch k.
			for j := 1; j < size; j++ {
				s, offs := scanAll(buf[:starts[k]+j], ScannerOptions{StartPos: 4096})
				require.Equal(t, offsetsUpTo(k), offs, "k=%d j=%d", k, j)
				require.Equal(t, starts[k], s.ValidBytes())
				var te *TornTailError
				require.ErrorAs(t, s.Err(), &te, "k=%d j=%d", k, j)
				require.False(t, errors.Is(s.Err(), ErrCorruption))
				require.Equal(t, int64(4096+starts[k]), te.Pos)
				require.Equal(t, j, te.Available)
			}
		})
		t.Run("overwritten-after-length", func(t *testing.T) {
			// Garbage after the length field: the batch frames but fails
			// its magic or CRC check.
			for _, j := range []int{12, 16, 17, 21, 40, 61, size - 1} {
				c := append([]byte{}, buf...)
				for i := starts[k] + j; i < len(c); i++ {
					c[i] = byte(rng.Uint32())
				}
				c[starts[k]+j] ^= 0x5a // never equal to the original
				s, offs := scanAll(c, ScannerOptions{})
				require.Equal(t, offsetsUpTo(k), offs, "k=%d j=%d", k, j)
				require.Equal(t, starts[k], s.ValidBytes())
				var ce *CorruptBatchError
				require.ErrorAs(t, s.Err(), &ce, "k=%d j=%d", k, j)
				require.Equal(t, int64(starts[k]), ce.Pos)
				require.Equal(t, int64(k), ce.BaseOffset)
				require.False(t, errors.Is(s.Err(), ErrTornTail))
			}
		})
		t.Run("overwritten-from-start", func(t *testing.T) {
			// Garbage over the length field: corruption or torn tail,
			// depending on what length the garbage declares; either way
			// the valid prefix ends at batch k.
			for j := 0; j < 12; j++ {
				for _, fill := range []string{"random", "zero", "ones"} {
					c := append([]byte{}, buf...)
					for i := starts[k] + j; i < len(c); i++ {
						switch fill {
						case "random":
							c[i] = byte(rng.Uint32())
						case "zero":
							c[i] = 0
						case "ones":
							c[i] = 0xff
						}
					}
					s, offs := scanAll(c, ScannerOptions{MaxBatchBytes: 1 << 20})
					require.Equal(t, offsetsUpTo(k), offs, "k=%d j=%d %s", k, j, fill)
					require.Equal(t, starts[k], s.ValidBytes())
					err := s.Err()
					require.True(t, errors.Is(err, ErrCorruption) || errors.Is(err, ErrTornTail), "%v", err)
					if fill != "random" && j < 8 {
						// A zero or negative length is always corruption.
						require.ErrorIs(t, err, ErrCorruption)
					}
				}
			}
		})
	}
}

func TestScannerMaxBatchBytes(t *testing.T) {
	buf, starts := concat(t, 3)
	size := starts[1]

	// A declared size above the limit is corruption even though it also
	// runs past the end of the input.
	c := append([]byte{}, buf...)
	binary.BigEndian.PutUint32(c[starts[2]+8:], 1<<30)
	s, offs := scanAll(c, ScannerOptions{MaxBatchBytes: 1 << 20})
	require.Equal(t, offsetsUpTo(2), offs)
	var ce *CorruptBatchError
	require.ErrorAs(t, s.Err(), &ce)
	require.Contains(t, ce.Reason, "maximum batch size")
	require.Equal(t, starts[2], s.ValidBytes())

	// Without a limit it is a torn tail.
	s, _ = scanAll(c, ScannerOptions{})
	require.ErrorIs(t, s.Err(), ErrTornTail)

	// A batch exactly at the limit passes; one byte less fails.
	s, offs = scanAll(buf, ScannerOptions{MaxBatchBytes: size})
	require.NoError(t, s.Err())
	require.Len(t, offs, 3)
	s, offs = scanAll(buf, ScannerOptions{MaxBatchBytes: size - 1})
	require.ErrorIs(t, s.Err(), ErrCorruption)
	require.Empty(t, offs)
}
