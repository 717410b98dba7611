package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

// testBatch builds a client batch (base offset 0) of n records whose
// values are prefix-0, prefix-1, ...
func testBatch(t testing.TB, n int, prefix string) []byte {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(int64(1000+i), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

func buildTestObject(t testing.TB) []byte {
	t.Helper()
	var ob objectBuilder
	for i, n := range []int{3, 1, 5} {
		b, err := record.ReadBatch(testBatch(t, n, fmt.Sprint("p", i)))
		require.NoError(t, err)
		ob.add(TopicIDPartition{TopicID: TopicID{byte(i + 1)}, Partition: int32(i)}, b)
	}
	return ob.finish()
}

func TestObjectRoundTrip(t *testing.T) {
	obj := buildTestObject(t)
	f, err := CheckObject(obj)
	require.NoError(t, err)
	require.Len(t, f.Entries, 3)
	require.Equal(t, int64(len(obj)-objectTrailerSize-3*footerEntryBytes), f.DataBytes)
	require.Equal(t, int64(0), f.Entries[0].ByteOffset)
	require.Equal(t, f.Entries[0].Size, f.Entries[1].ByteOffset)
	require.Equal(t, []int64{3, 1, 5}, []int64{f.Entries[0].OffsetCount, f.Entries[1].OffsetCount, f.Entries[2].OffsetCount})
	require.Equal(t, int32(2), f.Entries[2].Partition.Partition)

	empty := appendFooter(nil, nil)
	f, err = DecodeObjectFooter(empty)
	require.NoError(t, err)
	require.Empty(t, f.Entries)
}

// TestObjectHostile damages an object in the ways a store or an attacker
// can: every one is a typed corruption error.
func TestObjectHostile(t *testing.T) {
	obj := buildTestObject(t)
	dataLen := len(obj) - objectTrailerSize - 3*footerEntryBytes
	damage := map[string]func([]byte) []byte{
		"short":        func(b []byte) []byte { return b[:10] },
		"empty":        func(b []byte) []byte { return nil },
		"truncated":    func(b []byte) []byte { return b[:len(b)-1] },
		"garbage":      func(b []byte) []byte { return []byte(strings.Repeat("x", 200)) },
		"bad magic":    func(b []byte) []byte { b[len(b)-16] = 'X'; return b },
		"bad version":  func(b []byte) []byte { b[len(b)-11] = 9; return b },
		"footer crc":   func(b []byte) []byte { b[dataLen+20]++; return b },
		"huge length":  func(b []byte) []byte { binary.BigEndian.PutUint32(b[len(b)-4:], 1<<31); return b },
		"odd length":   func(b []byte) []byte { binary.BigEndian.PutUint32(b[len(b)-4:], 45); return b },
		"batch byte":   func(b []byte) []byte { b[30]++; return b },
		"batch length": func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 9); return b },
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			bad := f(append([]byte(nil), obj...))
			_, err := CheckObject(bad)
			var fe *ObjectFormatError
			require.ErrorAs(t, err, &fe)
			require.ErrorIs(t, err, ErrCorruption)
		})
	}
}

// TestObjectEntriesMismatch: a footer whose CRC is right but whose
// coordinates do not match the bytes (a buggy writer) is caught.
func TestObjectEntriesMismatch(t *testing.T) {
	var ob objectBuilder
	b, err := record.ReadBatch(testBatch(t, 4, "x"))
	require.NoError(t, err)
	ob.add(TopicIDPartition{Partition: 1}, b)
	ob.entries[0].OffsetCount = 5
	_, err = CheckObject(ob.finish())
	require.ErrorIs(t, err, ErrCorruption)

	ob = objectBuilder{}
	ob.add(TopicIDPartition{Partition: 1}, b)
	ob.add(TopicIDPartition{Partition: 1}, b)
	ob.entries[1].ByteOffset++ // a gap
	_, err = DecodeObjectFooter(ob.finish())
	require.ErrorIs(t, err, ErrCorruption)
}

func TestNewObjectKey(t *testing.T) {
	a, b := NewObjectKey("wal/"), NewObjectKey("wal/")
	require.NotEqual(t, a, b)
	require.Len(t, a, len("wal/")+33)
	require.Equal(t, byte('/'), a[6])
}

// FuzzDecodeObjectFooter: no input panics; an accepted footer tiles the
// data, and re-encoding it gives the same bytes.
func FuzzDecodeObjectFooter(f *testing.F) {
	f.Add(buildTestObject(f))
	f.Add(appendFooter(nil, nil))
	f.Add([]byte("TLWF"))
	f.Fuzz(func(t *testing.T, obj []byte) {
		footer, err := CheckObject(obj)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		re := appendFooter(append([]byte(nil), obj[:footer.DataBytes]...), footer.Entries)
		require.Equal(t, obj, re)
	})
}
