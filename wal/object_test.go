package wal

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

func testBatch(t testing.TB, records int, pid int64, seq int32, ts int64) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	if pid >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
	}
	b := record.NewBuilder(opts)
	for i := 0; i < records; i++ {
		b.Add(ts+int64(i), nil, []byte(fmt.Sprintf("v%d", i)))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// testObject builds an object from batches of three partitions, added
// interleaved.
func testObject(t testing.TB) ([]byte, []CommitBatch) {
	var o ObjectBuilder
	p := func(id byte, n int32) TopicIDPartition { return TopicIDPartition{TopicID: TopicID{id}, Partition: n} }
	adds := []struct {
		tp  TopicIDPartition
		buf []byte
	}{
		{p(2, 0), testBatch(t, 3, -1, -1, 100)},
		{p(1, 1), testBatch(t, 2, 7, 0, 200)},
		{p(2, 0), testBatch(t, 1, -1, -1, 300)},
		{p(1, 0), testBatch(t, 4, -1, -1, 400)},
		{p(1, 1), testBatch(t, 5, 7, 2, 500)},
	}
	for _, a := range adds {
		require.NoError(t, o.Add(a.tp, a.buf))
	}
	return o.Build()
}

func TestObjectRoundTrip(t *testing.T) {
	data, batches := testObject(t)
	// Grouped by (topic id, partition), arrival order within one.
	var got []string
	for _, b := range batches {
		got = append(got, fmt.Sprintf("%s@%d+%d n=%d ts=%d seq=%d", b.Partition, b.ByteOffset, b.Size, b.RecordCount, b.MaxTimestamp, b.BaseSequence))
	}
	require.Len(t, got, 5)
	require.Equal(t, []int64{1, 1, 1, 2, 2}, []int64{int64(batches[0].Partition.TopicID[0]),
		int64(batches[1].Partition.TopicID[0]), int64(batches[2].Partition.TopicID[0]),
		int64(batches[3].Partition.TopicID[0]), int64(batches[4].Partition.TopicID[0])})
	require.Equal(t, int32(0), batches[0].Partition.Partition)
	require.Equal(t, []int64{201, 504}, []int64{batches[1].MaxTimestamp, batches[2].MaxTimestamp}, "arrival order in a partition")
	require.Equal(t, []int64{102, 300}, []int64{batches[3].MaxTimestamp, batches[4].MaxTimestamp})

	req := CommitFileRequest{ObjectKey: NewObjectKey("wal"), ObjectSize: int64(len(data)), Batches: batches}
	require.NoError(t, req.Validate())
	parsed, err := ParseObject(data)
	require.NoError(t, err)
	require.Equal(t, batches, parsed, "the coordinates are rebuilt from the bytes alone")
	// Each coordinate frames its batch exactly.
	for _, b := range parsed {
		rb, err := record.ReadBatch(data[b.ByteOffset : b.ByteOffset+b.Size])
		require.NoError(t, err)
		require.NoError(t, rb.Validate())
	}
}

func TestObjectEmpty(t *testing.T) {
	var o ObjectBuilder
	data, batches := o.Build()
	require.Empty(t, batches)
	require.Len(t, data, trailerSize)
	parsed, err := ParseObject(data)
	require.NoError(t, err)
	require.Empty(t, parsed)
}

func TestObjectBuilderRefusesBadBatches(t *testing.T) {
	var o ObjectBuilder
	good := testBatch(t, 2, -1, -1, 0)
	require.ErrorIs(t, o.Add(TopicIDPartition{}, good[:20]), ErrInvalidArgument)
	require.ErrorIs(t, o.Add(TopicIDPartition{}, append(good, 0)), ErrInvalidArgument)
	require.Equal(t, int64(0), o.Len())
}

func TestObjectKey(t *testing.T) {
	a, b := NewObjectKey("wal/p"), NewObjectKey("wal/p")
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "wal/p/"))
	require.Len(t, a, len("wal/p/")+22)
	require.Len(t, NewObjectKey(""), 22)
}

// Every truncation and every flipped bit of an object is corruption.
func TestObjectDamage(t *testing.T) {
	data, _ := testObject(t)
	for n := 0; n < len(data); n++ {
		_, err := ParseObject(data[:n])
		require.ErrorIs(t, err, ErrCorruption, "cut at %d", n)
	}
	for i := 0; i < len(data)*8; i++ {
		bad := bytes.Clone(data)
		bad[i/8] ^= 1 << (i % 8)
		_, err := ParseObject(bad)
		require.ErrorIs(t, err, ErrCorruption, "bit %d", i)
		var oe *ObjectError
		require.True(t, errors.As(err, &oe))
	}
}

// FuzzParseObject: hostile objects never panic, fail only with an
// *ObjectError, and what parses rebuilds to the same bytes.
func FuzzParseObject(f *testing.F) {
	data, _ := testObject(f)
	f.Add(data)
	var o ObjectBuilder
	empty, _ := o.Build()
	f.Add(empty)
	f.Add([]byte("TLWF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		batches, err := ParseObject(data)
		if err != nil {
			var oe *ObjectError
			if !errors.As(err, &oe) || !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v is not an *ObjectError", err)
			}
			return
		}
		var o ObjectBuilder
		for _, b := range batches {
			if err := o.Add(b.Partition, data[b.ByteOffset:b.ByteOffset+b.Size]); err != nil {
				t.Fatalf("a parsed batch does not frame: %v", err)
			}
		}
		again, rebuilt := o.Build()
		if !bytes.Equal(again, data) {
			t.Fatalf("rebuild differs:\n%x\n%x", data, again)
		}
		if fmt.Sprint(rebuilt) != fmt.Sprint(batches) {
			t.Fatalf("coordinates differ")
		}
		req := CommitFileRequest{ObjectKey: "k", ObjectSize: int64(len(data)), Batches: batches}
		if err := req.Validate(); err != nil {
			t.Fatalf("parsed coordinates do not make a valid commit: %v", err)
		}
	})
}

// TestCRC32Combine: the CRC-32C of A followed by B derived from the two
// CRCs and B's length equals the CRC-32C of the concatenation, for
// lengths from 0 to beyond a batch's maximum.
func TestCRC32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 21, 100, 4095, 16 << 10, 1<<20 + 13} {
		for _, m := range []int{0, 1, 5, 64, 1000, 16<<10 + 1} {
			a, b := make([]byte, m), make([]byte, n)
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			want := crc32.Checksum(append(bytes.Clone(a), b...), objectCRC)
			got := crc32Combine(crc32.Checksum(a, objectCRC), crc32.Checksum(b, objectCRC), int64(n))
			require.Equal(t, want, got, "len(A) %d, len(B) %d", m, n)
		}
	}
}

// TestX8nModP: the byte-table path of x^(8n) agrees with the bit-by-bit
// one, below and above the table's 2^32 range.
func TestX8nModP(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ns := []uint64{0, 1, 255, 256, 16<<10 - 21, 1<<32 - 1, 1 << 32, 1<<40 + 7}
	for range 1000 {
		ns = append(ns, rng.Uint64()>>rng.UintN(64))
	}
	for _, n := range ns {
		require.Equal(t, x2nModP(n, 3), x8nModP(n), "n %d", n)
	}
}

// TestBuildCheckedCRC: an object built from batches whose CRCs were
// checked (the writer's path, which derives the batch area's CRC from
// theirs) is byte for byte the object built from the same batches read
// again; and a batch added unchecked with a wrong CRC still yields an
// object whose batch-area CRC matches its bytes (ParseObject then refuses
// the batch, not the footer).
func TestBuildCheckedCRC(t *testing.T) {
	tpA, tpB := TopicIDPartition{TopicID: TopicID{1}, Partition: 0}, TopicIDPartition{TopicID: TopicID{2}, Partition: 3}
	var checked, plain ObjectBuilder
	for i, tp := range []TopicIDPartition{tpB, tpA, tpB, tpA} {
		raw := testBatch(t, 3+i, -1, 0, int64(1000*i))
		b, err := record.ReadBatch(raw)
		require.NoError(t, err)
		require.NoError(t, b.Validate())
		checked.addChecked(tp, b)
		require.NoError(t, plain.Add(tp, raw))
	}
	got, gotBatches := checked.Build()
	want, wantBatches := plain.Build()
	require.Equal(t, want, got)
	require.Equal(t, wantBatches, gotBatches)
	parsed, err := ParseObject(got)
	require.NoError(t, err)
	require.Equal(t, wantBatches, parsed)

	bad := testBatch(t, 2, -1, 0, 5)
	bad[len(bad)-1] ^= 0xff // the batch's own CRC no longer holds
	var ob ObjectBuilder
	require.NoError(t, ob.Add(tpA, bad))
	obj, _ := ob.Build()
	_, err = ParseObject(obj)
	var oe *ObjectError
	require.ErrorAs(t, err, &oe)
	require.Contains(t, oe.Reason, "batch 0", "the batch is refused, not the footer's CRC: %v", err)
}
