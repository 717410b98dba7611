package producer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/record"
)

// windowManager returns a Manager whose producer 1 holds a full window of
// five batches (after seven), producer 2 two batches, and producer 3
// none (only a marker of an empty transaction), with the state at the log
// end.
func windowManager(t *testing.T) *Manager {
	m := NewManager(Options{})
	next := int64(0)
	add := func(line string) {
		b := buildBatch(t, nil, line, next)
		rb, err := record.ReadBatch(b)
		require.NoError(t, err)
		_, err = m.Replay(rb)
		require.NoError(t, err)
		next = rb.NextOffset()
	}
	for i := range 7 {
		add(fmt.Sprintf("data pid=1 epoch=0 seq=%d count=2", 2*i))
		if i < 2 {
			add(fmt.Sprintf("data pid=2 epoch=3 seq=%d count=1", i))
		}
	}
	add("commit pid=3 epoch=0 coord=1")
	return m
}

func TestBatchesRoundTrip(t *testing.T) {
	m := windowManager(t)
	snap, batches := m.SnapshotWithBatches()
	_, entries, err := DecodeBatches(batches)
	require.NoError(t, err)
	require.Len(t, entries, 2, "producer 3 holds no batch")
	require.Equal(t, batches, EncodeBatches(nil, snapshotCRC(snap), entries))

	loaded := NewManager(Options{})
	use, err := loaded.LoadSnapshotWithBatches(snap, batches, m.MapEndOffset())
	require.NoError(t, err)
	require.Equal(t, BatchesLoaded, use)
	require.Equal(t, m.ActiveProducers(), loaded.ActiveProducers())
	require.Len(t, loaded.ActiveProducers()[0].Batches, NumBatchesToRetain)

	// Kafka's snapshot alone: the last batch only.
	alone := NewManager(Options{})
	use, err = alone.LoadSnapshotWithBatches(snap, nil, m.MapEndOffset())
	require.NoError(t, err)
	require.Equal(t, BatchesAbsent, use)
	require.Len(t, alone.ActiveProducers()[0].Batches, 1)
}

// TestBatchesLoadRules: a batches file naming another snapshot is
// ignored; one that does not decode, or that names this snapshot and
// disagrees with it, is corruption and changes nothing.
func TestBatchesLoadRules(t *testing.T) {
	m := windowManager(t)
	snap, batches := m.SnapshotWithBatches()
	at := m.MapEndOffset()

	// Stale: the windows of an earlier state, which named its own
	// snapshot.
	earlier := NewManager(Options{})
	rb, err := record.ReadBatch(buildBatch(t, nil, "data pid=1 epoch=0 seq=0 count=2", 0))
	require.NoError(t, err)
	_, err = earlier.Replay(rb)
	require.NoError(t, err)
	_, staleBatches := earlier.SnapshotWithBatches()
	loaded := NewManager(Options{})
	use, err := loaded.LoadSnapshotWithBatches(snap, staleBatches, at)
	require.NoError(t, err)
	require.Equal(t, BatchesStale, use)
	require.Len(t, loaded.ActiveProducers()[0].Batches, 1)

	_, entries, err := DecodeBatches(batches)
	require.NoError(t, err)
	disagree := func(f func([]BatchesEntry) []BatchesEntry) []byte {
		es := make([]BatchesEntry, len(entries))
		for i, e := range entries {
			es[i] = BatchesEntry{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch,
				Batches: append([]BatchMetadata(nil), e.Batches...)}
		}
		return EncodeBatches(nil, snapshotCRC(snap), f(es))
	}
	flipped := bytes.Clone(batches)
	flipped[len(flipped)-1] ^= 1
	for name, bad := range map[string][]byte{
		"flipped byte":  flipped,
		"short":         batches[:BatchesHeaderSize-1],
		"truncated":     batches[:len(batches)-1],
		"trailing byte": append(bytes.Clone(batches), 0),
		"other epoch": disagree(func(es []BatchesEntry) []BatchesEntry {
			es[0].ProducerEpoch++
			return es
		}),
		"other last batch": disagree(func(es []BatchesEntry) []BatchesEntry {
			b := &es[0].Batches[len(es[0].Batches)-1]
			b.LastOffset++
			return es
		}),
		"producer missing": disagree(func(es []BatchesEntry) []BatchesEntry { return es[1:] }),
		"unknown producer": disagree(func(es []BatchesEntry) []BatchesEntry {
			es[1].ProducerID = 99
			return es
		}),
		"offsets out of order": disagree(func(es []BatchesEntry) []BatchesEntry {
			bs := es[0].Batches
			bs[0], bs[1] = bs[1], bs[0]
			return es
		}),
	} {
		t.Run(name, func(t *testing.T) {
			loaded := windowManager(t)
			before := loaded.ActiveProducers()
			_, err := loaded.LoadSnapshotWithBatches(snap, bad, at)
			require.ErrorIs(t, err, ErrCorruption)
			require.Equal(t, before, loaded.ActiveProducers(), "state changed")
		})
	}
}

// TestLoadLatestSnapshotFileWithBatches: pairs written by
// WriteSnapshotFiles load with their windows; a damaged batches file
// drops its pair (deleted, reported corrupt) for the older one; a stray
// batches file is removed; a snapshot written alone removes the batches
// file at its offset.
func TestLoadLatestSnapshotFileWithBatches(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "p0"
	require.NoError(t, fs.MkdirAll(dir, 0o755))
	m := windowManager(t)
	end := m.MapEndOffset()
	snap, batches := m.SnapshotWithBatches()
	require.NoError(t, WriteSnapshotFiles(fs, dir, end, snap, batches))
	older := NewManager(Options{})
	olderSnap, olderBatches := older.SnapshotWithBatches()
	require.NoError(t, WriteSnapshotFiles(fs, dir, 0, olderSnap, olderBatches))

	loaded := NewManager(Options{})
	res, err := loaded.LoadLatestSnapshotFile(fs, dir, end, 0)
	require.NoError(t, err)
	require.Equal(t, SnapshotLoad{Loaded: true, Offset: end, Batches: BatchesLoaded}, res)
	require.Equal(t, m.ActiveProducers(), loaded.ActiveProducers())

	// Damage the batches file at end: the pair goes, the older loads.
	f, err := fs.OpenReadWrite(fs.PathJoin(dir, BatchesFileName(end)), vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, BatchesHeaderSize+3)
	require.NoError(t, err)
	require.NoError(t, errors.Join(f.Sync(), f.Close()))
	res, err = loaded.LoadLatestSnapshotFile(fs, dir, end, 0)
	require.NoError(t, err)
	require.True(t, res.Loaded)
	require.Equal(t, int64(0), res.Offset)
	require.Len(t, res.Corrupt, 1)
	require.ErrorIs(t, res.Corrupt[0].Err, ErrCorruption)
	for _, name := range []string{SnapshotFileName(end), BatchesFileName(end)} {
		_, err := fs.Stat(fs.PathJoin(dir, name))
		require.Error(t, err, name)
	}

	// A batches file without its snapshot is stray.
	require.NoError(t, WriteSnapshotFiles(fs, dir, end, snap, batches))
	require.NoError(t, fs.Remove(fs.PathJoin(dir, SnapshotFileName(end))))
	removed, err := RemoveStrayBatches(fs, dir)
	require.NoError(t, err)
	require.Equal(t, []int64{end}, removed)

	// A snapshot from elsewhere (Kafka's bytes alone) replaces the pair.
	require.NoError(t, WriteSnapshotFiles(fs, dir, end, snap, batches))
	require.NoError(t, WriteSnapshotFile(fs, dir, end, snap))
	_, err = fs.Stat(fs.PathJoin(dir, BatchesFileName(end)))
	require.Error(t, err)
}

func TestRemoveStraySnapshots(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "p0"
	require.NoError(t, fs.MkdirAll(dir, 0o755))
	m := NewManager(Options{})
	snap, batches := m.SnapshotWithBatches()
	for _, off := range []int64{1, 2, 3, 4, 6} {
		require.NoError(t, WriteSnapshotFiles(fs, dir, off, snap, batches))
	}
	// Bases 0, 1, 2, 5; the segment recovery point 3 is kept, the
	// largest stray (6, above the last base) too, 4 goes.
	removed, err := RemoveStraySnapshots(fs, dir, []int64{0, 1, 2, 5}, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, removed)
	offsets, err := ListSnapshotOffsets(fs, dir)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 6}, offsets)
	// A largest stray below the last base goes as well.
	removed, err = RemoveStraySnapshots(fs, dir, []int64{0, 1, 2, 7}, -1)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 6}, removed)
}

// FuzzDecodeBatches: DecodeBatches never panics, and what it accepts
// re-encodes to the same bytes.
func FuzzDecodeBatches(f *testing.F) {
	m := NewManager(Options{})
	for i := range 3 {
		rb, _ := record.ReadBatch(buildBatch(f, nil, fmt.Sprintf("data pid=%d epoch=0 seq=0 count=2", i+1), int64(2*i)))
		_, _ = m.Replay(rb)
	}
	_, batches := m.SnapshotWithBatches()
	f.Add(batches)
	f.Add(EncodeBatches(nil, 7, nil))
	f.Add([]byte("TLPB"))
	f.Fuzz(func(t *testing.T, data []byte) {
		crc, entries, err := DecodeBatches(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruption)
			return
		}
		require.Equal(t, data, EncodeBatches(nil, crc, entries))
	})
}
