package pebblecp

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// sampleUnboundBatch is a batch row as written before bindings, and
// oldBatchValue its value as that code encoded it (pinned: rows already
// stored must keep decoding).
var (
	sampleUnboundBatch = batchRow{BaseOffset: 10, ObjectKey: "wal/abc", ByteOffset: 3, Size: 70,
		MaxTimestamp: 1000, LogAppendTime: 2000, TimestampType: wal.LogAppendTime}
	oldBatchValue = "0102000000000000000a0000000000000003000000000000004600000000000003e800000000000007d001000777616c2f6162637eef8f2c"

	sampleBoundBatch = batchRow{BaseOffset: 10, ObjectKey: "wal/abc", ByteOffset: 3, Size: 70,
		MaxTimestamp: 1000, LogAppendTime: 2000, TimestampType: wal.LogAppendTime,
		Binding: wal.BatchBinding{Known: true, CRC: 0xfedcba98, PartitionLeaderEpoch: -1,
			ProducerID: 0x0102030405060708, ProducerEpoch: -2, BaseSequence: 0x7ffffffe}}
)

// A batch row written before bindings decodes with an unknown binding; a
// row with one decodes to exactly its fields; the two kinds are what
// encodeBatch writes for an unknown and a known binding.
func TestCodecBatchBinding(t *testing.T) {
	old, err := hex.DecodeString(oldBatchValue)
	require.NoError(t, err)
	got, err := decodeBatch([]byte("k"), old)
	require.NoError(t, err)
	require.Equal(t, sampleUnboundBatch, got)
	require.False(t, got.Binding.Known)
	require.Equal(t, old, encodeBatch(&sampleUnboundBatch))

	v := encodeBatch(&sampleBoundBatch)
	require.Equal(t, byte(kindBoundBatch), v[1])
	got, err = decodeBatch([]byte("k"), v)
	require.NoError(t, err)
	require.Equal(t, sampleBoundBatch, got)
	// The binding is the value's tail before the CRC: kind 2's fields,
	// then 22 bytes.
	require.Equal(t, len(old)+22, len(v))
	require.Equal(t, old[2:len(old)-4], v[2:len(old)-4], "kind 2's fields come first")
}

// sampleRunBatch is a run row of two batches of sampleBoundBatch's
// shape.
func sampleRunBatch() *batchRow {
	a := batchInfo(12, &sampleBoundBatch)
	b := a
	b.BaseOffset, b.LastOffset, b.ByteOffset, b.Size = 13, 20, a.ByteOffset+a.Size, 9
	b.Binding.CRC, b.MaxTimestamp = 7, 3000
	head, run, err := wal.JoinRun([]wal.BatchInfo{a, b})
	if err != nil {
		panic(err)
	}
	return rowOf(head, run)
}

// A run row decodes to its fields and run bytes, and SplitRun gives back
// its two batches.
func TestCodecRunBatch(t *testing.T) {
	row := sampleRunBatch()
	v := encodeBatch(row)
	require.Equal(t, byte(kindRunBatch), v[1])
	got, err := decodeBatch([]byte("k"), v)
	require.NoError(t, err)
	require.Equal(t, *row, got)
	batches, err := rowBatches(20, &got)
	require.NoError(t, err)
	require.Len(t, batches, 2)
	require.Equal(t, batchInfo(12, &sampleBoundBatch), batches[0])
	require.Equal(t, [4]int64{13, 20, 73, 9}, [4]int64{batches[1].BaseOffset, batches[1].LastOffset, batches[1].ByteOffset, batches[1].Size})
}

func sampleValues() map[byte][]byte {
	return map[byte][]byte{
		kindLog: encodeLog(&logRow{Topic: "t", LogStartOffset: 5, HighWatermark: 20, DisklessStartOffset: 10,
			CrossTierLogStartOffset: -1, ByteSize: 99}),
		kindBatch:      encodeBatch(&sampleUnboundBatch),
		kindBoundBatch: encodeBatch(&sampleBoundBatch),
		kindRunBatch:   encodeBatch(sampleRunBatch()),
		kindProducer: encodeProducer(&wal.ProducerState{ProducerID: 7, ProducerEpoch: 2,
			Batches: []wal.ProducerBatch{{BaseSequence: 0, LastSequence: 9, AssignedOffset: 100, Timestamp: 5},
				{BaseSequence: 10, LastSequence: 19, AssignedOffset: 110, Timestamp: 6}}}),
		kindFile: encodeFile(&fileRow{State: fileUploaded, Reason: reasonProduce, BrokerID: 3, Size: 500,
			CommittedAt: 1, LiveBatches: 2, Results: []storedResult{{Status: wal.BatchAccepted, BaseOffset: 4},
				{Status: wal.BatchDuplicate, BaseOffset: 1, Detail: "dup"}}}),
		kindReservation: encodeReservation(12345),
	}
}

// decodeAny decodes v as a value of kind and re-encodes it.
func decodeAny(kind byte, v []byte) ([]byte, error) {
	key := []byte("k")
	switch kind {
	case kindLog:
		r, err := decodeLog(key, v)
		if err != nil {
			return nil, err
		}
		return encodeLog(&r), nil
	case kindBatch, kindBoundBatch, kindRunBatch:
		r, err := decodeBatch(key, v)
		if err != nil {
			return nil, err
		}
		return encodeBatch(&r), nil
	case kindProducer:
		r, err := decodeProducer(key, v)
		if err != nil {
			return nil, err
		}
		return encodeProducer(&r), nil
	case kindFile:
		r, err := decodeFile(key, v)
		if err != nil {
			return nil, err
		}
		return encodeFile(&r), nil
	default:
		t, err := decodeReservation(key, v)
		if err != nil {
			return nil, err
		}
		return encodeReservation(t), nil
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for kind, v := range sampleValues() {
		got, err := decodeAny(kind, v)
		require.NoError(t, err, "kind %d", kind)
		require.Equal(t, v, got, "kind %d", kind)
		// Every truncation and every single-bit flip is corruption.
		for n := 0; n < len(v); n++ {
			_, err := decodeAny(kind, v[:n])
			require.ErrorIs(t, err, wal.ErrCorruption, "kind %d cut at %d", kind, n)
		}
		for i := 0; i < len(v)*8; i++ {
			bad := append([]byte(nil), v...)
			bad[i/8] ^= 1 << (i % 8)
			_, err := decodeAny(kind, bad)
			require.ErrorIs(t, err, wal.ErrCorruption, "kind %d bit %d", kind, i)
		}
		// A value of another kind is refused even with a good CRC.
		other := kindLog
		if kind == kindLog {
			other = kindBatch
		}
		_, err = decodeAny(byte(other), v)
		require.ErrorIs(t, err, wal.ErrCorruption)
	}
}

// FuzzDecode feeds hostile bytes to every value decoder: never a panic,
// only *CorruptionError, and what decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for kind, v := range sampleValues() {
		f.Add(kind, false, v)
		f.Add(kind, true, v)
	}
	f.Fuzz(func(t *testing.T, kind byte, fixCRC bool, v []byte) {
		kind = kind%numKinds + 1
		if fixCRC && len(v) >= 4 {
			// Reach the field decoders: give the hostile body a valid
			// checksum.
			v = binary.BigEndian.AppendUint32(v[:len(v)-4:len(v)-4], crc32.Checksum(v[:len(v)-4], castagnoli))
		}
		got, err := decodeAny(kind, v)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorruption) {
				t.Fatalf("kind %d: error %v is not a *CorruptionError", kind, err)
			}
			return
		}
		if string(got) != string(v) {
			t.Fatalf("kind %d: re-encoding differs:\n%x\n%x", kind, v, got)
		}
	})
}
