package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// localBatchPositions returns the byte positions of the batches of the
// local segment file path.
func localBatchPositions(t *testing.T, fs vfs.FS, path string) []int64 {
	t.Helper()
	return localBatchPositionsOf(t, readVFSFile(t, fs, path))
}

func readVFSFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

// damageVFSFile applies f to the bytes of path in place (the log's open
// handle sees the change: the mem FS shares the file's bytes).
func damageVFSFile(t *testing.T, fs vfs.FS, path string, f func([]byte)) {
	t.Helper()
	b := readVFSFile(t, fs, path)
	f(b)
	w, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = w.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestCopyRefusesCorruptLocalSegment: a local segment whose batch fails
// its CRC, its framing or the offset order is not tiered: the copy fails
// with a *BatchCorruptionError naming the segment and the batch, the
// failed copy's objects and metadata are gone, the highest remote offset
// stays below the segment, the corruption is counted and reported, and
// the next run stops at the segment without reading it again.
func TestCopyRefusesCorruptLocalSegment(t *testing.T) {
	damages := []struct {
		name   string
		damage func(b []byte, pos int64) // b is the segment file, pos the third batch's position
		reason string
	}{
		{"flipped value byte (crc)", func(b []byte, pos int64) { b[pos+record.HeaderSize+3] ^= 0x40 }, "fails its check"},
		{"flipped crc field", func(b []byte, pos int64) { b[pos+17] ^= 1 }, "fails its check"},
		{"flipped magic", func(b []byte, pos int64) { b[pos+16] = 1 }, "fails its check"},
		{"base offset moved back (outside the crc)", func(b []byte, pos int64) {
			binary.BigEndian.PutUint64(b[pos:], 5)
		}, "base offset 5 below 7"},
		{"base offset past the segment", func(b []byte, pos int64) {
			binary.BigEndian.PutUint64(b[pos:], 1000)
		}, "beyond the segment's end offset 9"},
		{"length below the header", func(b []byte, pos int64) { binary.BigEndian.PutUint32(b[pos+8:], 10) }, "below the header size"},
		{"length past the segment end", func(b []byte, pos int64) { binary.BigEndian.PutUint32(b[pos+8:], 1<<20) }, "the segment has"},
	}
	for _, compression := range []bool{false, true} {
		for _, d := range damages {
			t.Run(fmt.Sprintf("compression=%t/%s", compression, d.name), func(t *testing.T) {
				e := newMgrEnv(t, nil)
				// Small chunks and objects: a compressed copy uploads
				// objects before it reaches the damage.
				storage, err := NewStorageManager(e.store, StorageOptions{ChunkSize: 64, DataObjectBytes: 64, Compression: compression})
				require.NoError(t, err)
				e.hooks.SegmentStorage = storage
				var reported []error
				e.mgr.opts.Listener.Corruption = func(_ TopicIDPartition, err error) { reported = append(reported, err) }
				tp := testPartition(0)
				l := e.openLog("p0", log.Options{})
				appendSegments(t, l, 0, 3, 5)
				path := "p0/00000000000000000005.log"
				positions := localBatchPositions(t, e.fs, path)
				require.Len(t, positions, 5)
				damageVFSFile(t, e.fs, path, func(b []byte) { d.damage(b, positions[2]) })

				require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
				err = runErr(e.mgr.RunCopy(context.Background(), tp))
				var bce *BatchCorruptionError
				require.ErrorAs(t, err, &bce)
				require.ErrorIs(t, err, ErrCorruption)
				require.NotErrorIs(t, err, ErrCorrupt, "local damage, not remote")
				require.EqualValues(t, 5, bce.StartOffset)
				require.Equal(t, positions[2], bce.Position)
				require.False(t, bce.Remote)
				require.Contains(t, bce.Reason, d.reason)

				require.Equal(t, "[0,4]0@0 ", spans(finished(t, e.meta, tp)))
				all, err := e.meta.ListSegments(tp)
				require.NoError(t, err)
				require.Len(t, all, 1, "the failed copy's metadata is deleted")
				for _, k := range listKeys(t, e.store) {
					require.Contains(t, k, all[0].SegmentID.ID.String(), "only the good segment's objects remain")
				}
				require.EqualValues(t, 4, l.HighestOffsetInRemoteStorage())
				met := e.mgr.Metrics()
				require.EqualValues(t, 1, met.CopyCorruptions)
				require.EqualValues(t, 1, met.CopyErrors)
				require.EqualValues(t, 5, met.Partitions[tp].CopyStalledAt)
				require.Len(t, reported, 1)
				require.ErrorAs(t, reported[0], &bce)

				// The next run stops at the segment: no new attempt.
				copies := e.hooks.copies.Load()
				err = runErr(e.mgr.RunCopy(context.Background(), tp))
				require.ErrorIs(t, err, ErrCopyStalled)
				require.ErrorAs(t, err, &bce)
				require.Equal(t, copies, e.hooks.copies.Load())
				require.EqualValues(t, 1, e.mgr.Metrics().CopyCorruptions)
				require.EqualValues(t, 4, l.HighestOffsetInRemoteStorage())

				// A truncation below the segment clears the stall; the
				// records appended after it are copied.
				_, err = l.TruncateTo(5)
				require.NoError(t, err)
				appendSegments(t, l, 0, 1, 5)
				require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), tp)))
				require.Equal(t, "[0,4]0@0 [5,9]0@5 ", spans(finished(t, e.meta, tp)))
				require.EqualValues(t, -1, e.mgr.Metrics().Partitions[tp].CopyStalledAt)
			})
		}
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r     io.ReaderAt
	bytes atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.bytes.Add(int64(n))
	return n, err
}

// validSegment returns n batches of one record each, from base, and the
// metadata of a segment holding them.
func validSegment(t *testing.T, base int64, n int) ([]byte, SegmentMetadata) {
	t.Helper()
	var seg []byte
	for i := range n {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(1_000_000, []byte("k"), bytes.Repeat([]byte{byte('a' + i%26)}, 20+i*7%300))
		batch, err := b.Build()
		require.NoError(t, err)
		rb, err := record.ReadBatch(batch)
		require.NoError(t, err)
		rb.SetBaseOffset(base + int64(i))
		seg = append(seg, batch...)
	}
	c := newTestCopy(storageTopic, 1, base, len(seg), false)
	c.m.EndOffset = base + int64(n) - 1
	return seg, c.m
}

// TestCopyVerifiesInTheDataPlanesPass: the StorageManager's own pass over
// the log (the upload, which checksums as it reads, uncompressed; the
// compressing pass compressed) feeds every byte to the verifier, so the
// check adds no read of the segment: either copy reads it exactly once.
func TestCopyVerifiesInTheDataPlanesPass(t *testing.T) {
	src, m := validSegment(t, 100, 40)
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%t", compression), func(t *testing.T) {
			s := newTestStorage(t, newMemStore(), StorageOptions{ChunkSize: 100, DataObjectBytes: 300, Compression: compression})
			counted := &countingReaderAt{r: bytes.NewReader(src)}
			vlog := &verifiedLog{r: counted, v: newBatchVerifier(&m)}
			c := newTestCopy(storageTopic, 1, m.StartOffset, len(src), false)
			c.m, c.data.Log, c.data.LeaderEpochs = m, vlog, []epochcache.Entry{{Epoch: 4, StartOffset: 100}}
			c.m.SegmentLeaderEpochs = c.data.LeaderEpochs
			_, err := s.CopySegment(context.Background(), &c.m, c.data)
			require.NoError(t, err)
			require.EqualValues(t, len(src), vlog.v.fed, "the data plane's pass fed every byte")
			require.NoError(t, vlog.result(context.Background()))
			require.Equal(t, int64(len(src)), counted.bytes.Load(), "one pass over the segment")
			require.Zero(t, s.Metrics().ChecksumRereadBytes)
		})
	}
}

// TestBatchVerifierPieces: feeding a segment in pieces of any size finds
// the same outcome, at the same position, as feeding it whole.
func TestBatchVerifierPieces(t *testing.T) {
	seed := testseed.Seed(t, 10)
	rng := rand.New(rand.NewPCG(seed, 0))
	src, m := validSegment(t, 7, 12)
	positions := localBatchPositionsOf(t, src)
	for round := range 200 {
		b := bytes.Clone(src)
		wantPos := int64(-1)
		if round%4 != 0 { // damage one batch, keep a quarter intact
			k := rng.IntN(len(positions))
			wantPos = positions[k]
			b[positions[k]+record.HeaderSize+int64(rng.IntN(10))] ^= byte(1 + rng.IntN(255))
		}
		v := newBatchVerifier(&m)
		var err error
		for rest := b; len(rest) > 0 && err == nil; {
			n := min(1+rng.IntN(150), len(rest))
			err = v.feed(rest[:n])
			rest = rest[n:]
		}
		if err == nil {
			err = v.finish()
		}
		if wantPos < 0 {
			require.NoError(t, err, "round %d", round)
			continue
		}
		var bce *BatchCorruptionError
		require.ErrorAs(t, err, &bce, "round %d", round)
		require.Equal(t, wantPos, bce.Position, "round %d", round)
	}
	// A segment cut inside a batch's length field.
	v := newBatchVerifier(&SegmentMetadata{StartOffset: 7, EndOffset: 18, SizeBytes: int64(len(src)) + 5})
	require.NoError(t, v.feed(append(bytes.Clone(src), 0, 0, 0, 0, 0)))
	require.ErrorContains(t, v.finish(), "too few for a batch")
}

func localBatchPositionsOf(t *testing.T, b []byte) []int64 {
	t.Helper()
	var out []int64
	sc := record.NewScanner(b, record.ScannerOptions{})
	for sc.Next() {
		out = append(out, sc.Pos())
	}
	require.NoError(t, sc.Err())
	return out
}

// readEnv is a log of three segments of five one-record batches, all
// copied, with the local bytes of segment [5, 9] at hand for retiering.
type readEnv struct {
	*mgrEnv
	tp        TopicIDPartition
	l         *log.UnifiedLog
	seg       SegmentMetadata // the remote [5, 9]
	local     []byte          // its .log
	positions []int64         // its batches' positions
}

func newReadEnv(t *testing.T) *readEnv {
	e := &readEnv{mgrEnv: newMgrEnv(t, nil), tp: testPartition(0)}
	e.l = e.openLog("p0", log.Options{})
	appendSegments(t, e.l, 0, 3, 5)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: e.tp, Log: e.l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), e.tp)))
	segs := finished(t, e.meta, e.tp)
	require.Len(t, segs, 3)
	e.seg = segs[1]
	e.local = readVFSFile(t, e.fs, "p0/00000000000000000005.log")
	e.positions = localBatchPositionsOf(t, e.local)
	return e
}

// retier uploads segment [5, 9] again under its own id and keys, with
// its .log replaced by logBytes and its offset index by offsetIndex (nil:
// the local one), as a copy without the batch check would have: every
// chunk checksum and the manifest match the damaged bytes.
func (e *readEnv) retier(logBytes, offsetIndex []byte) {
	e.t.Helper()
	files, err := e.l.OpenSegment(5)
	require.NoError(e.t, err)
	defer files.Close()
	snapshot, err := e.l.ProducerSnapshot(10)
	require.NoError(e.t, err)
	if offsetIndex == nil {
		offsetIndex = files.OffsetIndex
	}
	_, err = e.storage.CopySegment(context.Background(), &e.seg, SegmentData{
		Log: bytes.NewReader(logBytes), LogSize: int64(len(logBytes)),
		OffsetIndex: offsetIndex, TimeIndex: files.TimeIndex, TxnIndex: files.TxnIndex,
		ProducerSnapshot: snapshot, LeaderEpochs: e.l.EpochEntriesInRange(-1, 10),
	})
	require.NoError(e.t, err)
	e.mgr.indexes = indexCache{} // forget the cached offset index
}

// requireReadCorruption reads at offset and checks the typed error: a
// *ReadCorruptionError about e.seg at offset, counted and reported.
func (e *readEnv) requireReadCorruption(offset int64) error {
	e.t.Helper()
	var reported []error
	e.mgr.opts.Listener.Corruption = func(_ TopicIDPartition, err error) { reported = append(reported, err) }
	before := e.mgr.Metrics()
	res, err := e.mgr.Read(context.Background(), e.tp, offset, 1<<20, log.IsolationLogEnd, true)
	require.Empty(e.t, res.Records, "no record of a corrupt read")
	var rce *ReadCorruptionError
	require.ErrorAs(e.t, err, &rce)
	require.ErrorIs(e.t, err, ErrCorruption)
	require.ErrorIs(e.t, err, ErrCorrupt)
	require.Equal(e.t, offset, rce.Offset)
	require.Equal(e.t, e.seg.SegmentID, rce.Segment)
	require.EqualValues(e.t, 5, rce.StartOffset)
	after := e.mgr.Metrics()
	require.Equal(e.t, before.RemoteReadCorruptions+1, after.RemoteReadCorruptions)
	require.Equal(e.t, before.RemoteReadErrors+1, after.RemoteReadErrors)
	require.Len(e.t, reported, 1)
	return err
}

// TestRemoteReadRefusesCorruptBatches: tiered bytes whose chunk checksums
// match but whose batches fail their CRC, framing or offset order (a
// segment tiered without the copy's check, or a base offset damaged
// outside the batch CRC), and an offset index pointing past the batch
// holding its offset, fail the read with a *ReadCorruptionError holding
// a *BatchCorruptionError at the batch's position, never records.
func TestRemoteReadRefusesCorruptBatches(t *testing.T) {
	for _, d := range []struct {
		name   string
		batch  int // the damaged batch
		damage func(b []byte, pos int64)
		reason string
	}{
		{"flipped value byte", 2, func(b []byte, pos int64) { b[pos+record.HeaderSize+3] ^= 0x40 }, "fails its check"},
		{"base offset moved back", 2, func(b []byte, pos int64) { binary.BigEndian.PutUint64(b[pos:], 3) }, "below 7"},
		{"base offset outside the segment", 0, func(b []byte, pos int64) { binary.BigEndian.PutUint64(b[pos:], 2) }, "below 5"},
		{"base offset moved forward", 1, func(b []byte, pos int64) { binary.BigEndian.PutUint64(b[pos:], 7) }, "below 8"},
		{"length past the segment end", 2, func(b []byte, pos int64) { binary.BigEndian.PutUint32(b[pos+8:], 1<<20) }, "the segment has"},
	} {
		t.Run(d.name, func(t *testing.T) {
			e := newReadEnv(t)
			damaged := bytes.Clone(e.local)
			d.damage(damaged, e.positions[d.batch])
			e.retier(damaged, nil)
			err := e.requireReadCorruption(5)
			var bce *BatchCorruptionError
			require.ErrorAs(t, err, &bce)
			require.True(t, bce.Remote)
			require.Contains(t, bce.Reason, d.reason)
			wantPos := e.positions[d.batch]
			if d.name == "base offset moved forward" {
				wantPos = e.positions[d.batch+1] // the next batch is then out of order
			}
			require.Equal(t, wantPos, bce.Position)
			// The segment before still reads.
			res, err := e.mgr.Read(context.Background(), e.tp, 0, 1<<20, log.IsolationLogEnd, true)
			require.NoError(t, err)
			require.NotEmpty(t, res.Records)
		})
	}
	t.Run("offset index entry pointing at a later batch", func(t *testing.T) {
		e := newReadEnv(t)
		files, err := e.l.OpenSegment(5)
		require.NoError(t, err)
		idx := bytes.Clone(files.OffsetIndex)
		require.NoError(t, files.Close())
		require.GreaterOrEqual(t, len(idx), 16)
		// Entry 0 takes entry 1's position and entry 1 goes: a read at
		// entry 0's offset starts one batch too late.
		offset := 5 + int64(binary.BigEndian.Uint32(idx))
		copy(idx[4:8], idx[12:16])
		idx = append(idx[:8], idx[16:]...)
		e.retier(e.local, idx)
		err = e.requireReadCorruption(offset)
		var bce *BatchCorruptionError
		require.ErrorAs(t, err, &bce)
		require.Contains(t, bce.Reason, "the offset index maps offset")
	})
	t.Run("chunk checksum", func(t *testing.T) {
		e := newReadEnv(t)
		keys, err := e.storage.keysFor(&e.seg)
		require.NoError(t, err)
		rewrite(t, e.store, keys.data(0), func(b []byte) []byte { b[e.positions[1]+record.HeaderSize] ^= 1; return b })
		err = e.requireReadCorruption(6)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, keys.data(0), ce.Key)
	})
}

// TestVerifiedLogChecksWhatTheDataPlaneSkipped: a data plane that does
// not read the log in order (one other than *StorageManager) still gets
// every batch checked: result reads and checks the rest.
func TestVerifiedLogChecksWhatTheDataPlaneSkipped(t *testing.T) {
	src, m := validSegment(t, 100, 10)
	positions := localBatchPositionsOf(t, src)
	for _, skipped := range []int64{0, positions[3], int64(len(src)) / 2} {
		good := &verifiedLog{r: bytes.NewReader(src), v: newBatchVerifier(&m)}
		_, err := good.ReadAt(make([]byte, skipped), 0) // the data plane read only a prefix
		require.NoError(t, err)
		require.NoError(t, good.result(context.Background()))

		bad := bytes.Clone(src)
		bad[positions[8]+record.HeaderSize] ^= 1
		vlog := &verifiedLog{r: bytes.NewReader(bad), v: newBatchVerifier(&m)}
		_, err = vlog.ReadAt(make([]byte, skipped), 0)
		require.NoError(t, err)
		require.NoError(t, vlog.failed(), "the damage is after the prefix read")
		var bce *BatchCorruptionError
		require.ErrorAs(t, vlog.result(context.Background()), &bce)
		require.Equal(t, positions[8], bce.Position)
	}
}

// TestVerifiedLogVectored: over a vectored log, the copy's reader keeps
// the vectored reads (newVerifiedLog) and checks the bytes they bring, in
// order across the buffers: a damaged batch fails the read that reaches
// it and every later one.
func TestVerifiedLogVectored(t *testing.T) {
	src, m := validSegment(t, 100, 10)
	positions := localBatchPositionsOf(t, src)
	bad := bytes.Clone(src)
	bad[positions[6]+record.HeaderSize] ^= 1
	vlog, r := newVerifiedLog(&vecReader{r: bytes.NewReader(bad)}, newBatchVerifier(&m))
	vec, ok := r.(VectorReaderAt)
	require.True(t, ok, "the vectored reads are passed on")
	// Three uneven buffers per read, front to back.
	var err error
	for off := int64(0); off < int64(len(bad)) && err == nil; {
		bufs := [][]byte{make([]byte, 7), make([]byte, 50), make([]byte, 13)}
		var n int
		n, err = vec.ReadvAt(bufs, off)
		off += int64(n)
	}
	var bce *BatchCorruptionError
	require.ErrorAs(t, err, &bce)
	require.Equal(t, positions[6], bce.Position)
	require.ErrorAs(t, vlog.failed(), &bce)
	_, err = vec.ReadvAt([][]byte{make([]byte, 10)}, positions[9])
	require.ErrorAs(t, err, &bce, "reads after the damage fail too")

	_, plain := newVerifiedLog(bytes.NewReader(src), newBatchVerifier(&m))
	_, ok = plain.(VectorReaderAt)
	require.False(t, ok, "a log without vectored reads gets none")
}
