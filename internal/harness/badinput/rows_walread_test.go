package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// Rows for the WAL read path with two partitions: objects whose bytes no
// longer match their commit (replaced under the key by another valid
// object, runs swapped, a leader epoch or a record flipped, cut short) and
// FindBatches answers that lie (gaps, overlaps, another partition's
// batch, the same range twice, past the object's end). The promise: the
// damaged partition gets a typed error or its good prefix, never another
// partition's or batch's records, and the partition the damage does not
// touch is served whole.
const areaWALRead = area("wal read")

func init() { rowSets = append(rowSets, walReadRows) }

// walReadEnv holds two objects of two partitions, produced through a
// wal.Writer into a Pebble control plane. Object 1: partition 0's
// batches 0 and 1, then partition 1's batches 0 and 1 (runs of equal
// length); object 2: batch 2 of each. Every batch holds two records of
// equal size, so every batch has the same length and offset count and a
// batch put where another belongs passes every check but the binding.
type walReadEnv struct {
	store *mem.Mem
	cp    wal.ControlPlane
	// keys are the two objects' keys, data their bytes as uploaded.
	keys [2]string
	data [2][]byte
	// size is one batch's length.
	size int
	// values[p][o] is the value committed at offset o of partition p.
	values [2][]string
	// batches[p][b] is batch b of partition p as uploaded.
	batches [2][][]byte
}

var walReadTPs = [2]wal.TopicIDPartition{{TopicID: wal.TopicID{0xad}, Partition: 0}, {TopicID: wal.TopicID{0xad}, Partition: 1}}

// walReadBatch is batch b of partition p: two records "<tag><p>-b<b>-r<i>".
func walReadBatch(t *testing.T, tag string, p, b int) []byte {
	t.Helper()
	bld := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range 2 {
		bld.Add(1000, nil, fmt.Appendf(nil, "%s%d-b%d-r%d", tag, p, b, i))
	}
	buf, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func newWALReadEnv(t *testing.T) *walReadEnv {
	t.Helper()
	ctx := context.Background()
	cp := walOpen(t, vfs.NewMem())
	t.Cleanup(func() { _ = cp.Close() })
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: walReadTPs[0].TopicID, Topic: "r", NumPartitions: 2}}); err != nil {
		t.Fatal(err)
	}
	e := &walReadEnv{store: mem.New(mem.Options{}), cp: cp}
	w, err := wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: cp, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	for o, batches := range [][]int{{0, 1}, {2}} {
		var reqs []wal.ProduceRequest
		for p := range 2 {
			var buf []byte
			for _, b := range batches {
				one := walReadBatch(t, "p", p, b)
				e.size = len(one)
				buf = append(buf, one...)
			}
			reqs = append(reqs, wal.ProduceRequest{Partition: walReadTPs[p], Batches: buf})
		}
		res, err := w.Produce(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for p, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for i, b := range batches {
				if r.Batches[i].Err != nil || r.Batches[i].BaseOffset != int64(2*b) {
					t.Fatalf("partition %d batch %d: %+v", p, b, r.Batches[i])
				}
				e.values[p] = append(e.values[p], fmt.Sprintf("p%d-b%d-r0", p, b), fmt.Sprintf("p%d-b%d-r1", p, b))
			}
		}
		for _, k := range e.store.Keys() {
			if o == 0 || k != e.keys[0] {
				e.keys[o] = k
			}
		}
		data, err := objstore.ReadAll(ctx, e.store, e.keys[o])
		if err != nil {
			t.Fatal(err)
		}
		e.data[o] = data
	}
	// The layout: object 1 holds partition 0's batches 0 and 1, then
	// partition 1's; object 2 batch 2 of each.
	for p := range 2 {
		for b := range 2 {
			at := (2*p + b) * e.size
			e.batches[p] = append(e.batches[p], e.data[0][at:at+e.size])
		}
		e.batches[p] = append(e.batches[p], e.data[1][p*e.size:(p+1)*e.size])
	}
	return e
}

func (e *walReadEnv) put(t *testing.T, o int, data []byte) {
	t.Helper()
	if err := e.store.Put(context.Background(), e.keys[o], bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fetch reads both partitions from offset 0 through a wal.Reader over cp
// and returns, per partition, its error and how many offsets it served
// as committed. A served record that is not the one committed at its
// offset, or a batch that does not start where the last one ended, fails
// the row.
func (e *walReadEnv) fetch(t *testing.T, cp wal.ControlPlane) [2]outcome {
	t.Helper()
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: cp})
	if err != nil {
		t.Fatal(err)
	}
	req := wal.FindBatchesRequest{MaxBytes: 1 << 20}
	for _, tp := range walReadTPs {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: tp, MaxPartitionBytes: 1 << 20})
	}
	res, err := r.Fetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]outcome
	for p, fr := range res {
		n := int64(0)
		s := record.NewScanner(fr.Records, record.ScannerOptions{})
		it := record.NewIter(record.IterOptions{})
	scan:
		for s.Next() {
			b := s.Batch()
			if b.BaseOffset() != n {
				t.Errorf("partition %d: batch served at offset %d after offset %d: a gap or an overlap", p, b.BaseOffset(), n-1)
				break
			}
			if want := e.batches[p][min(int(n/2), 2)]; !bytes.Equal(b.Bytes()[8:], want[8:]) {
				t.Errorf("partition %d: batch served at offset %d (crc %08x, leader epoch %d) is not the one committed there (crc %08x, leader epoch %d)",
					p, n, b.CRC(), b.PartitionLeaderEpoch(), binary.BigEndian.Uint32(want[17:]), int32(binary.BigEndian.Uint32(want[12:])))
				break
			}
			it.Reset(b)
			for it.Next() {
				o := b.BaseOffset() + int64(it.Record().OffsetDelta)
				if o >= int64(len(e.values[p])) || string(it.Record().Value) != e.values[p][o] {
					want := "nothing"
					if o < int64(len(e.values[p])) {
						want = fmt.Sprintf("%q", e.values[p][o])
					}
					t.Errorf("partition %d offset %d: served %q, committed %s", p, o, it.Record().Value, want)
					break scan
				}
			}
			if it.Err() != nil {
				t.Errorf("partition %d: %v", p, it.Err())
				break
			}
			n = b.NextOffset()
		}
		if len(fr.Records) > 0 && fr.Err != nil {
			t.Errorf("partition %d: records served with the error %v", p, fr.Err)
		}
		out[p] = outcome{err: fr.Err, readableTo: n}
	}
	return out
}

// walReadRow: edit damages the environment (and may return a lying
// control plane); the row's outcome is partition p's, and every
// partition in whole must be served whole (6 offsets) with no error.
func walReadRow(damage string, want outcome, p int, whole []int, edit func(t *testing.T, e *walReadEnv) wal.ControlPlane) row {
	return row{area: areaWALRead, damage: damage, want: want, run: func(t *testing.T) outcome {
		e := newWALReadEnv(t)
		cp := edit(t, e)
		if cp == nil {
			cp = e.cp
		}
		got := e.fetch(t, cp)
		for _, q := range whole {
			if got[q].err != nil || got[q].readableTo != 6 {
				t.Errorf("partition %d, untouched by the damage: got error %v and %d of 6 offsets; want all", q, got[q].err, got[q].readableTo)
			}
		}
		return got[p]
	}}
}

// walReadStoreRow is a walReadRow that edits object o's bytes.
func walReadStoreRow(damage string, want outcome, p int, whole []int, o int, edit func(e *walReadEnv, d []byte) []byte) row {
	return walReadRow(damage, want, p, whole, func(t *testing.T, e *walReadEnv) wal.ControlPlane {
		e.put(t, o, edit(e, slices.Clone(e.data[o])))
		return nil
	})
}

// walReadLieRow edits partition 0's answers with lie.
func walReadLieRow(damage string, want outcome, lie func(e *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo) row {
	return walReadRow(damage, want, 0, []int{1}, func(t *testing.T, e *walReadEnv) wal.ControlPlane {
		return walReadLiar{ControlPlane: e.cp, lie: func(bs []wal.BatchInfo) []wal.BatchInfo { return lie(e, bs) }}
	})
}

// walReadLiar edits the batches FindBatches answers for partition 0.
type walReadLiar struct {
	wal.ControlPlane
	lie func([]wal.BatchInfo) []wal.BatchInfo
}

func (l walReadLiar) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	res, err := l.ControlPlane.FindBatches(ctx, req)
	for i := range res {
		if req.Partitions[i].Partition == walReadTPs[0] && len(res[i].Batches) == 3 {
			res[i].Batches = l.lie(res[i].Batches)
		}
	}
	return res, err
}

func walReadRows() []row {
	none := outcome{readableTo: 6}
	corrupt := outcome{err: wal.ErrCorruption, readableTo: 0}
	prefix := func(n int64) outcome { return outcome{readableTo: n} }
	epochByte := func(e *walReadEnv, batch int) int { return batch*e.size + 12 + 3 }
	return []row{
		walReadStoreRow("intact objects", none, 0, []int{1}, 0, func(_ *walReadEnv, d []byte) []byte { return d }),
		walReadRow("object replaced under its key by another valid object of the same layout", corrupt, 0, nil,
			func(t *testing.T, e *walReadEnv) wal.ControlPlane {
				var o wal.ObjectBuilder
				for p := range 2 {
					for b := range 2 {
						if err := o.Add(walReadTPs[p], walReadBatch(t, "x", p, b)); err != nil {
							t.Fatal(err)
						}
					}
				}
				data, _ := o.Build()
				if len(data) != len(e.data[0]) {
					t.Fatalf("replacement of %d bytes, object %d", len(data), len(e.data[0]))
				}
				e.put(t, 0, data)
				return nil
			}),
		walReadStoreRow("object replaced under its key by the other committed object", corrupt, 1, nil, 0,
			func(e *walReadEnv, _ []byte) []byte { return slices.Clone(e.data[1]) }),
		walReadStoreRow("runs of two partitions swapped", corrupt, 0, nil, 0, func(e *walReadEnv, d []byte) []byte {
			run := 2 * e.size
			a, b := slices.Clone(d[:run]), slices.Clone(d[run:2*run])
			copy(d, b)
			copy(d[run:], a)
			return d
		}),
		walReadStoreRow("two batches of a partition swapped", corrupt, 0, []int{1}, 0, func(e *walReadEnv, d []byte) []byte {
			a, b := slices.Clone(d[:e.size]), slices.Clone(d[e.size:2*e.size])
			copy(d, b)
			copy(d[e.size:], a)
			return d
		}),
		walReadStoreRow("first batch's leader-epoch field flipped (outside its crc)", corrupt, 0, []int{1}, 0,
			func(e *walReadEnv, d []byte) []byte { d[epochByte(e, 0)] ^= 1; return d }),
		walReadStoreRow("second batch's leader-epoch field flipped: the first is served", prefix(2), 0, []int{1}, 0,
			func(e *walReadEnv, d []byte) []byte { d[epochByte(e, 1)] ^= 1; return d }),
		walReadStoreRow("byte flipped inside a batch beside another partition's run", corrupt, 1, []int{0}, 0,
			func(e *walReadEnv, d []byte) []byte { d[3*e.size-2] ^= 1; return d }),
		walReadStoreRow("object cut inside the first partition's run", corrupt, 0, nil, 0,
			func(e *walReadEnv, d []byte) []byte { return d[:e.size/2] }),
		walReadStoreRow("object cut inside the second partition's first batch: the first partition is served whole", corrupt, 1, []int{0}, 0,
			func(e *walReadEnv, d []byte) []byte { return d[:2*e.size+10] }),
		walReadStoreRow("object cut inside the second partition's second batch", prefix(2), 1, []int{0}, 0,
			func(e *walReadEnv, d []byte) []byte { return d[:3*e.size+10] }),
		walReadStoreRow("object cut in its footer: every batch is served", none, 1, []int{0}, 0,
			func(e *walReadEnv, d []byte) []byte { return d[:4*e.size+5] }),
		walReadLieRow("answer leaves out the second batch (a gap)", prefix(2), func(_ *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			return slices.Delete(bs, 1, 2)
		}),
		walReadLieRow("answer shifts the second batch's offsets up (a gap)", prefix(2), func(_ *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[1].BaseOffset, bs[1].LastOffset = bs[1].BaseOffset+1, bs[1].LastOffset+1
			return bs
		}),
		walReadLieRow("answer holds the first batch twice (an overlap)", prefix(2), func(_ *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			return slices.Insert(bs, 1, bs[0])
		}),
		walReadLieRow("answer points the first batch at the other partition's batch", corrupt, func(e *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[0].ByteOffset = int64(2 * e.size)
			return bs
		}),
		walReadLieRow("answer points the third batch at the other partition's batch in another object", prefix(4), func(e *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[2].ObjectKey, bs[2].ByteOffset = e.keys[0], int64(2*e.size)
			return bs
		}),
		walReadLieRow("answer gives the second batch the first one's range (the same range twice)", prefix(2), func(_ *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[1].ObjectKey, bs[1].ByteOffset = bs[0].ObjectKey, bs[0].ByteOffset
			return bs
		}),
		walReadLieRow("answer gives the first batch a range past the object's end", corrupt, func(e *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[0].Size = int64(len(e.data[0])) + 100
			return bs
		}),
		walReadLieRow("answer gives the second batch a range past the object's end", prefix(2), func(e *walReadEnv, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[1].ByteOffset = int64(len(e.data[0])) + 10
			return bs
		}),
	}
}
