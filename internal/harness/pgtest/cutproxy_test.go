package pgtest

import (
	"encoding/binary"
	"testing"
)

// msg is one protocol message: its type, its length, its payload.
func msg(typ byte, payload string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(payload)))
	return append(b, payload...)
}

// requireEndsOnlyAtEnd feeds the messages split in two at every byte and
// requires the scanner to see them end (a message of a type in ends)
// after the second piece only.
func requireEndsOnlyAtEnd(t *testing.T, ends string, msgs ...[]byte) {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
	}
	for split := 1; split < len(b); split++ {
		var r messageScanner
		if r.feed(b[:split], ends) {
			t.Fatalf("split at %d of %d: ended early", split, len(b))
		}
		if !r.feed(b[split:], ends) {
			t.Fatalf("split at %d of %d: did not end at its last message", split, len(b))
		}
	}
}

// A request split over reads at any byte ends only after its Sync: the
// cut of LoseNextAnswer waits for the rest (a pipeline ending in COMMIT
// that arrives in two reads must reach the server whole).
func TestRequestScannerWaitsForTheWholeRequest(t *testing.T) {
	requireEndsOnlyAtEnd(t, endsRequest, msg('P', "\x00COMMIT\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00"),
		msg('E', "\x00\x00\x00\x00\x00"), msg('S', ""))
	var r messageScanner
	if !r.feed(msg('Q', "COMMIT\x00"), endsRequest) {
		t.Fatal("a simple Query is a whole request")
	}
}

// The server's answer ends at its ReadyForQuery, wherever the reads split
// it (the cut of LoseNextAnswer comes after the server finished).
func TestAnswerScannerEndsAtReadyForQuery(t *testing.T) {
	requireEndsOnlyAtEnd(t, endsAnswer, msg('2', ""), msg('C', "COMMIT\x00"), msg('Z', "I"))
}
