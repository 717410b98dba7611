package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

func init() { rowSets = append(rowSets, remoteRows) }

// errWrongRecords is what a remote row observes when a read returned
// records other than the ones appended: the one outcome no damage may
// have.
var errWrongRecords = errors.New("badinput: a remote read returned wrong records")

// remoteSegments are the three tiered segments of every remote row:
// [0, 4], [5, 9] and [10, 14], one record per batch. Rows damage the
// middle one, so a row's readable-to is 5 when the whole segment is
// unreadable, or the offset of the damaged batch.
const remoteRecords = 15

// remoteFixture is a remote-enabled log whose segments were all copied to
// an object store through the public remote API.
type remoteFixture struct {
	t       *testing.T
	fs      vfs.FS
	l       *log.UnifiedLog
	meta    *remote.MetadataManager
	store   objstore.Store
	storage *remote.StorageManager
	mgr     *remote.Manager
	tp      remote.TopicIDPartition
	// batches[o] is the batch appended at offset o, as the log holds it.
	batches [][]byte
}

// newRemoteFixture copies with the checksums in the manifest (layout
// version 2), which most rows damage; a storeKind ending in "/v3" copies in
// layout version 3 (CRC trailers in the data object, the locator in the
// segment's custom metadata, so reads skip the manifest).
func newRemoteFixture(t *testing.T, storeKind string) *remoteFixture {
	t.Helper()
	storeKind, framed := strings.CutSuffix(storeKind, "/v3")
	f := &remoteFixture{t: t, fs: vfs.NewMem(),
		tp: remote.TopicIDPartition{TopicID: remote.UUID{1, 2, 3}, Topic: "orders", Partition: 0}}
	now := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	var err error
	f.l, err = log.Open("p0", log.Options{FS: f.fs, RemoteStorageEnabled: true, Now: now,
		SegmentIndexBytes: 4096, IndexIntervalBytes: 1})
	must(t, err)
	t.Cleanup(func() { _ = f.l.Close() })
	for range 3 {
		for range 5 {
			b := record.NewBuilder(record.DefaultBuilderOptions())
			b.Add(1_000_000, []byte("k"), []byte(fmt.Sprintf("value-%d", f.l.LogEndOffset())))
			batch, err := b.Build()
			must(t, err)
			_, err = f.l.AppendAsLeader(batch, 0, log.OriginClient)
			must(t, err)
		}
		must(t, f.l.Roll())
	}
	f.l.UpdateHighWatermark(f.l.LogEndOffset())
	for _, base := range []int64{0, 5, 10} {
		sc := record.NewScanner(f.localLog(base), record.ScannerOptions{})
		for sc.Next() {
			f.batches = append(f.batches, bytes.Clone(sc.Batch().Bytes()))
		}
		must(t, sc.Err())
	}
	switch storeKind {
	case "fs":
		s, err := fs.Open(t.TempDir(), fs.Options{NoSync: true})
		must(t, err)
		t.Cleanup(func() { _ = s.Close() })
		f.store = s
	default:
		f.store = mem.New(mem.Options{Seed: 1})
	}
	f.meta, err = remote.Open(f.fs, "meta", remote.MetadataOptions{})
	must(t, err)
	f.storage, err = remote.NewStorageManager(f.store, remote.StorageOptions{ManifestCacheEntries: -1, ChecksumsInManifest: !framed})
	must(t, err)
	f.mgr, err = remote.NewManager(f.meta, f.storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1, Now: now})
	must(t, err)
	t.Cleanup(func() {
		_ = f.mgr.Close()
		_ = f.meta.Close()
	})
	must(t, f.mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: f.tp, Log: f.l}}, nil))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// copyAll runs the copy task: every rolled segment is tiered.
func (f *remoteFixture) copyAll() {
	f.t.Helper()
	_, err := f.mgr.RunCopy(context.Background(), f.tp)
	must(f.t, err)
}

// localLog returns the bytes of the local segment at base.
func (f *remoteFixture) localLog(base int64) []byte {
	f.t.Helper()
	file, err := f.fs.Open(fmt.Sprintf("p0/%020d.log", base))
	must(f.t, err)
	defer file.Close()
	b, err := io.ReadAll(file)
	must(f.t, err)
	return b
}

// segment returns the remote metadata of the segment holding offset.
func (f *remoteFixture) segment(offset int64) remote.SegmentMetadata {
	f.t.Helper()
	m, ok, err := f.mgr.FetchSegmentMetadata(f.tp, 0, offset)
	must(f.t, err)
	if !ok {
		f.t.Fatalf("no remote segment holds %d", offset)
	}
	return m
}

// key returns the key of object name ("manifest", "indexes",
// "data-000000") of the remote segment holding offset.
func (f *remoteFixture) key(offset int64, name string) string {
	f.t.Helper()
	m := f.segment(offset)
	prefix, err := f.storage.SegmentPrefix(&m)
	must(f.t, err)
	return prefix + name
}

// rewrite replaces the object under key with damage of its bytes, through
// the store's own API.
func (f *remoteFixture) rewrite(key string, damage func([]byte) []byte) {
	f.t.Helper()
	ctx := context.Background()
	b, err := objstore.ReadAll(ctx, f.store, key)
	must(f.t, err)
	b = damage(b)
	must(f.t, f.store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
}

// retier uploads the segment [5, 9] again under its own metadata with
// its .log and offset index replaced, as a data plane without the batch
// check would have: the chunk checksums and the manifest match the
// damaged bytes, so only the read's batch checks can object.
func (f *remoteFixture) retier(damageLog, damageIndex func([]byte) []byte) {
	f.t.Helper()
	m := f.segment(5)
	files, err := f.l.OpenSegment(5)
	must(f.t, err)
	defer files.Close()
	snapshot, err := f.l.ProducerSnapshot(10)
	must(f.t, err)
	logBytes, idx := f.localLog(5), bytes.Clone(files.OffsetIndex)
	if damageLog != nil {
		logBytes = damageLog(logBytes)
	}
	if damageIndex != nil {
		idx = damageIndex(idx)
	}
	_, err = f.storage.CopySegment(context.Background(), &m, remote.SegmentData{
		Log: bytes.NewReader(logBytes), LogSize: int64(len(logBytes)),
		OffsetIndex: idx, TimeIndex: files.TimeIndex, TxnIndex: files.TxnIndex,
		ProducerSnapshot: snapshot, LeaderEpochs: f.l.EpochEntriesInRange(-1, 10),
	})
	must(f.t, err)
}

// readAll reads every offset from 0 through the Manager, one batch each,
// and returns the first error and the offset it stopped at. A read that
// returns other bytes than the batch appended at that offset stops with
// errWrongRecords.
func (f *remoteFixture) readAll() (error, int64) {
	for off := int64(0); off < remoteRecords; off++ {
		res, err := f.mgr.Read(context.Background(), f.tp, off, 1, log.IsolationLogEnd, true)
		if err != nil {
			return err, off
		}
		if !bytes.Equal(res.Records, f.batches[off]) {
			return errWrongRecords, off
		}
	}
	return nil, remoteRecords
}

// readOutcome is the outcome of reading everything after a damage; a
// corruption error must carry the fetch offset it stopped at.
func (f *remoteFixture) readOutcome() outcome {
	err, to := f.readAll()
	var rce *remote.ReadCorruptionError
	if errors.As(err, &rce) && rce.Offset != to {
		f.t.Errorf("corruption error names offset %d, the read was at %d", rce.Offset, to)
	}
	return outcome{err: err, readableTo: to}
}

// batchPos returns the position of the batch at offset o in segment [5, 9].
func (f *remoteFixture) batchPos(o int64) int {
	pos := 0
	for off := int64(5); off < o; off++ {
		pos += len(f.batches[off])
	}
	return pos
}

// The manifest's layout (remote/storage_manifest.go): fixed fields, then
// the object sizes, the 33-byte chunks and the 21-byte indexes, then a
// CRC-32C of everything before it.
const (
	manifestObjectCountAt = 62
	manifestChunkCountAt  = 66
	manifestTablesAt      = 71
	manifestChunkLen      = 33
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// resealManifest applies edit to a manifest's body and recomputes its
// checksum, so only the manifest's consistency checks can object.
func resealManifest(edit func(body []byte)) func([]byte) []byte {
	return func(b []byte) []byte {
		body := b[:len(b)-4]
		edit(body)
		binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(body, castagnoli))
		return b
	}
}

func manifestChunksAt(body []byte) int {
	return manifestTablesAt + 8*int(binary.BigEndian.Uint32(body[manifestObjectCountAt:]))
}

func manifestIndexesAt(body []byte) int {
	return manifestChunksAt(body) + manifestChunkLen*int(binary.BigEndian.Uint32(body[manifestChunkCountAt:]))
}

// manifestBlocksAt is where a version 2 manifest's block checksums start,
// after the 21-byte indexes and the block size.
func manifestBlocksAt(body []byte) int {
	return manifestIndexesAt(body) + 21*int(body[70]) + 4
}

// objectRow is a row that damages an object of segment [5, 9] after the
// copy and reads everything back.
func objectRow(a area, damage string, want outcome, storeKind, object string, f func(*remoteFixture) func([]byte) []byte) row {
	return row{area: a, damage: damage, want: want, run: func(t *testing.T) outcome {
		fx := newRemoteFixture(t, storeKind)
		fx.copyAll()
		fx.rewrite(fx.key(5, object), f(fx))
		return fx.readOutcome()
	}}
}

func remoteRows() []row {
	corrupt := outcome{err: remote.ErrCorrupt, readableTo: 5}
	flip := func(at func(*remoteFixture, []byte) int) func(*remoteFixture) func([]byte) []byte {
		return func(fx *remoteFixture) func([]byte) []byte {
			return func(b []byte) []byte { b[at(fx, b)] ^= 0x20; return b }
		}
	}
	const data, indexes, manifest = "data-000000", "indexes", "manifest"
	fixed := func(g func([]byte) []byte) func(*remoteFixture) func([]byte) []byte {
		return func(*remoteFixture) func([]byte) []byte { return g }
	}
	return []row{
		// Objects whose bytes do not match their manifest.
		objectRow(areaRemote, "data byte flipped", corrupt, "mem", data,
			flip(func(fx *remoteFixture, _ []byte) int { return fx.batchPos(7) + record.HeaderSize })),
		objectRow(areaRemote, "data byte flipped (fs store)", corrupt, "fs", data,
			flip(func(fx *remoteFixture, _ []byte) int { return fx.batchPos(5) + 3 })),
		objectRow(areaRemote, "data object cut by one byte", corrupt, "mem", data,
			fixed(func(b []byte) []byte { return b[:len(b)-1] })),
		objectRow(areaRemote, "data object cut by one byte (fs store)", corrupt, "fs", data,
			fixed(func(b []byte) []byte { return b[:len(b)-1] })),
		objectRow(areaRemote, "data object emptied", corrupt, "mem", data,
			fixed(func([]byte) []byte { return nil })),
		objectRow(areaRemote, "data object extended by one byte", corrupt, "mem", data,
			fixed(func(b []byte) []byte { return append(b, 0) })),
		objectRow(areaRemote, "data object replaced by the next segment's", corrupt, "mem", data,
			func(fx *remoteFixture) func([]byte) []byte {
				next, err := objstore.ReadAll(context.Background(), fx.store, fx.key(10, data))
				must(fx.t, err)
				return func([]byte) []byte { return next }
			}),
		{area: areaRemote, damage: "data object deleted", want: outcome{err: remote.ErrSegmentDataNotFound, readableTo: 5},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				must(t, fx.store.Delete(context.Background(), fx.key(5, data)))
				return fx.readOutcome()
			}},
		objectRow(areaRemote, "offset index byte flipped", corrupt, "mem", indexes,
			flip(func(*remoteFixture, []byte) int { return 2 })),
		objectRow(areaRemote, "indexes object emptied", corrupt, "mem", indexes,
			fixed(func([]byte) []byte { return nil })),
		{area: areaRemote, damage: "indexes object cut by one byte (the producer batches, its last index)",
			want: outcome{err: remote.ErrCorrupt, readableTo: remoteRecords},
			run: func(t *testing.T) outcome {
				// Reads use only the offset index, so they go on; the
				// producer batches of the segment (the last index, after
				// the leader-epoch checkpoint) are refused.
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				fx.rewrite(fx.key(5, indexes), func(b []byte) []byte { return b[:len(b)-1] })
				m := fx.segment(5)
				_, err := fx.storage.FetchIndex(context.Background(), &m, remote.IndexProducerBatches)
				rerr, to := fx.readAll()
				if rerr != nil {
					t.Errorf("read at %d: %v", to, rerr)
				}
				return outcome{err: err, readableTo: to}
			}},
		// Segments whose bytes match their manifest but whose batches do
		// not check out: tiered without the copy's check.
		{area: areaRemote, damage: "batch crc broken, chunk checksums resealed", want: outcome{err: remote.ErrCorrupt, readableTo: 7},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				fx.retier(func(b []byte) []byte { b[fx.batchPos(7)+record.HeaderSize+2] ^= 1; return b }, nil)
				return fx.readOutcome()
			}},
		{area: areaRemote, damage: "batch base offset rewritten (outside the batch crc), resealed",
			want: outcome{err: remote.ErrCorrupt, readableTo: 7},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				fx.retier(func(b []byte) []byte { binary.BigEndian.PutUint64(b[fx.batchPos(7):], 2); return b }, nil)
				return fx.readOutcome()
			}},
		{area: areaRemote, damage: "batch length past the segment end, resealed", want: outcome{err: remote.ErrCorrupt, readableTo: 8},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				fx.retier(func(b []byte) []byte { binary.BigEndian.PutUint32(b[fx.batchPos(8)+8:], 1<<20); return b }, nil)
				return fx.readOutcome()
			}},
		{area: areaRemote, damage: "offset index entry pointing at the next batch, resealed",
			want: outcome{err: remote.ErrCorrupt, readableTo: 6},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				// The first batch of a segment has no entry (Kafka's
				// index interval rule), so entry 0 maps offset 6. It
				// takes entry 1's position and entry 1 goes: a read at 6
				// would start at the batch of 7 and skip 6.
				fx.retier(nil, func(idx []byte) []byte {
					copy(idx[4:8], idx[12:16])
					return append(idx[:8], idx[16:]...)
				})
				return fx.readOutcome()
			}},
		{area: areaRemote, damage: "local batch corrupt when the copy runs", want: outcome{err: remote.ErrCorruption, readableTo: 5},
			run: func(t *testing.T) outcome {
				// The copy refuses the segment: [0, 4] is tiered, the
				// rest stays local (a remote read at 5 is out of range).
				fx := newRemoteFixture(t, "mem")
				path := "p0/00000000000000000005.log"
				b := fx.localLog(5)
				b[fx.batchPos(6)+record.HeaderSize] ^= 1
				w, err := fx.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
				must(t, err)
				_, err = w.WriteAt(b, 0)
				must(t, err)
				must(t, w.Close())
				_, cerr := fx.mgr.RunCopy(context.Background(), fx.tp)
				var bce *remote.BatchCorruptionError
				if !errors.As(cerr, &bce) || bce.StartOffset != 5 || bce.Position != int64(fx.batchPos(6)) {
					t.Errorf("copy error %v does not name segment 5 and the batch at %d", cerr, fx.batchPos(6))
				}
				rerr, to := fx.readAll()
				if !errors.Is(rerr, remote.ErrOffsetOutOfRange) {
					t.Errorf("remote read at %d: %v, want out of range", to, rerr)
				}
				return outcome{err: cerr, readableTo: to}
			}},

		// Layout version 3: the checksums are trailers of the data
		// object's blocks (the segment is one block), the reads find
		// the bytes through the locator in the metadata.
		objectRow(areaRemote, "v3 data byte flipped", corrupt, "mem/v3", data,
			flip(func(fx *remoteFixture, _ []byte) int { return fx.batchPos(7) + record.HeaderSize })),
		objectRow(areaRemote, "v3 data block trailer flipped (fs store)", corrupt, "fs/v3", data,
			flip(func(_ *remoteFixture, b []byte) int { return len(b) - 2 })),
		objectRow(areaRemote, "v3 data object cut by one byte", corrupt, "mem/v3", data,
			fixed(func(b []byte) []byte { return b[:len(b)-1] })),
		objectRow(areaRemote, "v3 data object extended by one byte", corrupt, "mem/v3", data,
			fixed(func(b []byte) []byte { return append(b, 0) })),
		objectRow(areaRemote, "v3 data object replaced by the next segment's", corrupt, "mem/v3", data,
			func(fx *remoteFixture) func([]byte) []byte {
				next, err := objstore.ReadAll(context.Background(), fx.store, fx.key(10, data))
				must(fx.t, err)
				return func([]byte) []byte { return next }
			}),
		objectRow(areaRemote, "v3 offset index byte flipped", corrupt, "mem/v3", indexes,
			flip(func(*remoteFixture, []byte) int { return 2 })),
		{area: areaRemote, damage: "v3 data object deleted", want: outcome{err: remote.ErrSegmentDataNotFound, readableTo: 5},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem/v3")
				fx.copyAll()
				must(t, fx.store.Delete(context.Background(), fx.key(5, data)))
				return fx.readOutcome()
			}},
		{area: areaManifest, damage: "v3 manifest deleted: reads with the locator do not need it", want: outcome{readableTo: remoteRecords},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem/v3")
				fx.copyAll()
				must(t, fx.store.Delete(context.Background(), fx.key(5, manifest)))
				return fx.readOutcome()
			}},

		// Manifests.
		objectRow(areaManifest, "manifest byte flipped", corrupt, "mem", manifest,
			flip(func(_ *remoteFixture, b []byte) int { return len(b) / 2 })),
		objectRow(areaManifest, "manifest byte flipped (fs store)", corrupt, "fs", manifest,
			flip(func(*remoteFixture, []byte) int { return 30 })),
		objectRow(areaManifest, "manifest cut by one byte", corrupt, "mem", manifest,
			fixed(func(b []byte) []byte { return b[:len(b)-1] })),
		objectRow(areaManifest, "manifest extended by one byte", corrupt, "mem", manifest,
			fixed(func(b []byte) []byte { return append(b, 0) })),
		objectRow(areaManifest, "manifest emptied", corrupt, "mem", manifest,
			fixed(func([]byte) []byte { return nil })),
		objectRow(areaManifest, "manifest of the next segment", corrupt, "mem", manifest,
			func(fx *remoteFixture) func([]byte) []byte {
				next, err := objstore.ReadAll(context.Background(), fx.store, fx.key(10, manifest))
				must(fx.t, err)
				return func([]byte) []byte { return next }
			}),
		{area: areaManifest, damage: "manifest deleted", want: outcome{err: remote.ErrSegmentDataNotFound, readableTo: 5},
			run: func(t *testing.T) outcome {
				fx := newRemoteFixture(t, "mem")
				fx.copyAll()
				must(t, fx.store.Delete(context.Background(), fx.key(5, manifest)))
				return fx.readOutcome()
			}},
		objectRow(areaManifest, "manifest of an unknown version 3, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[4] = 3 }))),
		// The fixture's segments are uncompressed and longer than a block,
		// so their manifests are version 2, with block checksums.
		objectRow(areaManifest, "manifest version 2 relabelled 1 (its block table left over), resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[4] = 1 }))),
		objectRow(areaManifest, "manifest block size of a whole chunk, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) {
				binary.BigEndian.PutUint32(body[manifestBlocksAt(body)-4:], binary.BigEndian.Uint32(body[58:]))
			}))),
		objectRow(areaManifest, "manifest first block checksum flipped, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestBlocksAt(body)] ^= 1 }))),
		objectRow(areaManifest, "manifest start offset of another segment, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { binary.BigEndian.PutUint64(body[42:], 10) }))),
		objectRow(areaManifest, "manifest partition of another partition, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { binary.BigEndian.PutUint32(body[22:], 1) }))),
		objectRow(areaManifest, "manifest segment id of another segment, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[26] ^= 1 }))),
		objectRow(areaManifest, "manifest log size one more, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[57]++ }))),
		objectRow(areaManifest, "manifest chunk length not summing to the log size, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestChunksAt(body)+11]-- }))),
		objectRow(areaManifest, "manifest chunk stored offset out of order, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestChunksAt(body)+20] = 1 }))),
		objectRow(areaManifest, "manifest object size not the chunks' end, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestTablesAt+7]++ }))),
		objectRow(areaManifest, "manifest index offsets out of order, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestIndexesAt(body)+21+8]++ }))),
		objectRow(areaManifest, "manifest index types out of order, resealed", corrupt, "mem", manifest,
			fixed(resealManifest(func(body []byte) { body[manifestIndexesAt(body)+21] = 1 }))),
	}
}
