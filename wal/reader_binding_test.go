package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// boundCP is a control plane that stores bindings: FindBatches answers
// from the rows commit recorded (each with its CommitBatch.Binding), every
// batch from the requested offset, no budget. lie, if set, edits each
// partition's answer. Only FindBatches is implemented.
type boundCP struct {
	wal.ControlPlane
	rows map[wal.TopicIDPartition][]wal.BatchInfo
	lie  func(tp wal.TopicIDPartition, offset int64, batches []wal.BatchInfo) []wal.BatchInfo
}

func (c *boundCP) FindBatches(_ context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	out := make([]wal.FindBatchesResult, len(req.Partitions))
	for i, p := range req.Partitions {
		rows := c.rows[p.Partition]
		hw := int64(0)
		if len(rows) > 0 {
			hw = rows[len(rows)-1].LastOffset + 1
		}
		batches := []wal.BatchInfo{}
		for _, b := range rows {
			if b.LastOffset >= p.Offset {
				batches = append(batches, b)
			}
		}
		if c.lie != nil {
			batches = c.lie(p.Partition, p.Offset, batches)
		}
		out[i] = wal.FindBatchesResult{Batches: batches, LogStartOffset: 0, HighWatermark: hw}
	}
	return out, nil
}

// bindEnv is a mem store and a boundCP.
type bindEnv struct {
	t     *testing.T
	ctx   context.Context
	store *mem.Mem
	cp    *boundCP
}

func newBindEnv(t *testing.T) *bindEnv {
	return &bindEnv{t: t, ctx: context.Background(), store: mem.New(mem.Options{}),
		cp: &boundCP{rows: map[wal.TopicIDPartition][]wal.BatchInfo{}}}
}

func bindTP(p int32) wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: wal.TopicID{0xB1, 0xD}, Partition: p}
}

// add is one batch of an object.
type add struct {
	p     int32
	batch []byte
}

// pbatch builds a batch of n records "<prefix>-<i>" of producer pid
// (epoch 1, base sequence seq) in leader epoch 3. Batches of the same n
// and prefix length have the same size and offsets: only the binding
// tells them apart.
func pbatch(t testing.TB, n int, prefix string, pid int64, seq int32) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.PartitionLeaderEpoch = pid, 1, seq, 3
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(1000, nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// build lays out an object of adds with wal.ObjectBuilder.
func build(t testing.TB, adds ...add) ([]byte, []wal.CommitBatch) {
	t.Helper()
	var ob wal.ObjectBuilder
	for _, a := range adds {
		require.NoError(t, ob.Add(bindTP(a.p), a.batch))
	}
	return ob.Build()
}

// commit stores an object of adds under key and records its batches as
// rows, each partition's offsets following on from its last row, with
// their bindings.
func (e *bindEnv) commit(key string, adds ...add) ([]byte, []wal.CommitBatch) {
	e.t.Helper()
	data, batches := build(e.t, adds...)
	e.put(key, data)
	for _, b := range batches {
		rows := e.cp.rows[b.Partition]
		base := int64(0)
		if len(rows) > 0 {
			base = rows[len(rows)-1].LastOffset + 1
		}
		e.cp.rows[b.Partition] = append(rows, wal.BatchInfo{ObjectKey: key, ByteOffset: b.ByteOffset, Size: b.Size,
			BaseOffset: base, LastOffset: base + b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp,
			Binding: b.Binding()})
	}
	return data, batches
}

func (e *bindEnv) put(key string, data []byte) {
	e.t.Helper()
	require.NoError(e.t, e.store.Put(e.ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
}

// unbind drops every row's binding (rows committed before the control
// plane stored them).
func (e *bindEnv) unbind() {
	for tp, rows := range e.cp.rows {
		for i := range rows {
			rows[i].Binding = wal.BatchBinding{}
		}
		e.cp.rows[tp] = rows
	}
}

func (e *bindEnv) reader(cache *wal.ObjectCache) *wal.Reader {
	e.t.Helper()
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: cache})
	require.NoError(e.t, err)
	return r
}

// fetch fetches partitions [0, n) from offset.
func (e *bindEnv) fetch(r *wal.Reader, n int32, offset int64) []wal.FetchResult {
	e.t.Helper()
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for p := range n {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: bindTP(p), Offset: offset, MaxPartitionBytes: 1 << 30})
	}
	res, err := r.Fetch(e.ctx, req)
	require.NoError(e.t, err)
	return res
}

// requireRefused checks that res failed with a *BatchReadError wrapping
// want, naming key, partition p and base offset, with detail mentioning
// detail, and served nothing.
func requireRefused(t *testing.T, res wal.FetchResult, want error, key string, p int32, base int64, detail string) {
	t.Helper()
	var be *wal.BatchReadError
	require.ErrorAs(t, res.Err, &be)
	require.ErrorIs(t, res.Err, want)
	require.Equal(t, key, be.ObjectKey)
	require.Equal(t, bindTP(p), be.Partition)
	require.Equal(t, base, be.BaseOffset)
	require.Contains(t, be.Detail, detail)
	require.Empty(t, res.Records)
}

// An object replaced under its key by one of the same layout (same
// sizes, offsets and framing, other records) is refused: its CRC is not
// the committed one. Rows without a binding get the old checks only,
// which this replacement passes.
func TestReaderBindingObjectReplaced(t *testing.T) {
	e := newBindEnv(t)
	e.commit("wal/k", add{0, pbatch(t, 3, "a", 7, 0)})
	replaced, _ := build(t, add{0, pbatch(t, 3, "x", 7, 0)})
	e.put("wal/k", replaced)
	r := e.reader(nil)
	requireRefused(t, e.fetch(r, 1, 0)[0], wal.ErrCorruption, "wal/k", 0, 0, "CRC field")
	require.Equal(t, int64(1), r.Metrics().CorruptBatches)

	e.unbind()
	res := e.fetch(r, 1, 0)[0]
	require.NoError(t, res.Err)
	require.Equal(t, []string{"0:x-0", "1:x-1", "2:x-2"}, values(t, res.Records), "without a binding only framing, CRC, size and count are checked")
}

// Two partitions' runs swapped in the stored object: each partition's
// coordinates now frame the other's batch, of the same size and offset
// count. Both are refused.
func TestReaderBindingRunsSwapped(t *testing.T) {
	e := newBindEnv(t)
	a, b := pbatch(t, 2, "a", 7, 0), pbatch(t, 2, "b", 8, 0)
	data, _ := e.commit("wal/k", add{0, a}, add{1, b})
	swapped := bytes.Join([][]byte{b, a, data[len(a)+len(b):]}, nil)
	e.put("wal/k", swapped)
	res := e.fetch(e.reader(nil), 2, 0)
	requireRefused(t, res[0], wal.ErrCorruption, "wal/k", 0, 0, "CRC field")
	requireRefused(t, res[1], wal.ErrCorruption, "wal/k", 1, 0, "CRC field")
}

// Coordinates that point at another batch: another partition's, or two
// coordinates of one partition on one byte range.
func TestReaderBindingForeignCoordinates(t *testing.T) {
	t.Run("other-partition", func(t *testing.T) {
		e := newBindEnv(t)
		e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)}, add{1, pbatch(t, 2, "b", 8, 0)})
		other := e.cp.rows[bindTP(1)][0]
		e.cp.lie = func(tp wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
			if tp == bindTP(0) {
				bs[0].ObjectKey, bs[0].ByteOffset, bs[0].Size = other.ObjectKey, other.ByteOffset, other.Size
			}
			return bs
		}
		res := e.fetch(e.reader(nil), 2, 0)
		requireRefused(t, res[0], wal.ErrCorruption, "wal/k", 0, 0, "CRC field")
		require.NoError(t, res[1].Err)
		require.Equal(t, []string{"0:b-0", "1:b-1"}, values(t, res[1].Records))
	})
	t.Run("same-range-twice", func(t *testing.T) {
		e := newBindEnv(t)
		e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)}, add{0, pbatch(t, 2, "c", 7, 2)})
		e.cp.lie = func(_ wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
			for i := range bs {
				bs[i].ByteOffset = 0 // every coordinate on the first batch
			}
			return bs
		}
		r := e.reader(nil)
		res := e.fetch(r, 1, 0)[0]
		require.NoError(t, res.Err, "the good prefix")
		require.Equal(t, []string{"0:a-0", "1:a-1"}, values(t, res.Records))
		requireRefused(t, e.fetch(r, 1, 2)[0], wal.ErrCorruption, "wal/k", 0, 2, "CRC field")
		require.Equal(t, int64(2), r.Metrics().CorruptBatches)
	})
}

// The partition leader epoch field lies outside the batch CRC: flipped in
// the stored object, it is refused against the committed value (the rule
// is to check it, not to overwrite it). Without a binding it is served as
// stored.
func TestReaderBindingLeaderEpochFlipped(t *testing.T) {
	e := newBindEnv(t)
	data, batches := e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)})
	const offPartitionLeaderEpoch = 12 // Kafka v2 batch header
	pos := batches[0].ByteOffset + offPartitionLeaderEpoch
	require.Equal(t, uint32(3), binary.BigEndian.Uint32(data[pos:]))
	damaged := bytes.Clone(data)
	binary.BigEndian.PutUint32(damaged[pos:], 0x7fff0003)
	e.put("wal/k", damaged)
	r := e.reader(nil)
	requireRefused(t, e.fetch(r, 1, 0)[0], wal.ErrCorruption, "wal/k", 0, 0, "partition leader epoch 2147418115, committed 3")

	e.unbind()
	res := e.fetch(r, 1, 0)[0]
	require.NoError(t, res.Err)
	b, err := record.ReadBatch(res.Records)
	require.NoError(t, err)
	require.Equal(t, int32(0x7fff0003), b.PartitionLeaderEpoch(), "without a binding the field is not checked")
}

// The binding checks every field it holds, also where the CRC would
// catch the change: a row whose binding disagrees with intact bytes is
// refused, naming the field.
func TestReaderBindingFields(t *testing.T) {
	for name, tc := range map[string]struct {
		edit   func(*wal.BatchBinding)
		detail string
	}{
		"crc":            {func(b *wal.BatchBinding) { b.CRC++ }, "CRC field"},
		"leader-epoch":   {func(b *wal.BatchBinding) { b.PartitionLeaderEpoch++ }, "partition leader epoch"},
		"producer-id":    {func(b *wal.BatchBinding) { b.ProducerID++ }, "producer id"},
		"producer-epoch": {func(b *wal.BatchBinding) { b.ProducerEpoch++ }, "producer epoch"},
		"base-sequence":  {func(b *wal.BatchBinding) { b.BaseSequence++ }, "base sequence"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newBindEnv(t)
			e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)})
			tc.edit(&e.cp.rows[bindTP(0)][0].Binding)
			requireRefused(t, e.fetch(e.reader(nil), 1, 0)[0], wal.ErrCorruption, "wal/k", 0, 0, tc.detail)
		})
	}
}

// threeBatches commits batches [0, 1], [2, 3], [4, 5] of partition 0 in
// one object.
func threeBatches(t *testing.T) *bindEnv {
	e := newBindEnv(t)
	e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)}, add{0, pbatch(t, 2, "b", 7, 2)}, add{0, pbatch(t, 2, "c", 7, 4)})
	return e
}

// dropBase removes the batch at base from every answer.
func dropBase(base int64) func(wal.TopicIDPartition, int64, []wal.BatchInfo) []wal.BatchInfo {
	return func(_ wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
		var out []wal.BatchInfo
		for _, b := range bs {
			if b.BaseOffset != base {
				out = append(out, b)
			}
		}
		return out
	}
}

// An answer that skips a batch after the first is refused at the gap:
// the batch before it is served, never the one after it.
func TestReaderGapAfterFirstBatch(t *testing.T) {
	e := threeBatches(t)
	e.cp.lie = dropBase(2)
	r := e.reader(nil)
	res := e.fetch(r, 1, 0)[0]
	require.NoError(t, res.Err, "the good prefix")
	require.Equal(t, []string{"0:a-0", "1:a-1"}, values(t, res.Records))
	m := r.Metrics()
	require.Equal(t, int64(1), m.InconsistentAnswers)
	require.Equal(t, int64(1), m.TruncatedPartitions)
}

// The first batch may start after the requested offset (FindBatchesResult:
// the WAL holds nothing there, as between a capped prune's start and the
// first batch): it is served, at its own offsets. The reader cannot tell
// that from a skipped first batch; consolidate.Fetcher checks its log end.
// A first batch that ends before the requested offset is refused.
func TestReaderFirstBatchAfterRequestedOffset(t *testing.T) {
	e := threeBatches(t)
	e.cp.lie = dropBase(0)
	res := e.fetch(e.reader(nil), 1, 0)[0]
	require.NoError(t, res.Err)
	require.Equal(t, []string{"2:b-0", "3:b-1", "4:c-0", "5:c-1"}, values(t, res.Records))

	e.cp.lie = func(_ wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
		return e.cp.rows[bindTP(0)] // from offset 0 whatever was asked
	}
	r := e.reader(nil)
	requireRefused(t, e.fetch(r, 1, 2)[0], wal.ErrInconsistentAnswer, "wal/k", 0, 0, "ends before the requested offset 2")
	require.Equal(t, int64(1), r.Metrics().InconsistentAnswers)
	res = e.fetch(r, 1, 1)[0]
	require.NoError(t, res.Err, "a fetch from inside the first batch")
	require.Len(t, values(t, res.Records), 6)
}

// Rows out of order that put a later batch first (a buggy control plane
// swapping two rows) are refused whole: the first batch starts past the
// requested offset, which alone an answer may do, but the row after it
// holds the offsets it skipped, so it is no good prefix. Rows out of
// order past a first batch that holds the requested offset still serve
// the prefix before them.
func TestReaderRowsOutOfOrderAtTheStart(t *testing.T) {
	e := threeBatches(t)
	swap := func(i int) func(wal.TopicIDPartition, int64, []wal.BatchInfo) []wal.BatchInfo {
		return func(_ wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
			bs[i], bs[i+1] = bs[i+1], bs[i]
			return bs
		}
	}
	e.cp.lie = swap(0)
	r := e.reader(nil)
	requireRefused(t, e.fetch(r, 1, 0)[0], wal.ErrInconsistentAnswer, "wal/k", 0, 0, "offsets [0, 1] after 4")
	requireRefused(t, e.fetch(r, 1, 1)[0], wal.ErrInconsistentAnswer, "wal/k", 0, 0, "offsets [0, 1] after 4")
	m := r.Metrics()
	require.Equal(t, int64(2), m.InconsistentAnswers)
	require.Equal(t, int64(2), m.FailedPartitions)
	require.Equal(t, int64(0), m.TruncatedPartitions)

	e.cp.lie = swap(1)
	res := e.fetch(r, 1, 0)[0]
	require.NoError(t, res.Err, "the good prefix")
	require.Equal(t, []string{"0:a-0", "1:a-1"}, values(t, res.Records))
}

// shortObject is an object of two partitions, two batches each.
func shortObject(t *testing.T) (*bindEnv, []byte, []wal.CommitBatch, map[int32][][]string) {
	e := newBindEnv(t)
	adds := []add{{0, pbatch(t, 2, "a0", 7, 0)}, {0, pbatch(t, 3, "a1", 7, 2)},
		{1, pbatch(t, 1, "b0", 8, 0)}, {1, pbatch(t, 2, "b1", 8, 1)}}
	data, batches := e.commit("wal/k", adds...)
	// want[p][i] is the values of partition p's i-th batch.
	want := map[int32][][]string{}
	for _, p := range []int32{0, 1} {
		for _, row := range e.cp.rows[bindTP(p)] {
			raw := bytes.Clone(data[row.ByteOffset : row.ByteOffset+row.Size])
			b, err := record.ReadBatch(raw)
			require.NoError(t, err)
			b.SetBaseOffset(row.BaseOffset)
			want[p] = append(want[p], values(t, raw))
		}
	}
	return e, data, batches, want
}

// An object shorter than its committed bytes, at every length: each
// partition is served exactly the batches that lie whole in the object
// (the first partition whole when only the second's bytes are cut), and a
// partition whose first batch lies past the end is ErrCorruption, never a
// retriable read. The same from a cache holding the short object.
func TestReaderTruncatedObjectServesEachPartitionsPrefix(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			e, data, _, want := shortObject(t)
			for cut := range len(data) + 1 {
				short := bytes.Clone(data[:cut])
				var cache *wal.ObjectCache
				if cached {
					cache = wal.NewObjectCache(1 << 20)
					cache.Put("wal/k", short) // the store keeps the whole object
				} else {
					e.put("wal/k", short)
				}
				r := e.reader(cache)
				res := e.fetch(r, 2, 0)
				for p := range int32(2) {
					var served []string
					whole := 0
					for i, row := range e.cp.rows[bindTP(p)] {
						if row.ByteOffset+row.Size <= int64(cut) {
							served = append(served, want[p][i]...)
							whole++
						}
					}
					if whole == 0 {
						requireRefused(t, res[p], wal.ErrCorruption, "wal/k", p, 0, "past the end of the object")
						continue
					}
					require.NoError(t, res[p].Err, "cut %d, partition %d", cut, p)
					require.Equal(t, served, values(t, res[p].Records), "cut %d, partition %d", cut, p)
				}
				m := r.Metrics()
				if cached {
					require.Zero(t, m.Gets)
				} else {
					require.LessOrEqual(t, m.Gets, int64(4), "one GET per coalesced range, a second one for a short object")
				}
			}
		})
	}
}

// One partition's coordinate past the object's end fails that partition
// only (ErrCorruption); the other partition in the same object is served
// whole.
func TestReaderPastTheEndCoordinateFailsOnlyItsPartition(t *testing.T) {
	e, _, _, want := shortObject(t)
	e.cp.lie = func(tp wal.TopicIDPartition, _ int64, bs []wal.BatchInfo) []wal.BatchInfo {
		if tp == bindTP(1) {
			bs[0].Size = 1 << 20
		}
		return bs
	}
	res := e.fetch(e.reader(nil), 2, 0)
	require.NoError(t, res[0].Err)
	require.Equal(t, append(want[0][0], want[0][1]...), values(t, res[0].Records))
	requireRefused(t, res[1], wal.ErrCorruption, "wal/k", 1, 0, "past the end of the object")
}

// cutStore cuts the body of the next cuts Gets one byte short, as a
// connection that breaks does (objstore.ErrShortRead).
type cutStore struct {
	objstore.Store
	cuts int
}

func (s *cutStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	body, err := s.Store.Get(ctx, key, offset, length)
	if err != nil || s.cuts == 0 || length <= 0 {
		return body, err
	}
	s.cuts--
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(body, length-1), body}, nil
}

// A short body from an object that holds the committed bytes is a failed
// read (retriable), not corruption: the Stat after it says the object is
// whole.
func TestReaderShortBodyOfWholeObjectIsRetriable(t *testing.T) {
	e := newBindEnv(t)
	e.commit("wal/k", add{0, pbatch(t, 2, "a", 7, 0)})
	r, err := wal.NewReader(wal.ReaderOptions{Store: &cutStore{Store: e.store, cuts: 1}, ControlPlane: e.cp})
	require.NoError(t, err)
	res := e.fetch(r, 1, 0)[0]
	require.ErrorIs(t, res.Err, wal.ErrObjectRead)
	require.ErrorIs(t, res.Err, objstore.ErrShortRead)
	require.True(t, wal.IsRetriable(res.Err))
	res = e.fetch(r, 1, 0)[0]
	require.NoError(t, res.Err)
	require.Equal(t, []string{"0:a-0", "1:a-1"}, values(t, res.Records))
}
