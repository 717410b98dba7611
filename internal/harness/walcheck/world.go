package walcheck

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// Committed is one batch the control plane accepted.
type Committed struct {
	// Info is the batch's coordinates and binding as committed.
	Info wal.BatchInfo
	// Bytes is the batch as uploaded with its assigned base offset
	// written in: what a reader must serve for it.
	Bytes []byte
	// Object is the index of its object in World.Objects.
	Object int
}

// Object is one uploaded WAL object.
type Object struct {
	Key     string
	Data    []byte // as uploaded
	Batches []wal.CommitBatch
	// entries rebuild the object with the same layout and other values.
	entries []entry
}

// entry is one batch as generated: its partition, options and shape.
type entry struct {
	tp      wal.TopicIDPartition
	opts    record.BuilderOptions
	records int
	value   int
	ts      int64
}

// World is one random history: objects in a store, committed into a
// control plane, and what the store and the plane's answers were made
// to lie about since.
type World struct {
	Rand  *rand.Rand
	Store *mem.Mem
	// Plane is the honest control plane the objects were committed to;
	// Liar wraps it with the lies of AddLie.
	Plane wal.ControlPlane
	Liar  *Liar
	Parts []wal.TopicIDPartition
	// Objects in commit order.
	Objects []*Object
	// Log holds each partition's committed batches in offset order.
	Log map[wal.TopicIDPartition][]Committed
	// Damage describes every damage and lie, for failure messages.
	Damage []string

	// damaged marks the committed batches (by partition and base offset)
	// whose stored bytes may no longer be the committed ones.
	damaged   map[wal.TopicIDPartition]map[int64]bool
	producers map[producerKey]*producerState
}

type producerKey struct {
	tp  wal.TopicIDPartition
	pid int64
}

type producerState struct {
	epoch int16
	seq   int32
}

// Shapes are few so that batches of equal size and offset count are
// common: a batch that is valid but foreign then passes every check
// but the binding.
var (
	recordCounts = []int{1, 2, 3}
	valueSizes   = []int{8, 24, 300}
	leaderEpochs = []int32{-1, 0, 1, 2, 5, 9}
)

// NewWorld generates random objects (2 to 5 partitions of two topics,
// 2 to 5 objects of 1 to 3 batches per partition in them, idempotent
// and not, random leader epochs and timestamps), puts them in a new mem
// store and commits them into plane. A batch plane rejects is dead bytes
// and in no partition's log.
func NewWorld(ctx context.Context, rng *rand.Rand, plane wal.ControlPlane) (*World, error) {
	w := &World{Rand: rng, Store: mem.New(mem.Options{}), Plane: plane,
		Log: map[wal.TopicIDPartition][]Committed{}, damaged: map[wal.TopicIDPartition]map[int64]bool{},
		producers: map[producerKey]*producerState{}}
	w.Liar = &Liar{w: w, ControlPlane: plane}
	topics := []wal.TopicID{{0x70, 1}, {0x70, 2}}
	n := 2 + rng.IntN(4)
	for i := range n {
		w.Parts = append(w.Parts, wal.TopicIDPartition{TopicID: topics[i%2], Partition: int32(i / 2)})
	}
	for _, t := range topics {
		if err := plane.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: t, Topic: t.String(), NumPartitions: int32(n)}}); err != nil {
			return nil, err
		}
	}
	objects := 2 + rng.IntN(4)
	for i := range objects {
		var entries []entry
		for _, tp := range w.Parts {
			if rng.IntN(3) == 0 {
				continue
			}
			for range 1 + rng.IntN(3) {
				entries = append(entries, w.newEntry(tp))
			}
		}
		if len(entries) == 0 {
			entries = append(entries, w.newEntry(w.Parts[rng.IntN(len(w.Parts))]))
		}
		rng.Shuffle(len(entries), func(a, b int) { entries[a], entries[b] = entries[b], entries[a] })
		// Within a partition the producer sequences must stay in order.
		w.renumber(entries)
		data, batches, err := w.build(entries)
		if err != nil {
			return nil, err
		}
		o := &Object{Key: fmt.Sprintf("wal/%04d", i), Data: data, Batches: batches, entries: entries}
		if err := w.put(ctx, o.Key, data); err != nil {
			return nil, err
		}
		res, err := plane.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: o.Key, ObjectSize: int64(len(data)), BrokerID: 1, Batches: batches})
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", o.Key, err)
		}
		w.Objects = append(w.Objects, o)
		for j, r := range res.Batches {
			if r.Err != nil {
				continue
			}
			cb := batches[j]
			raw := bytes.Clone(data[cb.ByteOffset : cb.ByteOffset+cb.Size])
			b, err := record.ReadBatch(raw)
			if err != nil {
				return nil, err
			}
			b.SetBaseOffset(r.BaseOffset)
			info := wal.BatchInfo{ObjectKey: o.Key, ByteOffset: cb.ByteOffset, Size: cb.Size, BaseOffset: r.BaseOffset,
				LastOffset: r.BaseOffset + cb.OffsetCount() - 1, MaxTimestamp: cb.MaxTimestamp, TimestampType: cb.TimestampType,
				LogAppendTime: r.LogAppendTime, Binding: cb.Binding()}
			w.Log[cb.Partition] = append(w.Log[cb.Partition], Committed{Info: info, Bytes: raw, Object: len(w.Objects) - 1})
		}
	}
	return w, nil
}

func (w *World) newEntry(tp wal.TopicIDPartition) entry {
	rng := w.Rand
	e := entry{tp: tp, opts: record.DefaultBuilderOptions(), records: recordCounts[rng.IntN(len(recordCounts))],
		value: valueSizes[rng.IntN(len(valueSizes))], ts: 1_700_000_000_000 + rng.Int64N(1<<30)}
	e.opts.PartitionLeaderEpoch = leaderEpochs[rng.IntN(len(leaderEpochs))]
	if rng.IntN(2) == 0 {
		e.opts.ProducerID = int64(1 + rng.IntN(3))
		k := producerKey{tp, e.opts.ProducerID}
		if w.producers[k] == nil {
			w.producers[k] = &producerState{epoch: int16(rng.IntN(3))}
		}
		e.opts.ProducerEpoch = w.producers[k].epoch
	}
	if rng.IntN(8) == 0 {
		e.opts.TimestampType, e.opts.LogAppendTime = record.LogAppendTime, e.ts
	}
	return e
}

// renumber gives the idempotent entries their sequences in the order the
// object will hold them (grouped by partition, arrival order within).
func (w *World) renumber(entries []entry) {
	for _, tp := range w.Parts {
		for i := range entries {
			e := &entries[i]
			if e.tp != tp || e.opts.ProducerID < 0 {
				continue
			}
			st := w.producers[producerKey{tp, e.opts.ProducerID}]
			e.opts.BaseSequence = st.seq
			st.seq += int32(e.records)
		}
	}
}

// build makes an object of entries with fresh random values.
func (w *World) build(entries []entry) ([]byte, []wal.CommitBatch, error) {
	var o wal.ObjectBuilder
	for _, e := range entries {
		b := record.NewBuilder(e.opts)
		for range e.records {
			v := make([]byte, e.value)
			for i := range v {
				v[i] = byte(w.Rand.IntN(256))
			}
			b.Add(e.ts+w.Rand.Int64N(60), nil, v)
		}
		buf, err := b.Build()
		if err != nil {
			return nil, nil, err
		}
		if err := o.Add(e.tp, buf); err != nil {
			return nil, nil, err
		}
	}
	data, batches := o.Build()
	return data, batches, nil
}

func (w *World) put(ctx context.Context, key string, data []byte) error {
	return w.Store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
}

// At returns the committed batch of tp at base offset base.
func (w *World) At(tp wal.TopicIDPartition, base int64) (Committed, bool) {
	for _, c := range w.Log[tp] {
		if c.Info.BaseOffset == base {
			return c, true
		}
	}
	return Committed{}, false
}

// HighWatermark is tp's next offset.
func (w *World) HighWatermark(tp wal.TopicIDPartition) int64 {
	l := w.Log[tp]
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1].Info.LastOffset + 1
}

// Damaged reports whether the stored bytes of tp's batch at base may
// differ from the committed ones.
func (w *World) Damaged(tp wal.TopicIDPartition, base int64) bool { return w.damaged[tp][base] }

func (w *World) markDamaged(c Committed) {
	for p, l := range w.Log {
		for _, x := range l {
			if x.Object == c.Object && x.Info.ByteOffset == c.Info.ByteOffset {
				if w.damaged[p] == nil {
					w.damaged[p] = map[int64]bool{}
				}
				w.damaged[p][x.Info.BaseOffset] = true
			}
		}
	}
}

// batchesOf returns the committed batches of object o in byte order.
func (w *World) batchesOf(o int) []Committed {
	var out []Committed
	for _, tp := range w.Parts {
		for _, c := range w.Log[tp] {
			if c.Object == o {
				out = append(out, c)
			}
		}
	}
	return out
}

// RandomRequest is a fetch of a random subset of the partitions in
// random order, each from a random offset in [0, HW] (often 0 or a
// batch's base), with a large or (one time in five) a small budget.
func (w *World) RandomRequest() wal.FindBatchesRequest {
	rng := w.Rand
	parts := append([]wal.TopicIDPartition(nil), w.Parts...)
	rng.Shuffle(len(parts), func(a, b int) { parts[a], parts[b] = parts[b], parts[a] })
	parts = parts[:1+rng.IntN(len(parts))]
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	small := rng.IntN(5) == 0
	if small {
		req.MaxBytes = 1 + rng.Int64N(2000)
	}
	for _, tp := range parts {
		p := wal.FindPartition{Partition: tp, MaxPartitionBytes: 1 << 30}
		if small {
			p.MaxPartitionBytes = 1 + rng.Int64N(1000)
		}
		l := w.Log[tp]
		switch r := rng.IntN(4); {
		case r == 0 || len(l) == 0:
		case r == 1:
			p.Offset = l[rng.IntN(len(l))].Info.BaseOffset
		default:
			p.Offset = rng.Int64N(w.HighWatermark(tp) + 1)
		}
		req.Partitions = append(req.Partitions, p)
	}
	return req
}

// FirstDamaged is the base offset of tp's first committed batch whose
// stored bytes may have been damaged, or its high watermark when none.
func (w *World) FirstDamaged(tp wal.TopicIDPartition) int64 {
	for _, c := range w.Log[tp] {
		if w.damaged[tp][c.Info.BaseOffset] {
			return c.Info.BaseOffset
		}
	}
	return w.HighWatermark(tp)
}

// LiedAbout reports whether AddLie made the Liar lie about tp.
func (w *World) LiedAbout(tp wal.TopicIDPartition) bool {
	w.Liar.mu.Lock()
	defer w.Liar.mu.Unlock()
	for _, x := range w.Liar.lies {
		if x.tp == tp {
			return true
		}
	}
	return false
}

// CheckStored checks the batches a consumer of the read path stored for
// tp (a consolidated log's, from offset from): contiguous from from, each
// byte-identical to the batch committed at its offset except the leader
// epoch field, which the consumer stamps.
func (w *World) CheckStored(tp wal.TopicIDPartition, from int64, batches []record.Batch) []Violation {
	var out []Violation
	add := func(class, format string, args ...any) {
		out = append(out, Violation{Class: class, Detail: fmt.Sprintf("partition %s: %s", tp, fmt.Sprintf(format, args...))})
	}
	next := from
	for _, b := range batches {
		if b.BaseOffset() != next {
			add(ClassHole, "batch at offset %d after offset %d", b.BaseOffset(), next-1)
			return out
		}
		want, ok := w.At(tp, b.BaseOffset())
		if !ok {
			add(ClassNotPrefix, "no batch committed at offset %d", b.BaseOffset())
			return out
		}
		got := b.Bytes()
		if len(got) != len(want.Bytes) || !bytes.Equal(got[:12], want.Bytes[:12]) || !bytes.Equal(got[16:], want.Bytes[16:]) {
			class, what := w.identify(tp, b, b.BaseOffset())
			add(class, "batch stored at offset %d is %s", b.BaseOffset(), what)
			return out
		}
		next = b.NextOffset()
	}
	return out
}
