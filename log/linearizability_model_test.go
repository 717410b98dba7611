package log

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The linearizability check (run by linearizability_test.go): histories
// recorded from several goroutines running leader appends (plain and
// transactional), reads with each isolation, high watermark updates,
// truncations and retention against one log must be explainable by the
// sequential model of the log in this file, in which each operation takes
// effect at one instant between its call and its return (porcupine
// searches for that order).
//
// The model is exact about what it can know: the offsets every call
// reports, the offsets appends assign, where a truncation ends the log
// (the base of the batch holding its target), which calls fail and how,
// and every batch a read returns (base, record count, leader epoch, and the
// CRC of its records, so a batch re-appended at a truncated offset is told
// apart from the one it replaced). The one freedom it grants is how many
// batches one read returns (a read stops at the end of a segment and at
// maxBytes, which the model does not track): at least the first one due,
// then any prefix of those due, but never one beyond the read's bound.
//
// One transactional producer writes transactions (data batches, then a
// commit or abort marker from the coordinator), so the first unstable and
// last stable offsets move apart from the high watermark. The model
// follows Kafka's producer state: a transaction is unstable from its
// first offset until the high watermark (or the log start) passes its
// marker. After a truncation the log reloads the producer state from a
// snapshot at a roll the model does not track, which forgets completed
// transactions whose marker lies below the snapshot (and, without a
// snapshot, an open transaction that began below the log start): there
// the model allows each outcome the snapshot could have given
// (porcupine's nondeterministic model), and the reads after it decide.

// linOp is the input of one operation.
type linOp struct {
	kind linKind
	// append: one entry per batch.
	batches []linBatch
	epoch   int32
	// read: offset, isolation, maxBytes; update-hw, truncate, retention:
	// offset.
	offset    int64
	isolation Isolation
	maxBytes  int
}

type linKind int8

const (
	linAppend linKind = iota
	linRead
	linOffsets
	linUpdateHW
	linTruncate
	linRetention
)

// linBatch is a batch as the model knows it. txn marks a transactional
// data batch, control a transaction marker (of the one producer).
type linBatch struct {
	base    int64
	records int32
	epoch   int32
	crc     uint32
	txn     bool
	control bool
}

func (b linBatch) String() string {
	kind := ""
	switch {
	case b.control:
		kind = "marker"
	case b.txn:
		kind = "txn"
	}
	return fmt.Sprintf("[%d, %d)@%d#%08x%s", b.base, b.base+int64(b.records), b.epoch, b.crc, kind)
}

// linTxn is a completed transaction not yet stable: first offset and
// marker offset.
type linTxn struct{ first, marker int64 }

// linResult is the output of one operation. Fields an operation does not
// produce stay zero.
type linResult struct {
	err     string // "" or linErrorKind's answer
	offsets Offsets
	batches []linBatch // read
	first   int64      // append: first offset; update-hw: the value set
	changed bool       // truncate: changed; retention: moved
}

// linErrorKind names an error by its sentinel, so the model can expect
// the kind; anything unexpected keeps its text and matches no model.
func linErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrOffsetOutOfRange):
		return "out-of-range"
	}
	return "unexpected: " + err.Error()
}

// linState is the model's state: immutable, each Step returns a new one.
type linState struct {
	start, hw, leo int64
	batches        []linBatch // in offset order, contiguous from the first append
	// open is the first offset of the producer's open transaction, -1 if
	// none; unstable are its completed transactions whose marker neither
	// the high watermark nor the log start has passed, by marker.
	open     int64
	unstable []linTxn
	// openAfter[i] is open right after batches[i] was appended: what a
	// producer snapshot taken at the next batch's base holds.
	openAfter []int64
}

func linStateEqual(x, y linState) bool {
	return x.start == y.start && x.hw == y.hw && x.leo == y.leo && x.open == y.open &&
		slices.Equal(x.unstable, y.unstable) && slices.Equal(x.batches, y.batches) && slices.Equal(x.openAfter, y.openAfter)
}

// linModel is the sequential specification.
var linModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{open: -1}} },
	Step: func(state, input, output any) []any {
		s, op, res := state.(linState), input.(linOp), output.(linResult)
		if op.kind == linTruncate {
			return linTruncateStep(s, op.offset, res)
		}
		if ok, next := linStep(s, op, res); ok {
			return []any{next}
		}
		return nil
	},
	Equal: func(a, b any) bool { return linStateEqual(a.(linState), b.(linState)) },
	DescribeOperation: func(input, output any) string {
		op, res := input.(linOp), output.(linResult)
		return fmt.Sprintf("%s -> %s", op, res)
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		h := fnv.New64a()
		fmt.Fprint(h, s.start, s.hw, s.leo, s.open, len(s.unstable), len(s.batches))
		if n := len(s.batches); n > 0 {
			fmt.Fprint(h, s.batches[n-1])
		}
		return h.Sum64()
	},
	DescribeState: func(state any) string { return state.(linState).String() },
}).ToModel()

func (s linState) offsets() Offsets {
	fuo := s.open
	for _, t := range s.unstable {
		if fuo < 0 || t.first < fuo {
			fuo = t.first
		}
	}
	lso := s.hw
	if fuo >= 0 {
		fuo = max(fuo, s.start) // the log clamps it to the log start
		lso = min(fuo, s.hw)
	}
	return Offsets{LogStartOffset: s.start, LocalLogStartOffset: s.start, HighWatermark: s.hw,
		LastStableOffset: lso, FirstUnstableOffset: fuo, LogEndOffset: s.leo}
}

// forgetBelow drops the completed transactions whose marker is below
// offset (Kafka's producer state does, as the high watermark or the log
// start passes them).
func forgetBelow(txns []linTxn, offset int64) []linTxn {
	return slices.DeleteFunc(slices.Clone(txns), func(t linTxn) bool { return t.marker < offset })
}

func linStep(s linState, op linOp, res linResult) (bool, linState) {
	switch op.kind {
	case linAppend:
		if res.err != "" || res.first != s.leo {
			return false, s
		}
		next := s
		next.batches = slices.Clone(s.batches)
		next.openAfter = slices.Clone(s.openAfter)
		for _, b := range op.batches {
			b.base, b.epoch = next.leo, op.epoch
			switch {
			case b.control && next.open < 0:
				return false, s // the writer ends only a transaction the log says is open
			case b.control:
				next.unstable = append(slices.Clone(next.unstable), linTxn{next.open, b.base})
				next.open = -1
			case b.txn && next.open < 0:
				next.open = b.base
			}
			next.batches = append(next.batches, b)
			next.openAfter = append(next.openAfter, next.open)
			next.leo += int64(b.records)
		}
		return true, next
	case linOffsets:
		return res.err == "" && res.offsets == s.offsets(), s
	case linUpdateHW:
		next := s
		next.hw = min(max(op.offset, s.start), s.leo)
		next.unstable = forgetBelow(s.unstable, next.hw)
		return res.err == "" && res.first == next.hw, next
	case linRetention:
		if op.offset > s.hw {
			return res.err == "out-of-range" && !res.changed, s
		}
		next := s
		next.start = max(s.start, op.offset)
		if next.start != s.start {
			next.unstable = forgetBelow(s.unstable, next.start)
		}
		return res.err == "" && res.changed == (next.start != s.start), next
	case linRead:
		return linReadStep(s, op, res), s
	}
	return false, s
}

// linTruncateStep: a target at or beyond the end changes nothing; one
// inside a batch ends the log at that batch's base. The producer state is
// then reloaded from the newest snapshot at or below the end (taken at
// some roll the model does not track, so every kept batch boundary at or
// above the log start is a candidate, or none: then the batches from the
// log start are replayed into an empty state) and the batches after it
// are replayed; each candidate gives one possible next state.
func linTruncateStep(s linState, t int64, res linResult) []any {
	if res.err != "" {
		return nil
	}
	if t >= s.leo {
		if res.changed {
			return nil
		}
		return []any{s}
	}
	if !res.changed {
		return nil
	}
	end := t
	keep := len(s.batches)
	for i, b := range s.batches {
		if b.base+int64(b.records) > t {
			end, keep = min(t, b.base), i
			break
		}
	}
	base := linState{start: min(s.start, end), hw: min(s.hw, end), leo: end,
		batches: s.batches[:keep:keep], openAfter: s.openAfter[:keep:keep]}
	var out []any
	add := func(from int, open int64) {
		next := base
		next.open, next.unstable = open, nil
		for _, b := range base.batches[from:] {
			switch {
			case b.control && next.open >= 0:
				next.unstable = append(next.unstable, linTxn{next.open, b.base})
				next.open = -1
			case b.txn && !b.control && next.open < 0:
				next.open = b.base
			}
		}
		next.unstable = forgetBelow(next.unstable, max(next.hw, next.start))
		out = append(out, next)
	}
	// No snapshot: replay from the batch holding the log start.
	first := 0
	for first < keep && base.batches[first].base+int64(base.batches[first].records) <= base.start {
		first++
	}
	add(first, -1)
	// A snapshot at the base of batch i holds the state after batch i-1.
	for i := 0; i <= keep; i++ {
		at := end
		if i < keep {
			at = base.batches[i].base
		}
		if at < base.start || i == 0 {
			continue
		}
		add(i, base.openAfter[i-1])
	}
	return out
}

// linReadStep checks a read against the state it is linearized at.
func linReadStep(s linState, op linOp, res linResult) bool {
	want := s.offsets()
	want.FirstUnstableOffset = -1 // a read does not report it
	if res.offsets != want {
		return false
	}
	if op.offset < s.start || op.offset > s.leo {
		return res.err == "out-of-range" && len(res.batches) == 0
	}
	if res.err != "" {
		return false
	}
	bound := want.LogEndOffset
	switch op.isolation {
	case IsolationHighWatermark:
		bound = want.HighWatermark
	case IsolationCommitted:
		bound = want.LastStableOffset
	}
	var due []linBatch
	for _, b := range s.batches {
		last := b.base + int64(b.records) - 1
		if last < op.offset {
			continue
		}
		if last >= bound {
			break
		}
		due = append(due, b)
	}
	if len(due) == 0 {
		return len(res.batches) == 0
	}
	return len(res.batches) > 0 && len(res.batches) <= len(due) && slices.Equal(res.batches, due[:len(res.batches)])
}

func (op linOp) String() string {
	switch op.kind {
	case linAppend:
		var n []int32
		for _, b := range op.batches {
			n = append(n, b.records)
		}
		return fmt.Sprintf("append epoch=%d records=%v", op.epoch, n)
	case linRead:
		return fmt.Sprintf("read %d %s max=%d", op.offset, op.isolation, op.maxBytes)
	case linOffsets:
		return "offsets"
	case linUpdateHW:
		return fmt.Sprintf("update-hw %d", op.offset)
	case linTruncate:
		return fmt.Sprintf("truncate %d", op.offset)
	case linRetention:
		return fmt.Sprintf("retention %d", op.offset)
	}
	return "?"
}

func (r linResult) String() string {
	o := r.offsets
	return fmt.Sprintf("err=%q first=%d changed=%t start=%d hw=%d fuo=%d lso=%d leo=%d %v",
		r.err, r.first, r.changed, o.LogStartOffset, o.HighWatermark, o.FirstUnstableOffset, o.LastStableOffset,
		o.LogEndOffset, r.batches)
}

func (s linState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start=%d hw=%d leo=%d open=%d unstable=%v", s.start, s.hw, s.leo, s.open, s.unstable)
	for _, x := range s.batches {
		b.WriteString(" " + x.String())
	}
	return b.String()
}
