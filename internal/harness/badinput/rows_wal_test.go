package badinput

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// Rows for the diskless WAL's embedded control plane: hostile commit
// requests, and damaged values in its Pebble database (written with Pebble
// directly, under the key layout wal/pebblecp documents).
const (
	areaWALCommit area = "wal commit request"
	areaWALState  area = "wal control-plane state"
	areaWALObject area = "wal object"
)

func init() { rowSets = append(rowSets, walRows, walObjectRows) }

// walObject builds a WAL object of two partitions' batches.
func walObject(t *testing.T) []byte {
	t.Helper()
	var o wal.ObjectBuilder
	for i, tp := range []wal.TopicIDPartition{walTP, {TopicID: wal.TopicID{1}, Partition: 3}, walTP} {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(int64(i), nil, []byte("value"))
		buf, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Add(tp, buf); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := o.Build()
	return data
}

func walObjectRow(damage string, edit func(data []byte) []byte) row {
	return row{area: areaWALObject, damage: damage, want: outcome{err: wal.ErrCorruption, readableTo: -1},
		run: func(t *testing.T) outcome {
			_, err := wal.ParseObject(edit(walObject(t)))
			return outcome{err: err, readableTo: -1}
		}}
}

func walObjectRows() []row {
	return []row{
		walObjectRow("shorter than the trailer", func(d []byte) []byte { return d[:10] }),
		walObjectRow("garbage", func(d []byte) []byte { return []byte(strings.Repeat("garbage!", 20)) }),
		walObjectRow("footer cut off", func(d []byte) []byte { return d[:len(d)-30] }),
		walObjectRow("flipped bit in a base offset (outside the batch crc)", func(d []byte) []byte { d[3] ^= 1; return d }),
		walObjectRow("flipped bit in a record", func(d []byte) []byte { d[70] ^= 1; return d }),
		walObjectRow("run count beyond the object", func(d []byte) []byte {
			binary.BigEndian.PutUint32(d[len(d)-18:], 1<<30)
			return d
		}),
		walObjectRow("unknown format version", func(d []byte) []byte { d[len(d)-14] = 9; return d }),
	}
}

var walTP = wal.TopicIDPartition{TopicID: wal.TopicID{0xab}, Partition: 0}

func walOpen(t *testing.T, fs vfs.FS) *pebblecp.ControlPlane {
	t.Helper()
	cp, err := pebblecp.Open(fs, "cp", pebblecp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// walSeeded returns a file system holding a control plane with one
// partition, one committed object of two batches and one idempotent
// producer.
func walSeeded(t *testing.T) vfs.FS {
	t.Helper()
	ctx := context.Background()
	fs := vfs.NewMem()
	cp := walOpen(t, fs)
	defer cp.Close()
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: walTP.TopicID, Topic: "t", NumPartitions: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CommitFile(ctx, walRequest()); err != nil {
		t.Fatal(err)
	}
	return fs
}

func walRequest() wal.CommitFileRequest {
	b := wal.CommitBatch{Partition: walTP, Size: 10, LastOffset: 4, RecordCount: 5, ProducerID: 1, ProducerEpoch: 0}
	c := b
	c.ByteOffset, c.BaseSequence = 10, 5
	return wal.CommitFileRequest{ObjectKey: "wal/a", ObjectSize: 20, Batches: []wal.CommitBatch{b, c}}
}

// walDamage rewrites, with Pebble directly, the value of the first key
// with the given first byte.
func walDamage(t *testing.T, fs vfs.FS, tag byte, damage func(key, v []byte) []byte) {
	t.Helper()
	db, err := pebble.Open("cp", &pebble.Options{FS: fs, Logger: walQuietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tag}, UpperBound: []byte{tag + 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatalf("no key with tag %q", tag)
	}
	key := append([]byte(nil), it.Key()...)
	v := damage(key, append([]byte(nil), it.Value()...))
	_ = it.Close()
	if err := db.Set(key, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// walQuietPebble drops Pebble's log lines (the rows open a database directly).
type walQuietPebble struct{}

func (walQuietPebble) Infof(string, ...any)  {}
func (walQuietPebble) Errorf(string, ...any) {}
func (walQuietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func walCommitRow(damage string, want error, edit func(r *wal.CommitFileRequest)) row {
	return row{area: areaWALCommit, damage: damage, want: outcome{err: want, readableTo: -1},
		run: func(t *testing.T) outcome {
			cp := walOpen(t, walSeeded(t))
			defer cp.Close()
			req := walRequest()
			req.ObjectKey = "wal/b"
			edit(&req)
			_, err := cp.CommitFile(context.Background(), req)
			return outcome{err: err, readableTo: -1}
		}}
}

func walStateRow(damage string, tag byte, edit func(key, v []byte) []byte, query func(cp *pebblecp.ControlPlane) error) row {
	return row{area: areaWALState, damage: damage, want: outcome{err: wal.ErrCorruption, readableTo: -1},
		run: func(t *testing.T) outcome {
			fs := walSeeded(t)
			walDamage(t, fs, tag, edit)
			cp := walOpen(t, fs)
			defer cp.Close()
			return outcome{err: query(cp), readableTo: -1}
		}}
}

func walRows() []row {
	ctx := context.Background()
	logInfo := func(cp *pebblecp.ControlPlane) error { _, err := cp.LogInfo(ctx, walTP); return err }
	find := func(cp *pebblecp.ControlPlane) error {
		res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
			Partitions: []wal.FindPartition{{Partition: walTP, MaxPartitionBytes: 1 << 20}}})
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	retry := func(cp *pebblecp.ControlPlane) error { _, err := cp.CommitFile(ctx, walRequest()); return err }
	producers := func(cp *pebblecp.ControlPlane) error { _, err := cp.ProducerStates(ctx, walTP); return err }
	flip := func(i int) func(_, v []byte) []byte {
		return func(_, v []byte) []byte { v[i%len(v)] ^= 0x40; return v }
	}
	return []row{
		walCommitRow("batch of size 0", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.Batches[1].Size = 0 }),
		walCommitRow("overlapping batches", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.Batches[1].ByteOffset = 9 }),
		walCommitRow("batch past the object end", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.ObjectSize = 19 }),
		walCommitRow("more records than offsets", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.Batches[0].RecordCount = 6 }),
		walCommitRow("negative base offset", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.Batches[0].BaseOffset = -3 }),
		walCommitRow("empty object key", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.ObjectKey = "" }),
		walCommitRow("object key over 1024 bytes", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.ObjectKey = strings.Repeat("k", 1025) }),
		walCommitRow("unknown timestamp type", wal.ErrInvalidArgument, func(r *wal.CommitFileRequest) { r.Batches[0].TimestampType = 9 }),
		walCommitRow("committed key reused with other batches", wal.ErrObjectKeyReused, func(r *wal.CommitFileRequest) {
			r.ObjectKey, r.Batches[0].MaxTimestamp = "wal/a", 77
		}),
		{area: areaWALCommit, damage: "seal below the classic log start", want: outcome{err: wal.ErrInvalidArgument, readableTo: -1},
			run: func(t *testing.T) outcome {
				cp := walOpen(t, vfs.NewMem())
				defer cp.Close()
				res, err := cp.InitDisklessLog(ctx, []wal.InitDisklessLogRequest{{Partition: walTP, LogStartOffset: 200, DisklessStartOffset: 100}})
				if err == nil {
					err = res[0].Err
				}
				return outcome{err: err, readableTo: -1}
			}},
		walStateRow("log row with a flipped byte", 'L', flip(3), logInfo),
		walStateRow("log row truncated", 'L', func(_, v []byte) []byte { return v[:len(v)/2] }, logInfo),
		walStateRow("batch value with a flipped byte", 'B', flip(20), find),
		walStateRow("batch value of another kind", 'B', func(_, v []byte) []byte {
			v[1] = 1 // the log row's kind, with the checksum fixed up
			return binary.BigEndian.AppendUint32(v[:len(v)-4], walCRC32C(v[:len(v)-4]))
		}, find),
		walStateRow("file row garbage", 'F', func(_, v []byte) []byte { return []byte("garbage") }, retry),
		walStateRow("producer state with an impossible batch count", 'P', func(_, v []byte) []byte {
			v[2+8+2] = 200 // after version, kind, producer id and epoch
			return binary.BigEndian.AppendUint32(v[:len(v)-4], walCRC32C(v[:len(v)-4]))
		}, producers),
		{area: areaWALState, damage: "unknown format version", want: outcome{err: wal.ErrCorruption, readableTo: -1},
			run: func(t *testing.T) outcome {
				fs := walSeeded(t)
				walDamage(t, fs, 0x00, func(_, v []byte) []byte { return []byte{0, 0, 0, 9} })
				_, err := pebblecp.Open(fs, "cp", pebblecp.Options{})
				return outcome{err: err, readableTo: -1}
			}},
	}
}

func walCRC32C(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
