package remote

import (
	"bytes"
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
