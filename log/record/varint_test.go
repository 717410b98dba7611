package record

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVarintGolden(t *testing.T) {
	for _, tc := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1, []byte{0x02}},
		{63, []byte{0x7e}},
		{-64, []byte{0x7f}},
		{64, []byte{0x80, 0x01}},
		{-65, []byte{0x81, 0x01}},
		{math.MaxInt32, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}},
		{math.MinInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		got := AppendVarint(nil, tc.v)
		require.Equal(t, tc.want, got, "AppendVarint(%d)", tc.v)
		require.Equal(t, len(tc.want), VarintLen(tc.v))
		v, n := Varint(append(got, 0xaa)) // a trailing byte is not read
		require.Equal(t, tc.v, v)
		require.Equal(t, len(tc.want), n)
		// Varlong agrees with varint on int32 values.
		require.Equal(t, got, AppendVarlong(nil, int64(tc.v)))
	}
}

func TestVarlongExtremes(t *testing.T) {
	for _, v := range []int64{0, -1, 1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64,
		math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -(1 << 62)} {
		enc := AppendVarlong(nil, v)
		require.Equal(t, len(enc), VarlongLen(v))
		got, n := Varlong(enc)
		require.Equal(t, v, got)
		require.Equal(t, len(enc), n)
		// The standard library's zig-zag varint is the same encoding.
		require.Equal(t, binary.AppendVarint(nil, v), enc)
	}
	require.Len(t, AppendVarlong(nil, math.MinInt64), 10)
}

func TestVarintRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		v32 := int32(rng.Uint32())
		got, n := Varint(AppendVarint(nil, v32))
		require.Equal(t, v32, got)
		require.Equal(t, VarintLen(v32), n)
		v64 := int64(rng.Uint64()) >> rng.IntN(64)
		got64, n := Varlong(AppendVarlong(nil, v64))
		require.Equal(t, v64, got64)
		require.Equal(t, VarlongLen(v64), n)
	}
}

func TestVarintMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		n    int
	}{
		{"empty", nil, 0},
		{"cut", []byte{0x80}, 0},
		{"cut-4", []byte{0x80, 0x80, 0x80, 0x80}, 0},
		{"overflow-5th-byte", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, -1},
		{"six-bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, -1},
	} {
		_, n := Varint(tc.b)
		require.Equal(t, tc.n, n, tc.name)
	}
	long := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}
	_, n := Varlong(long)
	require.Equal(t, -1, n, "bits beyond 64")
	_, n = Varlong(long[:9])
	require.Equal(t, 0, n, "cut")
	long[9] = 0x01
	v, n := Varlong(long)
	require.Equal(t, 10, n)
	require.Equal(t, int64(1<<62), v) // unsigned 1<<63 zig-zag decodes to 1<<62
}
