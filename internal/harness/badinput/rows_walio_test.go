package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// Rows for the diskless WAL's produce and fetch paths: damaged client
// batches through wal.Writer.Produce, and damaged objects or lying
// coordinates through wal.Reader.Fetch.
const (
	areaWALProduce area = "wal produce request"
	areaWALFetch   area = "wal fetch"
)

func init() { rowSets = append(rowSets, walProduceRows, walFetchRows) }

// walIO is a writer and a reader on a mem store and a Pebble control
// plane with one partition, walTP.
type walIO struct {
	store *mem.Mem
	cp    wal.ControlPlane
	w     *wal.Writer
}

func newWALIO(t *testing.T, wrap func(wal.ControlPlane) wal.ControlPlane) *walIO {
	t.Helper()
	cp := walOpen(t, vfs.NewMem())
	t.Cleanup(func() { _ = cp.Close() })
	if err := cp.CreatePartitions(context.Background(), []wal.CreatePartitionsRequest{{TopicID: walTP.TopicID, Topic: "t", NumPartitions: 1}}); err != nil {
		t.Fatal(err)
	}
	io := &walIO{store: mem.New(mem.Options{}), cp: cp}
	if wrap != nil {
		io.cp = wrap(cp)
	}
	// MaxBytes 1: every call is its own object, sealed at once.
	w, err := wal.NewWriter(wal.WriterOptions{Store: io.store, ControlPlane: io.cp, MaxBytes: 1, MaxMessageBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	io.w = w
	return io
}

// produce sends one request for walTP and returns its error: the
// request's own, else its first batch's.
func (io *walIO) produce(t *testing.T, batches []byte) error {
	t.Helper()
	res, err := io.w.Produce(context.Background(), []wal.ProduceRequest{{Partition: walTP, Batches: batches}})
	switch {
	case err != nil:
		return err
	case res[0].Err != nil:
		return res[0].Err
	case len(res[0].Batches) > 0:
		return res[0].Batches[0].Err
	}
	return nil
}

func walClientBatch(t *testing.T, opts record.BuilderOptions, n int, value string) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(int64(i), nil, []byte(value))
	}
	buf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// resealCRC recomputes a batch's CRC after a header edit, so that only
// the edited field is wrong.
func resealCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func walProduceRow(damage string, want error, edit func(t *testing.T) []byte) row {
	return row{area: areaWALProduce, damage: damage, want: outcome{err: want, readableTo: -1},
		run: func(t *testing.T) outcome {
			return outcome{err: newWALIO(t, nil).produce(t, edit(t)), readableTo: -1}
		}}
}

func walProduceRows() []row {
	plain := record.DefaultBuilderOptions()
	good := func(t *testing.T) []byte { return walClientBatch(t, plain, 3, "v") }
	return []row{
		walProduceRow("a good batch", nil, good),
		walProduceRow("flipped bit in a record (crc)", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			b[len(b)-2] ^= 1
			return b
		}),
		walProduceRow("batch cut short", wal.ErrCorruption, func(t *testing.T) []byte { b := good(t); return b[:len(b)-4] }),
		walProduceRow("garbage", wal.ErrCorruption, func(t *testing.T) []byte {
			return bytes.Repeat([]byte{0x7f}, 80)
		}),
		walProduceRow("length below the header", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			binary.BigEndian.PutUint32(b[8:], 10)
			return b
		}),
		walProduceRow("records count beyond the offsets (crc resealed)", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			binary.BigEndian.PutUint32(b[57:], 9)
			return resealCRC(b)
		}),
		walProduceRow("magic 1", wal.ErrCorruption, func(t *testing.T) []byte { b := good(t); b[16] = 1; return b }),
		walProduceRow("base offset 5 from a client", wal.ErrInvalidRecord, func(t *testing.T) []byte {
			b := good(t)
			binary.BigEndian.PutUint64(b, 5)
			return b
		}),
		walProduceRow("control batch from a client", wal.ErrInvalidRecord, func(t *testing.T) []byte {
			o := plain
			o.Control = true
			return walClientBatch(t, o, 1, "c")
		}),
		walProduceRow("batch above max.message.bytes", wal.ErrRecordTooLarge, func(t *testing.T) []byte {
			return walClientBatch(t, plain, 20, "a value long enough to pass the limit")
		}),
		walProduceRow("transactional batch", wal.ErrTransactionalBatch, func(t *testing.T) []byte {
			o := plain
			o.Transactional, o.ProducerID, o.ProducerEpoch, o.BaseSequence = true, 4, 0, 0
			return walClientBatch(t, o, 1, "tx")
		}),
		walProduceRow("good batch then a torn one", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			return append(b, b[:30]...)
		}),
		walProduceRow("two good batches", nil, func(t *testing.T) []byte { return append(good(t), good(t)...) }),
		walProduceRow("negative last offset delta (crc resealed)", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
			return resealCRC(b)
		}),
		walProduceRow("unknown compression codec (crc resealed)", wal.ErrCorruption, func(t *testing.T) []byte {
			b := good(t)
			b[22] |= 0x07
			return resealCRC(b)
		}),
		walProduceRow("lz4 payload garbage (crc resealed)", wal.ErrCorruption, func(t *testing.T) []byte {
			o := plain
			o.Compression = record.CompressionLZ4
			b := walClientBatch(t, o, 5, "compressible compressible compressible")
			for i := record.HeaderSize; i < len(b); i++ {
				b[i] = 0xa5
			}
			return resealCRC(b)
		}),
		walProduceRow("idempotent batch out of sequence", wal.ErrOutOfOrderSequence, func(t *testing.T) []byte {
			o := plain
			o.ProducerID, o.ProducerEpoch, o.BaseSequence = 9, 0, 5
			return walClientBatch(t, o, 1, "seq")
		}),
		{area: areaWALProduce, damage: "idempotent batch sent twice", want: outcome{err: wal.ErrDuplicateSequence, readableTo: -1},
			run: func(t *testing.T) outcome {
				io := newWALIO(t, nil)
				o := plain
				o.ProducerID, o.ProducerEpoch, o.BaseSequence = 9, 0, 0
				b := walClientBatch(t, o, 2, "dup")
				if err := io.produce(t, b); err != nil {
					t.Fatal(err)
				}
				return outcome{err: io.produce(t, b), readableTo: -1}
			}},
		{area: areaWALProduce, damage: "unknown partition", want: outcome{err: wal.ErrUnknownTopicOrPartition, readableTo: -1},
			run: func(t *testing.T) outcome {
				io := newWALIO(t, nil)
				res, err := io.w.Produce(context.Background(), []wal.ProduceRequest{
					{Partition: wal.TopicIDPartition{TopicID: walTP.TopicID, Partition: 7}, Batches: good(t)}})
				if err == nil {
					err = res[0].Batches[0].Err
				}
				return outcome{err: err, readableTo: -1}
			}},
		{area: areaWALProduce, damage: "commit answer with fewer results than batches", want: outcome{err: wal.ErrInconsistentAnswer, readableTo: -1},
			run: func(t *testing.T) outcome {
				io := newWALIO(t, func(cp wal.ControlPlane) wal.ControlPlane { return shortAnswerCP{cp} })
				return outcome{err: io.produce(t, good(t)), readableTo: -1}
			}},
	}
}

// shortAnswerCP drops the results of every commit.
type shortAnswerCP struct{ wal.ControlPlane }

func (c shortAnswerCP) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	res, err := c.ControlPlane.CommitFile(ctx, req)
	res.Batches = nil
	return res, err
}

func (c shortAnswerCP) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	return wal.CommitEach(ctx, c, reqs)
}

// lyingFindCP edits the coordinates FindBatches answers.
type lyingFindCP struct {
	wal.ControlPlane
	lie func(*wal.BatchInfo)
}

func (c lyingFindCP) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	res, err := c.ControlPlane.FindBatches(ctx, req)
	for i := range res {
		for j := range res[i].Batches {
			c.lie(&res[i].Batches[j])
		}
	}
	return res, err
}

// walFetch produces two batches of 2 records each into one object, lets
// damage edit the store or wrap the control plane, fetches walTP from 0
// and reports the error and the records served.
func walFetch(t *testing.T, damage func(io *walIO, key string, batchSize int) wal.ControlPlane) outcome {
	t.Helper()
	io := newWALIO(t, nil)
	b := walClientBatch(t, record.DefaultBuilderOptions(), 2, "f")
	if err := io.produce(t, append(append([]byte(nil), b...), b...)); err != nil {
		t.Fatal(err)
	}
	cp := damage(io, io.store.Keys()[0], len(b))
	if cp == nil {
		cp = io.cp
	}
	r, err := wal.NewReader(wal.ReaderOptions{Store: io.store, ControlPlane: cp})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Fetch(context.Background(), wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: walTP, MaxPartitionBytes: 1 << 20}}})
	if err != nil {
		return outcome{err: err, readableTo: 0}
	}
	n := int64(0)
	s := record.NewScanner(res[0].Records, record.ScannerOptions{})
	for s.Next() {
		if s.Batch().BaseOffset() != n {
			t.Fatalf("batch at offset %d, want %d", s.Batch().BaseOffset(), n)
		}
		n = s.Batch().NextOffset()
	}
	return outcome{err: res[0].Err, readableTo: n}
}

func editObject(t *testing.T, io *walIO, key string, edit func([]byte) []byte) {
	data, err := objstore.ReadAll(context.Background(), io.store, key)
	if err != nil {
		t.Fatal(err)
	}
	data = edit(data)
	if err := io.store.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func walFetchRow(damage string, want outcome, edit func([]byte, int) []byte) row {
	return row{area: areaWALFetch, damage: damage, want: want, run: func(t *testing.T) outcome {
		return walFetch(t, func(io *walIO, key string, size int) wal.ControlPlane {
			editObject(t, io, key, func(d []byte) []byte { return edit(d, size) })
			return nil
		})
	}}
}

func walStoreFaultRow(damage string, f mem.Faults) row {
	return row{area: areaWALFetch, damage: damage, want: outcome{err: wal.ErrObjectRead, readableTo: 0}, run: func(t *testing.T) outcome {
		return walFetch(t, func(io *walIO, _ string, _ int) wal.ControlPlane {
			io.store.SetFaults(mem.FaultConfig{Get: f})
			return nil
		})
	}}
}

func walLieRow(damage string, want error, lie func(*wal.BatchInfo)) row {
	return row{area: areaWALFetch, damage: damage, want: outcome{err: want, readableTo: 0}, run: func(t *testing.T) outcome {
		return walFetch(t, func(io *walIO, _ string, _ int) wal.ControlPlane { return lyingFindCP{io.cp, lie} })
	}}
}

func walFetchRows() []row {
	return []row{
		walFetchRow("intact object", outcome{readableTo: 4}, func(d []byte, _ int) []byte { return d }),
		walFetchRow("second batch's record flipped: the first is served", outcome{readableTo: 2},
			func(d []byte, size int) []byte { d[2*size-2] ^= 1; return d }),
		walFetchRow("first batch's record flipped", outcome{err: wal.ErrCorruption, readableTo: 0},
			func(d []byte, size int) []byte { d[size-2] ^= 1; return d }),
		walFetchRow("object cut inside the first batch", outcome{err: wal.ErrCorruption, readableTo: 0},
			func(d []byte, _ int) []byte { return d[:20] }),
		walFetchRow("object replaced by garbage", outcome{err: wal.ErrCorruption, readableTo: 0},
			func(d []byte, _ int) []byte { return bytes.Repeat([]byte{0xee}, len(d)) }),
		{area: areaWALFetch, damage: "object deleted under the coordinates", want: outcome{err: objstore.ErrNotExist, readableTo: 0},
			run: func(t *testing.T) outcome {
				return walFetch(t, func(io *walIO, key string, _ int) wal.ControlPlane {
					if err := io.store.Delete(context.Background(), key); err != nil {
						t.Fatal(err)
					}
					return nil
				})
			}},
		walFetchRow("object cut inside the second batch: the first is served", outcome{readableTo: 2},
			func(d []byte, size int) []byte { return d[:size+10] }),
		{area: areaWALFetch, damage: "second batch's coordinates shifted: the first is served", want: outcome{readableTo: 2},
			run: func(t *testing.T) outcome {
				return walFetch(t, func(io *walIO, _ string, _ int) wal.ControlPlane {
					return lyingFindCP{io.cp, func(b *wal.BatchInfo) {
						if b.BaseOffset > 0 {
							b.ByteOffset++
						}
					}}
				})
			}},
		walStoreFaultRow("store fails every GET", mem.Faults{ErrorRate: 1}),
		walStoreFaultRow("store body ends early with a clean EOF", mem.Faults{LieRate: 1}),
		walStoreFaultRow("store body cut with an error", mem.Faults{TruncateRate: 1}),
		walLieRow("coordinates one byte too long", wal.ErrCorruption, func(b *wal.BatchInfo) { b.Size++ }),
		walLieRow("coordinates shifted by a byte", wal.ErrCorruption, func(b *wal.BatchInfo) { b.ByteOffset++ }),
		walLieRow("coordinates claim more offsets than the batch", wal.ErrCorruption, func(b *wal.BatchInfo) { b.LastOffset += 5 }),
		walLieRow("coordinates past the object's end", wal.ErrCorruption, func(b *wal.BatchInfo) { b.Size = 1 << 20 }),
		walLieRow("negative byte offset", wal.ErrInconsistentAnswer, func(b *wal.BatchInfo) { b.ByteOffset = -1 }),
		walLieRow("last offset below the base offset", wal.ErrInconsistentAnswer, func(b *wal.BatchInfo) { b.LastOffset = b.BaseOffset - 2 }),
		walLieRow("unknown object key", wal.ErrObjectRead, func(b *wal.BatchInfo) { b.ObjectKey = "wal/none" }),
	}
}
