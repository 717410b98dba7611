package logmanager

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote"
)

// TestCheckpointFormat checks Kafka's CheckpointFile text byte for byte
// (version, count, "<topic> <partition> <offset>" lines, sorted here) and
// the round trip.
func TestCheckpointFormat(t *testing.T) {
	entries := []CheckpointEntry{{"orders", 3, 877}, {"audit.log", 0, 0}, {"orders", 0, 1200}}
	got := EncodeCheckpoint(entries)
	require.Equal(t, "0\n3\naudit.log 0 0\norders 0 1200\norders 3 877\n", string(got))
	back, err := ParseCheckpoint("f", got)
	require.NoError(t, err)
	require.Equal(t, []CheckpointEntry{{"audit.log", 0, 0}, {"orders", 0, 1200}, {"orders", 3, 877}}, back)

	require.Equal(t, "0\n0\n", string(EncodeCheckpoint(nil)))
	back, err = ParseCheckpoint("f", []byte("0\n0\n"))
	require.NoError(t, err)
	require.Empty(t, back)
	// Kafka separates fields by any whitespace.
	back, err = ParseCheckpoint("f", []byte("0\n1\nt  2\t9\n"))
	require.NoError(t, err)
	require.Equal(t, []CheckpointEntry{{"t", 2, 9}}, back)
}

// TestCheckpointDamaged: every damaged file is a *CheckpointError naming
// the line, never a partial result.
func TestCheckpointDamaged(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		line       int
	}{
		{"empty", "", 1},
		{"version", "1\n0\n", 1},
		{"no-count", "0\n", 2},
		{"bad-count", "0\nx\n", 2},
		{"too-few", "0\n2\nt 0 5\n", 2},
		{"too-many", "0\n1\nt 0 5\nt 1 6\n", 2},
		{"torn", "0\n1\nt 0 5", 3},
		{"two-fields", "0\n1\nt 5\n", 3},
		{"blank-line", "0\n2\nt 0 5\n\n", 4},
		{"bad-partition", "0\n1\nt x 5\n", 3},
		{"negative-partition", "0\n1\nt -1 5\n", 3},
		{"bad-offset", "0\n1\nt 0 5x\n", 3},
		{"negative-offset", "0\n1\nt 0 -5\n", 3},
		{"bad-topic", "0\n1\nt/x 0 5\n", 3},
		{"twice", "0\n2\nt 0 5\nt 0 6\n", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCheckpoint("dir/f", []byte(tc.data))
			require.Nil(t, got)
			require.ErrorIs(t, err, ErrCorruption)
			var ce *CheckpointError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tc.line, ce.Line, "%v", err)
			require.Equal(t, "dir/f", ce.Path)
		})
	}
}

// TestPartitionMetadataFormat: Kafka's PartitionMetadataFile text.
func TestPartitionMetadataFormat(t *testing.T) {
	id := remote.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	data := encodePartitionMetadata(id)
	require.Equal(t, "version: 0\ntopic_id: "+id.String(), string(data))
	got, err := parsePartitionMetadata("p", data)
	require.NoError(t, err)
	require.Equal(t, id, got)
	got, err = parsePartitionMetadata("p", append(data, '\n'))
	require.NoError(t, err)
	require.Equal(t, id, got)
	for _, bad := range []string{"", "version: 0", "version: 1\ntopic_id: " + id.String(), "version: 0\ntopic_id: x",
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "topic_id: " + id.String() + "\nversion: 0"} {
		_, err := parsePartitionMetadata("p", []byte(bad))
		require.ErrorIs(t, err, ErrCorruption, "%q", bad)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind dirKind
		k    key
	}{
		{"orders-0", kindCurrent, key{"orders", 0}},
		{"my.topic-12", kindCurrent, key{"my.topic", 12}},
		{"a-b-c-7", kindCurrent, key{"a-b-c", 7}},
		{"orders-0.0123456789abcdef0123456789abcdef-future", kindFuture, key{"orders", 0}},
		{"my.topic-3.0123456789abcdef0123456789abcdef-future", kindFuture, key{"my.topic", 3}},
		{"orders-0.0123456789abcdef0123456789abcdef-delete", kindDelete, key{"orders", 0}},
		{"p0.1733390000000000000-1.deleted", kindDelete, key{}},
		{"orders-0.0123456789abcdef0123456789abcdef-stray", kindStray, key{}},
		{"orders", kindStray, key{}},
		{"orders-", kindStray, key{}},
		{"-0", kindStray, key{}},
		{"orders-x", kindStray, key{}},
		{"orders--1", kindCurrent, key{"orders-", 1}}, // topic "orders-"
		{"orders-+1", kindStray, key{}},
		{"lost+found", kindStray, key{}},
		{"orders-0-future", kindStray, key{}},
		{"orders-99999999999", kindStray, key{}},
	} {
		kind, k := classify(tc.name)
		require.Equal(t, tc.kind, kind, tc.name)
		require.Equal(t, tc.k, k, tc.name)
	}
	// The names the manager makes classify back.
	k := key{"orders", 4}
	for _, s := range []struct {
		suffix string
		kind   dirKind
	}{{FutureDirSuffix, kindFuture}, {DeleteDirSuffix, kindDelete}} {
		kind, got := classify(suffixedName(k, s.suffix))
		require.Equal(t, s.kind, kind)
		require.Equal(t, k, got)
	}
}
