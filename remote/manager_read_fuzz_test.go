package remote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log/record"
)

// FuzzBatchStream feeds arbitrary bytes to the remote read's batch framing
// as a segment's data: it must return CRC-valid batches or an error, never
// panic, never a batch past the segment's size, and never loop.
func FuzzBatchStream(f *testing.F) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1, []byte("k"), []byte("v"))
	valid, err := b.Build()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(append(bytes.Clone(valid), valid...))
	f.Add(valid[:20])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		seg := &SegmentMetadata{SizeBytes: int64(len(data)), EndOffset: math.MaxInt64}
		s := newBatchStream(bytes.NewReader(data), seg, 0, base.UndefinedOffset)
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatalf("more batches than bytes")
			}
			before := s.pos
			batch, err := s.next()
			if errors.Is(err, io.EOF) && err == io.EOF {
				return
			}
			if err != nil {
				var bce *BatchCorruptionError
				if !errors.As(err, &bce) || !errors.Is(err, ErrCorruption) || bce.Position != s.pos {
					t.Fatalf("framing error is not a corruption at %d: %v", s.pos, err)
				}
				return
			}
			if err := batch.Validate(); err != nil {
				t.Fatalf("returned an invalid batch: %v", err)
			}
			if s.pos > seg.SizeBytes || s.pos <= before {
				t.Fatalf("position %d after %d, size %d", s.pos, before, seg.SizeBytes)
			}
		}
	})
}

// FuzzBatchVerifier: the copy's verifier, fed the bytes in pieces of the
// fuzzer's choosing, and the remote read's batch stream agree on every
// input: both accept it, or both fail at the same position. So what a
// copy tiers, a read serves, and what a read refuses, a copy refuses.
func FuzzBatchVerifier(f *testing.F) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1, []byte("k"), []byte("v"))
	valid, err := b.Build()
	if err != nil {
		f.Fatal(err)
	}
	second := bytes.Clone(valid)
	binary.BigEndian.PutUint64(second, 1)
	f.Add(append(bytes.Clone(valid), second...), uint8(7))
	f.Add(append(bytes.Clone(valid), valid...), uint8(1))
	f.Add(valid[:20], uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		seg := &SegmentMetadata{SizeBytes: int64(len(data)), EndOffset: 1 << 40}
		s := newBatchStream(bytes.NewReader(data), seg, 0, base.UndefinedOffset)
		streamPos := int64(-1)
		for {
			_, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				streamPos = s.pos
				break
			}
		}
		v := newBatchVerifier(seg)
		n := 1 + int(piece)
		var verr error
		for rest := data; len(rest) > 0 && verr == nil; {
			k := min(n, len(rest))
			verr = v.feed(rest[:k])
			rest = rest[k:]
		}
		if verr == nil {
			verr = v.finish()
		}
		verifierPos := int64(-1)
		if verr != nil {
			var bce *BatchCorruptionError
			if !errors.As(verr, &bce) {
				t.Fatalf("verifier error is not a *BatchCorruptionError: %v", verr)
			}
			verifierPos = bce.Position
		}
		if streamPos != verifierPos {
			t.Fatalf("stream fails at %d, verifier at %d (%v)", streamPos, verifierPos, verr)
		}
	})
}
