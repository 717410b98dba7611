package producer

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// crc32cBitwise is a deliberately naive CRC-32C (Castagnoli, reflected
// polynomial 0x82F63B78), independent of hash/crc32, for the golden tests.
func crc32cBitwise(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

func TestCRC32CBitwiseCheckValue(t *testing.T) {
	// The standard check value of CRC-32C.
	require.Equal(t, uint32(0xE3069283), crc32cBitwise([]byte("123456789")))
}

// TestSnapshotGolden encodes two producers and compares with bytes
// written by hand from the format description.
func TestSnapshotGolden(t *testing.T) {
	entries := []SnapshotEntry{
		{ProducerID: 1, ProducerEpoch: 2, LastSequence: 4, LastOffset: 4, OffsetDelta: 1,
			Timestamp: 110, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 0x0102030405060708, ProducerEpoch: 0x7fff, LastSequence: 0x7fffffff, LastOffset: 0x1000,
			OffsetDelta: 2, Timestamp: -1, CoordinatorEpoch: 9, CurrentTxnFirstOffset: 0xfff},
	}
	body := unhex(t, `
		00000002
		0000000000000001 0002 00000004 0000000000000004 00000001 000000000000006e ffffffff ffffffffffffffff
		0102030405060708 7fff 7fffffff 0000000000001000 00000002 ffffffffffffffff 00000009 0000000000000fff`)
	want := unhex(t, "0001")
	want = binary.BigEndian.AppendUint32(want, crc32cBitwise(body))
	want = append(want, body...)
	require.Equal(t, SnapshotHeaderSize+2*SnapshotEntrySize, len(want))

	got := EncodeSnapshot(nil, entries)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
	decoded, err := DecodeSnapshot(want)
	require.NoError(t, err)
	require.Equal(t, entries, decoded)

	// An empty snapshot: version, CRC of the zero count, count.
	empty := append(unhex(t, "0001"), binary.BigEndian.AppendUint32(nil, crc32cBitwise(unhex(t, "00000000")))...)
	empty = append(empty, 0, 0, 0, 0)
	require.Equal(t, empty, EncodeSnapshot(nil, nil))
}

func TestSnapshotCorruption(t *testing.T) {
	good := EncodeSnapshot(nil, []SnapshotEntry{{ProducerID: 3, LastSequence: -1, LastOffset: -1,
		CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	fixCRC := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[2:], crc32cBitwise(b[6:]))
		return b
	}
	cases := map[string][]byte{
		"empty":      nil,
		"short":      good[:9],
		"version 0":  mutate(func(b []byte) []byte { b[1] = 0; return b }),
		"version 2":  mutate(func(b []byte) []byte { b[1] = 2; return fixCRC(b) }),
		"bad crc":    mutate(func(b []byte) []byte { b[20] ^= 1; return b }),
		"truncated":  mutate(func(b []byte) []byte { return fixCRC(b[:len(b)-1]) }),
		"trailing":   mutate(func(b []byte) []byte { return fixCRC(append(b, 0)) }),
		"count high": mutate(func(b []byte) []byte { b[9] = 2; return fixCRC(b) }),
		"count -1":   mutate(func(b []byte) []byte { copy(b[6:], []byte{0xff, 0xff, 0xff, 0xff}); return fixCRC(b) }),
	}
	for name, data := range cases {
		_, err := DecodeSnapshot(data)
		require.ErrorIs(t, err, ErrCorruption, name)
		m := NewManager(Options{})
		require.ErrorIs(t, m.LoadSnapshot(data, 5), ErrCorruption, name)
		require.Equal(t, int64(0), m.MapEndOffset(), "%s: a failed load changes nothing", name)
	}
	// Two entries for one producer, two transactions at one offset.
	for name, es := range map[string][]SnapshotEntry{
		"repeated producer": {{ProducerID: 1, LastOffset: -1, CurrentTxnFirstOffset: -1}, {ProducerID: 1, LastOffset: -1, CurrentTxnFirstOffset: -1}},
		"shared txn start":  {{ProducerID: 1, LastOffset: 3, CurrentTxnFirstOffset: 3}, {ProducerID: 2, LastOffset: 3, CurrentTxnFirstOffset: 3}},
		"no producer id":    {{ProducerID: -1, LastOffset: -1, CurrentTxnFirstOffset: -1}},
	} {
		m := NewManager(Options{})
		require.ErrorIs(t, m.LoadSnapshot(EncodeSnapshot(nil, es), 5), ErrCorruption, name)
	}
}

// TestAbortedTxnGolden checks the 34-byte .txnindex entry.
func TestAbortedTxnGolden(t *testing.T) {
	a := AbortedTxn{ProducerID: 0x0a0b0c0d0e0f1011, FirstOffset: 5, LastOffset: 11, LastStableOffset: 12}
	want := unhex(t, "0000 0a0b0c0d0e0f1011 0000000000000005 000000000000000b 000000000000000c")
	require.Len(t, want, AbortedTxnSize)
	require.Equal(t, want, AppendAbortedTxn(nil, a))
	got, err := DecodeAbortedTxn(want)
	require.NoError(t, err)
	require.Equal(t, a, got)
}

func TestTxnIndex(t *testing.T) {
	var ti TxnIndex
	entries := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 3, LastOffset: 12, LastStableOffset: 5},
		{ProducerID: 2, FirstOffset: 5, LastOffset: 15, LastStableOffset: 16},
		{ProducerID: 3, FirstOffset: 20, LastOffset: 25, LastStableOffset: 26},
	}
	for _, e := range entries {
		require.NoError(t, ti.Append(e))
	}
	require.ErrorIs(t, ti.Append(AbortedTxn{FirstOffset: 1, LastOffset: 25}), ErrInvalidArgument)
	require.ErrorIs(t, ti.Append(AbortedTxn{FirstOffset: 31, LastOffset: 30}), ErrInvalidArgument)

	got, complete := ti.CollectAborted(nil, 13, 16)
	require.Equal(t, entries[1:2], got)
	require.True(t, complete, "entry 2's LSO 16 reaches the bound")
	got, complete = ti.CollectAborted(nil, 0, 30)
	require.Equal(t, entries, got)
	require.False(t, complete)
	got, _ = ti.CollectAborted(nil, 0, 3)
	require.Empty(t, got, "first offset must be below the upper bound")

	file := ti.AppendEncoded(nil, 0)
	require.Len(t, file, 3*AbortedTxnSize)
	require.Equal(t, file[AbortedTxnSize:], ti.AppendEncoded(nil, 1))
	parsed, err := ParseTxnIndex(file, 10)
	require.NoError(t, err)
	require.Equal(t, entries, parsed.Entries())

	for name, data := range map[string][]byte{
		"partial entry":    file[:AbortedTxnSize+1],
		"version 1":        append(append([]byte{0, 1}, file[2:AbortedTxnSize]...), file[AbortedTxnSize:]...),
		"below base":       nil,
		"not increasing":   append(append([]byte(nil), file[AbortedTxnSize:2*AbortedTxnSize]...), file[:AbortedTxnSize]...),
		"first above last": AppendAbortedTxn(nil, AbortedTxn{FirstOffset: 20, LastOffset: 19}),
	} {
		base := int64(10)
		if name == "below base" {
			data, base = file, 13
		}
		_, err := ParseTxnIndex(data, base)
		require.ErrorIs(t, err, ErrCorruption, name)
		require.False(t, errors.Is(err, ErrInvalidArgument), name)
	}

	require.Equal(t, 2, ti.TruncateTo(15))
	require.Equal(t, entries[:1], ti.Entries())
	require.Equal(t, 0, ti.TruncateTo(13))
	require.Equal(t, 1, ti.TruncateTo(12))
	require.Zero(t, ti.Len())
}
