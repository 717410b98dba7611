package producer

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/record"
)

func TestSnapshotFileNames(t *testing.T) {
	require.Equal(t, "00000000000000000042.snapshot", SnapshotFileName(42))
	off, ok := ParseSnapshotFileName("00000000000000000042.snapshot")
	require.True(t, ok)
	require.Equal(t, int64(42), off)
	for _, bad := range []string{"00000000000000000042.snapshot.tmp", "42.snapshot", "0000000000000000004x.snapshot",
		"00000000000000000042.log", "99999999999999999999.snapshot"} {
		_, ok := ParseSnapshotFileName(bad)
		require.False(t, ok, bad)
	}
}

// logBatches builds a little log: idempotent and transactional batches
// with offsets 0.., returned one batch per element.
func logBatches(t *testing.T) [][]byte {
	var out [][]byte
	next := int64(0)
	add := func(line string) {
		b := buildBatch(t, nil, line, next)
		rb, err := record.ReadBatch(b)
		require.NoError(t, err)
		next = rb.NextOffset()
		out = append(out, b)
	}
	add("data pid=1 epoch=0 seq=0 count=2")
	add("data pid=2 epoch=0 seq=0 count=1 txn")
	add("plain count=2")
	add("data pid=1 epoch=0 seq=2 count=1 txn")
	add("abort pid=2 epoch=0 coord=1")
	add("data pid=3 epoch=1 seq=0 count=3")
	add("commit pid=1 epoch=0 coord=1")
	add("data pid=2 epoch=1 seq=0 count=1 txn")
	return out
}

// TestSnapshotFilesAndReload writes a snapshot at every batch boundary,
// then checks that reloading at each offset and replaying the rest gives
// the state of a full replay, that a corrupt snapshot is deleted and an
// older one used, and the deletion helpers.
func TestSnapshotFilesAndReload(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "p0"
	require.NoError(t, fs.MkdirAll(dir, 0o755))
	batches := logBatches(t)

	full := NewManager(Options{})
	var ends []int64
	for _, b := range batches {
		rb, _ := record.ReadBatch(b)
		_, err := full.Replay(rb)
		require.NoError(t, err)
		require.NoError(t, WriteSnapshotFile(fs, dir, full.MapEndOffset(), full.Snapshot(nil)))
		ends = append(ends, full.MapEndOffset())
	}
	offsets, err := ListSnapshotOffsets(fs, dir)
	require.NoError(t, err)
	require.Equal(t, ends, offsets)
	want := full.SnapshotEntries()
	logEnd := ends[len(ends)-1]

	replayFrom := func(m *Manager) {
		for _, b := range batches {
			rb, _ := record.ReadBatch(b)
			if rb.BaseOffset() < m.MapEndOffset() {
				continue
			}
			_, err := m.Replay(rb)
			require.NoError(t, err)
		}
	}
	for _, at := range ends {
		m := NewManager(Options{})
		res, err := m.LoadLatestSnapshotFile(fs, dir, at, 0)
		require.NoError(t, err)
		require.True(t, res.Loaded)
		require.Equal(t, at, res.Offset)
		replayFrom(m)
		require.Equal(t, want, m.SnapshotEntries(), "reload at %d", at)
		ongoing := full.OngoingTxns()
		require.Equal(t, ongoing, m.OngoingTxns(), "reload at %d", at)
	}

	// Corrupt the newest snapshot: it is deleted, the one before loads.
	newest := ends[len(ends)-1]
	data, err := ReadSnapshotFile(fs, dir, newest)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, WriteSnapshotFile(fs, dir, newest, data))
	m := NewManager(Options{})
	res, err := m.LoadLatestSnapshotFile(fs, dir, logEnd, 0)
	require.NoError(t, err)
	require.Equal(t, ends[len(ends)-2], res.Offset)
	require.Len(t, res.Corrupt, 1)
	require.ErrorIs(t, res.Corrupt[0].Err, ErrCorruption)
	replayFrom(m)
	require.Equal(t, want, m.SnapshotEntries())

	// Truncation to the third boundary: later snapshots go, state reloads.
	cut := ends[2]
	res, err = m.TruncateAndReload(fs, dir, 0, 0, cut)
	require.NoError(t, err)
	require.True(t, res.Loaded)
	require.Equal(t, cut, m.MapEndOffset())
	offsets, err = ListSnapshotOffsets(fs, dir)
	require.NoError(t, err)
	require.Equal(t, ends[:3], offsets)

	// A log start beyond the oldest snapshots deletes them.
	deleted, err := DeleteSnapshotsBelow(fs, dir, ends[1])
	require.NoError(t, err)
	require.Equal(t, ends[:1], deleted)

	// No snapshot at or below the bound: empty at the given offset.
	m = NewManager(Options{})
	res, err = m.LoadLatestSnapshotFile(fs, dir, ends[0], 7)
	require.NoError(t, err)
	require.False(t, res.Loaded)
	require.Equal(t, int64(7), m.MapEndOffset())
	require.Zero(t, m.ProducerCount())

	deleted, err = DeleteSnapshotsAbove(fs, dir, ends[1])
	require.NoError(t, err)
	require.Equal(t, ends[2:3], deleted)
}

// TestStaleAppendInfo: an AppendInfo cannot be applied after a state
// change, twice, or after a failed prepare.
func TestStaleAppendInfo(t *testing.T) {
	m := NewManager(Options{})
	b := buildBatch(t, nil, "data pid=1 epoch=0 seq=0 count=1", 0)
	a, err := m.PrepareAppend(b, OriginClient)
	require.NoError(t, err)
	m.RemoveExpired(0, 1000)
	_, err = m.Apply(a)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Zero(t, m.ProducerCount())
}

// TestNoAllocations: a known producer's append allocates nothing.
func TestNoAllocations(t *testing.T) {
	m := NewManager(Options{})
	buf := buildBatch(t, nil, "data pid=1 epoch=0 seq=0 count=5", 0)
	txn := buildBatch(t, nil, "data pid=2 epoch=0 seq=0 count=5 txn", 0)
	marker := buildBatch(t, nil, "commit pid=2 epoch=0 coord=0", 0)
	var next int64
	var seq1, seq2 int32
	step := func(b []byte, seq *int32) {
		rb, _ := record.ReadBatch(b)
		rb.SetBaseOffset(next)
		if seq != nil {
			setBaseSequence(b, *seq)
			*seq += 5
		}
		a, err := m.PrepareAppend(b, OriginClient)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Apply(a); err != nil {
			t.Fatal(err)
		}
		next = rb.NextOffset()
		m.OnHighWatermarkUpdated(next)
	}
	run := func() {
		step(buf, &seq1)
		step(txn, &seq2)
		step(marker, nil)
	}
	run() // first appends create the producers
	require.Zero(t, testing.AllocsPerRun(100, run))
}

// setBaseSequence rewrites a batch's base sequence in place. The CRC is
// stale afterwards, which PrepareAppend does not check.
func setBaseSequence(b []byte, seq int32) {
	b[53], b[54], b[55], b[56] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
}
