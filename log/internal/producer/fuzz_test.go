package producer

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeSnapshot: DecodeSnapshot never panics; what it accepts
// re-encodes to the same bytes; what it refuses is corruption; and a
// Manager loading it either changes nothing (error) or snapshots back to
// a decodable state.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(EncodeSnapshot(nil, nil))
	f.Add(EncodeSnapshot(nil, []SnapshotEntry{{ProducerID: 1, ProducerEpoch: 2, LastSequence: 4, LastOffset: 4,
		OffsetDelta: 1, Timestamp: 110, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeSnapshot(data)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if again := EncodeSnapshot(nil, entries); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
		m := NewManager(Options{})
		if err := m.LoadSnapshot(data, 42); err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("load error %v is not corruption", err)
			}
			if m.MapEndOffset() != 0 || m.ProducerCount() != 0 {
				t.Fatal("a failed load changed the state")
			}
			return
		}
		if _, err := DecodeSnapshot(m.Snapshot(nil)); err != nil {
			t.Fatalf("snapshot of a loaded state does not decode: %v", err)
		}
		if m.ProducerCount() != len(entries) {
			t.Fatalf("%d producers loaded from %d entries", m.ProducerCount(), len(entries))
		}
	})
}
