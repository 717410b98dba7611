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

// A request split over reads at any byte ends only after its Sync: the
// cut of LoseNextAnswer waits for the rest (a pipeline ending in COMMIT
// that arrives in two reads must reach the server whole).
func TestRequestScannerWaitsForTheWholeRequest(t *testing.T) {
	var req []byte
	for _, m := range [][]byte{msg('P', "\x00COMMIT\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00"),
		msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")} {
		req = append(req, m...)
	}
	for split := 1; split < len(req); split++ {
		var r messageScanner
		if r.feed(req[:split], endsRequest) {
			t.Fatalf("split at %d of %d: the request ended early", split, len(req))
		}
		if !r.feed(req[split:], endsRequest) {
			t.Fatalf("split at %d of %d: the request did not end at its Sync", split, len(req))
		}
	}
	var r messageScanner
	if !r.feed(msg('Q', "COMMIT\x00"), endsRequest) {
		t.Fatal("a simple Query is a whole request")
	}
}

// The server's answer ends at its ReadyForQuery, wherever the reads split
// it (the cut of LoseNextAnswer comes after the server finished).
func TestAnswerScannerEndsAtReadyForQuery(t *testing.T) {
	var ans []byte
	for _, m := range [][]byte{msg('2', ""), msg('C', "COMMIT\x00"), msg('Z', "I")} {
		ans = append(ans, m...)
	}
	for split := 1; split < len(ans); split++ {
		var r messageScanner
		if r.feed(ans[:split], endsAnswer) {
			t.Fatalf("split at %d of %d: the answer ended early", split, len(ans))
		}
		if !r.feed(ans[split:], endsAnswer) {
			t.Fatalf("split at %d of %d: the answer did not end at its ReadyForQuery", split, len(ans))
		}
	}
}
