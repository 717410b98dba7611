package pebblecp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

var fuzzPlane struct {
	once sync.Once
	cp   *pebblecp.ControlPlane
	n    int
}

// FuzzCommit sends hostile commit requests (any field values, any
// number of batches, reused keys) to one long-lived plane: never a panic;
// the call fails with ErrInvalidArgument or ErrObjectKeyReused, or
// answers one result per batch whose errors are *BatchRejectedError; and
// no partition's W passes its HW or its HW goes back.
func FuzzCommit(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		fuzzPlane.once.Do(func() {
			cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
			if err != nil {
				panic(err)
			}
			if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: wal.TopicID{1}, Topic: "t", NumPartitions: 2}}); err != nil {
				panic(err)
			}
			fuzzPlane.cp = cp
		})
		cp := fuzzPlane.cp
		fuzzPlane.n++
		req, parts := decodeRequest(data, fuzzPlane.n)
		before := map[wal.TopicIDPartition]wal.LogInfo{}
		for _, tp := range parts {
			if info, err := cp.LogInfo(ctx, tp); err == nil {
				before[tp] = info
			}
		}
		res, err := cp.CommitFile(ctx, req)
		if err != nil {
			if !errors.Is(err, wal.ErrInvalidArgument) && !errors.Is(err, wal.ErrObjectKeyReused) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(res.Batches) != len(req.Batches) {
			t.Fatalf("%d results for %d batches", len(res.Batches), len(req.Batches))
		}
		for i, r := range res.Batches {
			var be *wal.BatchRejectedError
			if r.Err != nil && !errors.As(r.Err, &be) {
				t.Fatalf("batch %d: error %v is not a *BatchRejectedError", i, r.Err)
			}
		}
		for tp, b := range before {
			info, err := cp.LogInfo(ctx, tp)
			if err != nil || info.HighWatermark < b.HighWatermark || info.LogStartOffset > info.HighWatermark {
				t.Fatalf("%s: %+v after %+v (%v)", tp, info, b, err)
			}
		}
	})
}

// decodeRequest reads a commit request from hostile bytes: a key choice,
// then batches of 8 int64 fields each.
func decodeRequest(data []byte, n int) (wal.CommitFileRequest, []wal.TopicIDPartition) {
	next := func() int64 {
		if len(data) < 8 {
			v := int64(0)
			for _, b := range data {
				v = v<<8 | int64(b)
			}
			data = nil
			return v
		}
		v := int64(binary.BigEndian.Uint64(data))
		data = data[8:]
		return v
	}
	// Half the inputs keep their raw field values; the other half are
	// shaped into valid byte ranges and small counts, so that they reach
	// offset assignment and the producer checks.
	shaped := next()%2 == 0
	req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("k/%d", n), ObjectSize: next()}
	if req.ObjectSize%3 == 0 {
		req.ObjectKey = "k/reused"
	}
	var parts []wal.TopicIDPartition
	end := int64(0)
	for len(data) > 0 && len(req.Batches) < 8 {
		tp := wal.TopicIDPartition{TopicID: wal.TopicID{byte(next() % 3)}, Partition: int32(next() % 4)}
		parts = append(parts, tp)
		b := wal.CommitBatch{Partition: tp, ByteOffset: next(), Size: next(),
			BaseOffset: next() % 1000, LastOffset: next() % 1000, RecordCount: int32(next()), MaxTimestamp: next(),
			TimestampType: wal.TimestampType(next() % 3), ProducerID: next() % 3, ProducerEpoch: int16(next() % 3),
			BaseSequence: int32(next())}
		if shaped {
			b.ByteOffset, b.Size = end+abs(b.ByteOffset%3), 1+abs(b.Size%40)
			b.BaseOffset = 0
			b.LastOffset = abs(b.LastOffset % 20)
			b.RecordCount = 1 + int32(abs(int64(b.RecordCount))%(b.LastOffset+1))
			b.TimestampType = wal.TimestampType(abs(int64(b.TimestampType)) % 2)
			b.BaseSequence = int32(abs(int64(b.BaseSequence)) % 60)
			if b.ProducerID < 0 {
				b.ProducerEpoch = -1
			}
			end = b.ByteOffset + b.Size
		}
		req.Batches = append(req.Batches, b)
	}
	if shaped {
		req.ObjectSize = end
	}
	return req, parts
}

func abs(v int64) int64 {
	if v < 0 {
		return -(v + 1) // never overflows
	}
	return v
}
