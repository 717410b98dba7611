package walcheck

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// StoreDamage names the kinds of damage DamageStore applies. The valid
// but foreign kinds (an object replaced by another valid one, runs or
// objects swapped) weigh most: only the binding check refuses them.
var StoreDamage = []struct {
	Name   string
	Weight int
}{
	{"object replaced by another valid object of the same layout", 3},
	{"two runs or batches of equal size swapped in an object", 3},
	{"two objects' bytes swapped", 1},
	{"object replaced by a copy of another object", 1},
	{"bit flipped in a batch's leader epoch field", 2},
	{"bit flipped in a batch's base offset field", 1},
	{"bit flipped anywhere in the object", 2},
	{"object truncated", 2},
	{"object deleted", 1},
}

// current returns object o's stored bytes (nil when deleted).
func (w *World) current(ctx context.Context, o int) []byte {
	data, err := objstore.ReadAll(ctx, w.Store, w.Objects[o].Key)
	if err != nil {
		return nil
	}
	return data
}

func (w *World) markObject(o int) {
	for _, c := range w.batchesOf(o) {
		w.markDamaged(c)
	}
}

func (w *World) pick(weights []int) int {
	total := 0
	for _, x := range weights {
		total += x
	}
	n := w.Rand.IntN(total)
	for i, x := range weights {
		if n < x {
			return i
		}
		n -= x
	}
	return len(weights) - 1
}

// DamageStore applies one random damage of StoreDamage to a random
// object, marks the committed batches whose bytes it may change, and
// returns its description (also appended to Damage).
func (w *World) DamageStore(ctx context.Context) (string, error) {
	weights := make([]int, len(StoreDamage))
	for i, d := range StoreDamage {
		weights[i] = d.Weight
	}
	return w.damageStore(ctx, w.pick(weights))
}

func (w *World) damageStore(ctx context.Context, kind int) (string, error) {
	rng := w.Rand
	o := rng.IntN(len(w.Objects))
	obj := w.Objects[o]
	data := w.current(ctx, o)
	if data == nil {
		return "", nil // deleted already
	}
	other := (o + 1 + rng.IntN(len(w.Objects))) % len(w.Objects)
	desc := fmt.Sprintf("%s: %s", StoreDamage[kind].Name, obj.Key)
	batches := w.batchesOf(o)
	flipIn := func(field, width int) error {
		if len(batches) == 0 {
			return nil
		}
		c := batches[rng.IntN(len(batches))]
		pos := c.Info.ByteOffset + int64(field+rng.IntN(width))
		if pos >= int64(len(data)) {
			return nil // truncated before it
		}
		data[pos] ^= 1 << rng.IntN(8)
		desc += fmt.Sprintf(" byte %d (batch at offset %d of %s)", pos, c.Info.BaseOffset, partitionOf(w, c))
		w.markDamaged(c)
		return w.put(ctx, obj.Key, data)
	}
	switch kind {
	case 0:
		fresh, _, err := w.build(obj.entries)
		if err != nil {
			return "", err
		}
		w.markObject(o)
		if err := w.put(ctx, obj.Key, fresh); err != nil {
			return "", err
		}
	case 1:
		a, b, ok := equalSpans(w, batches, rng.IntN(1<<30))
		if !ok || max(a.end, b.end) > int64(len(data)) {
			return w.damageStore(ctx, 0)
		}
		n := a.end - a.start
		tmp := slices.Clone(data[a.start:a.end])
		copy(data[a.start:a.end], data[b.start:b.start+n])
		copy(data[b.start:b.start+n], tmp)
		for _, c := range append(a.batches, b.batches...) {
			w.markDamaged(c)
		}
		desc += fmt.Sprintf(" [%d, %d) and [%d, %d)", a.start, a.end, b.start, b.start+n)
		if err := w.put(ctx, obj.Key, data); err != nil {
			return "", err
		}
	case 2, 3:
		theirs := w.current(ctx, other)
		if other == o || theirs == nil {
			return w.damageStore(ctx, 0)
		}
		desc += " and " + w.Objects[other].Key
		w.markObject(o)
		if err := w.put(ctx, obj.Key, theirs); err != nil {
			return "", err
		}
		if kind == 2 {
			w.markObject(other)
			if err := w.put(ctx, w.Objects[other].Key, data); err != nil {
				return "", err
			}
		}
	case 4:
		if err := flipIn(12, 4); err != nil {
			return "", err
		}
	case 5:
		if err := flipIn(0, 8); err != nil {
			return "", err
		}
	case 6:
		pos := int64(rng.IntN(len(data)))
		data[pos] ^= 1 << rng.IntN(8)
		desc += fmt.Sprintf(" byte %d", pos)
		for _, c := range batches {
			if c.Info.ByteOffset <= pos && pos < c.Info.ByteOffset+c.Info.Size {
				w.markDamaged(c)
			}
		}
		if err := w.put(ctx, obj.Key, data); err != nil {
			return "", err
		}
	case 7:
		n := int64(rng.IntN(len(data)))
		if len(batches) > 0 && rng.IntN(2) == 0 {
			// Cut inside or right after a batch, so that some
			// partitions of the object stay whole.
			c := batches[rng.IntN(len(batches))]
			n = min(c.Info.ByteOffset+rng.Int64N(c.Info.Size+1), int64(len(data)))
		}
		desc += fmt.Sprintf(" to %d of %d bytes", n, len(data))
		for _, c := range batches {
			if c.Info.ByteOffset+c.Info.Size > n {
				w.markDamaged(c)
			}
		}
		if err := w.put(ctx, obj.Key, data[:n]); err != nil {
			return "", err
		}
	case 8:
		w.markObject(o)
		if err := w.Store.Delete(ctx, obj.Key); err != nil {
			return "", err
		}
	}
	w.Damage = append(w.Damage, desc)
	return desc, nil
}

func partitionOf(w *World, c Committed) string {
	for tp, l := range w.Log {
		for _, x := range l {
			if x.Object == c.Object && x.Info.ByteOffset == c.Info.ByteOffset {
				return tp.String()
			}
		}
	}
	return "?"
}

// span is a run of consecutive committed batches of one object.
type span struct {
	start, end int64
	batches    []Committed
}

// equalSpans finds two disjoint spans of equal length in an object's
// batches (in byte order): preferably two partitions' whole runs, else
// two single batches. r picks among the candidates.
func equalSpans(w *World, batches []Committed, r int) (span, span, bool) {
	var runs []span
	tpOf := func(c Committed) string { return partitionOf(w, c) }
	for i, c := range batches {
		if i > 0 && tpOf(batches[i-1]) == tpOf(c) && runs[len(runs)-1].end == c.Info.ByteOffset {
			last := &runs[len(runs)-1]
			last.end += c.Info.Size
			last.batches = append(last.batches, c)
			continue
		}
		runs = append(runs, span{start: c.Info.ByteOffset, end: c.Info.ByteOffset + c.Info.Size, batches: []Committed{c}})
	}
	var singles []span
	for _, c := range batches {
		singles = append(singles, span{start: c.Info.ByteOffset, end: c.Info.ByteOffset + c.Info.Size, batches: []Committed{c}})
	}
	for _, set := range [][]span{runs, singles} {
		var pairs [][2]span
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				if set[i].end-set[i].start == set[j].end-set[j].start {
					pairs = append(pairs, [2]span{set[i], set[j]})
				}
			}
		}
		if len(pairs) > 0 {
			p := pairs[r%len(pairs)]
			return p[0], p[1], true
		}
	}
	return span{}, span{}, false
}

// Lies names the kinds of lie AddLie makes FindBatches tell.
var Lies = []struct {
	Name   string
	Weight int
}{
	{"another partition's batch (same size and offset count when one exists)", 3},
	{"the previous batch's range again", 2},
	{"the same range in another object", 1},
	{"a batch dropped (gap)", 2},
	{"a batch answered twice (overlap)", 2},
	{"a batch's offsets shifted", 2},
	{"a batch's last offset changed", 1},
	{"a batch's byte offset shifted", 1},
	{"a batch's size changed", 1},
	{"a batch's range past the object's end", 2},
}

type lie struct {
	tp   wal.TopicIDPartition
	kind int
	r    uint64
}

// AddLie makes the Liar tell one random lie of Lies in its answers for
// a random partition it does not lie about yet, and returns its
// description ("" when it lies about every partition). One lie per
// partition: two can make an answer no reader can refuse (a batch
// answered twice, the copy's offsets shifted to follow it).
func (w *World) AddLie() string {
	weights := make([]int, len(Lies))
	for i, l := range Lies {
		weights[i] = l.Weight
	}
	var free []wal.TopicIDPartition
	for _, tp := range w.Parts {
		if !w.LiedAbout(tp) {
			free = append(free, tp)
		}
	}
	if len(free) == 0 {
		return ""
	}
	x := lie{tp: free[w.Rand.IntN(len(free))], kind: w.pick(weights), r: w.Rand.Uint64()}
	w.Liar.mu.Lock()
	w.Liar.lies = append(w.Liar.lies, x)
	w.Liar.mu.Unlock()
	desc := fmt.Sprintf("lie about %s: %s", x.tp, Lies[x.kind].Name)
	w.Damage = append(w.Damage, desc)
	return desc
}

// Answer is one FindBatches call the Liar answered.
type Answer struct {
	Request wal.FindBatchesRequest
	Honest  []wal.FindBatchesResult
	Lied    []wal.FindBatchesResult
	// FirstLie[i] is the index in Honest[i].Batches of the first batch a
	// lie changed (len(Honest[i].Batches) when none did).
	FirstLie []int
}

// Liar is a control plane that answers FindBatches with the honest
// plane's answer edited by the World's lies, and remembers both.
//
// Concurrency: mu guards lies and answers.
type Liar struct {
	wal.ControlPlane
	w       *World
	mu      sync.Mutex
	lies    []lie
	answers []Answer
}

// Answers returns the calls answered since the last TakeAnswers.
func (l *Liar) TakeAnswers() []Answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.answers
	l.answers = nil
	return a
}

// FindBatches answers with the lies applied.
func (l *Liar) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	honest, err := l.ControlPlane.FindBatches(ctx, req)
	if err != nil || len(honest) != len(req.Partitions) {
		return honest, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := Answer{Request: req, Honest: honest, Lied: make([]wal.FindBatchesResult, len(honest)), FirstLie: make([]int, len(honest))}
	for i, h := range honest {
		a.Lied[i] = h
		a.Lied[i].Batches = slices.Clone(h.Batches)
		a.FirstLie[i] = len(h.Batches)
		for _, x := range l.lies {
			if x.tp != req.Partitions[i].Partition || h.Err != nil {
				continue
			}
			if k, ok := l.apply(x, &a.Lied[i]); ok {
				a.FirstLie[i] = min(a.FirstLie[i], k)
			}
		}
	}
	l.answers = append(l.answers, a)
	return a.Lied, nil
}

// apply edits one partition's answer and returns the index of the first
// batch it changed.
func (l *Liar) apply(x lie, res *wal.FindBatchesResult) (int, bool) {
	w := l.w
	bs := res.Batches
	n := len(bs)
	if n == 0 {
		return 0, false
	}
	r := x.r
	j := int(r % uint64(n))
	later := 1 + int(r%uint64(max(n-1, 1))) // an index >= 1, for n >= 2
	d := []int64{-2, -1, 1, 2}[(r>>20)%4]
	switch x.kind {
	case 0:
		var same, any []Committed
		for _, tp := range w.Parts {
			if tp == x.tp {
				continue
			}
			for _, c := range w.Log[tp] {
				any = append(any, c)
				if c.Info.Size == bs[j].Size && c.Info.LastOffset-c.Info.BaseOffset == bs[j].LastOffset-bs[j].BaseOffset {
					same = append(same, c)
				}
			}
		}
		if len(same) == 0 {
			same = any
		}
		if len(same) == 0 {
			return 0, false
		}
		c := same[(r>>8)%uint64(len(same))]
		bs[j].ObjectKey, bs[j].ByteOffset, bs[j].Size = c.Info.ObjectKey, c.Info.ByteOffset, c.Info.Size
		return j, true
	case 1:
		if n < 2 {
			return 0, false
		}
		bs[later].ObjectKey, bs[later].ByteOffset, bs[later].Size = bs[later-1].ObjectKey, bs[later-1].ByteOffset, bs[later-1].Size
		return later, true
	case 2:
		if len(w.Objects) < 2 {
			return 0, false
		}
		k := int((r >> 8) % uint64(len(w.Objects)))
		if w.Objects[k].Key == bs[j].ObjectKey {
			k = (k + 1) % len(w.Objects)
		}
		bs[j].ObjectKey = w.Objects[k].Key
		return j, true
	case 3:
		if n < 2 {
			return 0, false
		}
		res.Batches = slices.Delete(bs, later, later+1)
		return later, true
	case 4:
		res.Batches = slices.Insert(bs, j+1, bs[j])
		return j + 1, true
	case 5:
		if n < 2 {
			return 0, false
		}
		bs[later].BaseOffset += d
		bs[later].LastOffset += d
		return later, true
	case 6:
		bs[j].LastOffset += d
		return j, true
	case 7:
		bs[j].ByteOffset += d * int64(1+(r>>24)%5)
		return j, true
	case 8:
		bs[j].Size += d * int64(1+(r>>24)%5)
		return j, true
	case 9:
		var size int64
		for _, o := range w.Objects {
			if o.Key == bs[j].ObjectKey {
				size = int64(len(o.Data))
			}
		}
		if (r>>30)%2 == 0 {
			bs[j].Size = size - bs[j].ByteOffset + 1 + int64((r>>32)%500)
		} else {
			bs[j].ByteOffset = size + int64((r>>32)%100)
		}
		return j, true
	}
	return 0, false
}
