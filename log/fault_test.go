package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/tierlog/tierlog/log/record"
)

// isInjected reports whether err carries errorfs's injected error. The
// injector returns a copy of ErrInjected with its predicate set, wrapped
// with a stack, so errors.Is against ErrInjected itself fails; match the
// label instead.
func isInjected(err error) bool {
	var le errorfs.LabelledError
	return errors.As(err, &le) && le.Label == errorfs.ErrInjected.Label
}

// opKinds is an errorfs predicate matching some operation kinds.
type opKinds struct {
	name  string
	kinds []errorfs.OpKind
}

func (p opKinds) String() string              { return p.name }
func (p opKinds) Evaluate(op errorfs.Op) bool { return slices.Contains(p.kinds, op.Kind) }

var faultOps = []opKinds{
	{"create", []errorfs.OpKind{errorfs.OpCreate}},
	{"write", []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt}},
	{"sync", []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}},
	{"rename", []errorfs.OpKind{errorfs.OpRename}},
	{"remove", []errorfs.OpKind{errorfs.OpRemove, errorfs.OpRemoveAll}},
	{"read", []errorfs.OpKind{errorfs.OpOpen, errorfs.OpOpenDir, errorfs.OpList, errorfs.OpStat,
		errorfs.OpFileRead, errorfs.OpFileReadAt, errorfs.OpFileStat}},
}

var faultPaths = []string{
	"p0/*.log", "p0/*.index", "p0/*.timeindex",
	"p0/leader-epoch-checkpoint*", "p0/offsets-checkpoint*", "p0",
}

// faultRun is one run of the fault workload. acked are the batches a
// successful Flush (or Close) made durable that no completed truncation
// or retention removed; pendingCut, while a truncation runs, the offset
// below which acked batches must survive it.
type faultRun struct {
	t     *testing.T
	rng   *rand.Rand
	fs    vfs.FS
	opts  Options
	l     *UnifiedLog
	live  []crashBatch
	acked []crashBatch
	// pendingCut is math.MaxInt64 unless a truncation is running; then
	// acked batches at or above it may be gone.
	pendingCut int64
	doing      string
	// maxStart bounds the log start offset a reopen may find: retention
	// never passes the high watermark.
	maxStart int64
}

const noCut = int64(1) << 62

// faultWorkload appends, flushes, rolls, reads, truncates, fully
// truncates, deletes old segments, closes and reopens, and closes. It
// returns the first error, with r.doing naming the step.
func (r *faultRun) workload() error {
	r.doing = "open"
	l, err := Open(testDir, r.opts)
	if err != nil {
		return err
	}
	r.l = l
	for i := range 40 {
		if err := r.appendBatches(); err != nil {
			return err
		}
		switch {
		case i == 20:
			r.doing = "close"
			err := r.l.Close()
			if err != nil {
				return err
			}
			r.acked = slices.Clone(r.live)
			r.doing = "reopen"
			if r.l, err = Open(testDir, r.opts); err != nil {
				r.l = nil
				return err
			}
		case i%3 == 2:
			r.doing = "flush"
			if err := r.l.Flush(); err != nil {
				return err
			}
			r.acked = slices.Clone(r.live)
		case i%7 == 6 && len(r.live) > 2:
			t := r.live[len(r.live)-2].base
			r.doing = fmt.Sprintf("truncate to %d", t)
			r.pendingCut = t
			if _, err := r.l.TruncateTo(t); err != nil {
				return err
			}
			r.pendingCut = noCut
			r.live, r.acked = batchesBelow(r.live, t), batchesBelow(r.acked, t)
		case i == 33:
			n := r.l.LogEndOffset() + 5
			r.doing = fmt.Sprintf("truncate fully and start at %d", n)
			r.maxStart = max(r.maxStart, n)
			r.pendingCut = 0
			if err := r.l.TruncateFullyAndStartAt(n, -1); err != nil {
				return err
			}
			r.pendingCut = noCut
			r.live, r.acked = nil, nil
		case i%5 == 4:
			r.maxStart = max(r.maxStart, r.l.UpdateHighWatermark(r.l.LogEndOffset()-3))
			r.doing = "delete old segments"
			if _, err := r.l.DeleteOldSegments(); err != nil {
				return err
			}
			start := r.l.LogStartOffset()
			r.live, r.acked = batchesFrom(r.live, start), batchesFrom(r.acked, start)
		case i%4 == 1:
			r.doing = "read"
			if err := checkReads(r.l, r.live); err != nil {
				return err
			}
		}
	}
	r.doing = "close"
	err = r.l.Close()
	if err == nil {
		r.acked = slices.Clone(r.live)
	}
	return err
}

func (r *faultRun) appendBatches() error {
	var buf []byte
	for range 1 + r.rng.IntN(3) {
		buf = append(buf, buildBatches(r.t, 1, 1+r.rng.IntN(3), r.rng.IntN(120), 1_000_000, 0, -1)...)
	}
	next := r.l.LogEndOffset()
	var want []crashBatch
	for rest := bytes.Clone(buf); len(rest) > 0; {
		b, _ := record.ReadBatch(rest)
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(1)
		next = b.NextOffset()
		want = append(want, crashBatch{b.BaseOffset(), next, 1, b.Bytes()})
		rest = rest[b.Size():]
	}
	r.doing = "append"
	if _, err := r.l.AppendAsLeader(buf, 1, OriginClient); err != nil {
		return err
	}
	r.live = append(r.live, want...)
	return nil
}

// checkReads reads the log from its start and requires exactly want.
func checkReads(l *UnifiedLog, want []crashBatch) error {
	var got []crashBatch
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		info, err := l.Read(nil, off, 1<<20, IsolationLogEnd, true)
		if err != nil {
			return err
		}
		if len(info.Records) == 0 {
			break
		}
		sc := record.NewScanner(info.Records, record.ScannerOptions{})
		for sc.Next() {
			b := sc.Batch()
			got = append(got, crashBatch{b.BaseOffset(), b.NextOffset(), b.PartitionLeaderEpoch(), bytes.Clone(b.Bytes())})
			off = b.NextOffset()
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("read %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].data, want[i].data) {
			return fmt.Errorf("batch [%d, %d) reads back different", want[i].base, want[i].next)
		}
	}
	return nil
}

// checkAcked reopens the log on mem without faults and requires every
// acknowledged batch at or above its log start, which must not exceed
// maxStart.
func checkAcked(mem vfs.FS, opts Options, acked []crashBatch, maxStart int64) error {
	opts.FS = mem
	l, err := Open(testDir, opts)
	if err != nil {
		return fmt.Errorf("reopen without faults: %w", err)
	}
	defer l.Close()
	s, err := readLogState(l)
	if err != nil {
		return fmt.Errorf("reopened log: %w\n%s", err, s)
	}
	c := crashCandidate{logStart: maxStart, flushed: acked}
	if err := c.matches(s); err != nil {
		return fmt.Errorf("reopened log: %w\n%s", err, s)
	}
	return nil
}

// TestFaultInjection injects an error into the n-th operation of one
// kind (create, write, sync, rename, remove, read) on one kind of file
// (.log, .index, .timeindex, the epoch and offsets checkpoints, the
// directory), for every n the workload reaches. The operation that hits
// it must return an error wrapping the injected one, never panic; after a
// failed write or fsync the log refuses writes with that same error while
// reads of the data it has still work; a failed Read leaves the log
// usable; and reopening the file system without faults finds every batch
// a successful Flush acknowledged before the fault.
func TestFaultInjection(t *testing.T) {
	maxN := 400
	if testing.Short() {
		maxN = 40
	}
	total := 0
	for _, kind := range faultOps {
		for _, path := range faultPaths {
			name := kind.name + "/" + strings.ReplaceAll(path, "/", "_")
			t.Run(name, func(t *testing.T) {
				injected := 0
				for n := 0; n < maxN; n++ {
					if !runFault(t, kind, path, n) {
						break
					}
					injected++
				}
				total += injected
			})
		}
	}
	t.Logf("%d faults injected", total)
}

// runFault runs the workload with the n-th matching operation failing and
// checks the outcome; it reports whether the fault was injected.
func runFault(t *testing.T, kind opKinds, path string, n int) bool {
	mem := vfs.NewMem()
	pred := errorfs.And(kind, errorfs.PathMatch(path), errorfs.OnIndex(int32(n)))
	counter := &errorfs.Counter{Injector: errorfs.ErrInjected.If(pred)}
	var lastWrite bool
	var r *faultRun
	var firedOn string
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		err := counter.MaybeError(op)
		if err != nil {
			lastWrite = op.Kind.ReadOrWrite() == errorfs.OpIsWrite
			firedOn = fmt.Sprintf("%s %s in %s", opKindName(op.Kind), op.Path, r.doing)
		}
		return err
	})
	r = &faultRun{
		t:   t,
		rng: rand.New(rand.NewPCG(7, 7)),
		fs:  errorfs.Wrap(mem, inj),
		opts: Options{
			SegmentBytes: 1024, SegmentIndexBytes: 4096, IndexIntervalBytes: 200, RetentionBytes: 3000,
			Now: func() time.Time { return time.UnixMilli(1_000_000) },
		},
		pendingCut: noCut,
	}
	r.opts.FS = r.fs
	err := r.workload()
	where := fmt.Sprintf("%s on %s, op %d, during %s", kind.name, path, n, r.doing)
	if counter.Load() == 0 {
		if err != nil {
			t.Fatalf("%s: no fault injected, yet %v", where, err)
		}
		return false
	}
	if err == nil {
		// An injected fault the log need not see: a failed remove of a
		// temp file, an error on a best-effort path. It must still keep
		// every acknowledged batch.
		if cerr := checkAcked(mem, Options{SegmentBytes: 1024, SegmentIndexBytes: 4096}, r.acked, r.maxStart); cerr != nil {
			t.Fatalf("%s: fault swallowed, then %v", where, cerr)
		}
		t.Logf("%s: fault on %s not returned", where, firedOn)
		return true
	}
	if !isInjected(err) {
		t.Fatalf("%s: want the injected error, got %v", where, err)
	}
	if err.Error() == errorfs.ErrInjected.Error() {
		t.Fatalf("%s: error not wrapped with context: %v", where, err)
	}
	acked := r.acked
	if r.pendingCut != noCut {
		acked = batchesBelow(acked, r.pendingCut)
	}
	if l := r.l; l != nil && r.doing != "close" && r.doing != "reopen" && r.doing != "open" {
		if lastWrite {
			// Sticky: the next write fails with the same error.
			if _, err2 := l.AppendAsLeader(buildBatches(t, 1, 1, 10, 1_000_000, 0, -1), 1, OriginClient); err2 != err {
				t.Fatalf("%s: append after a failed write: %v, want the sticky %v", where, err2, err)
			}
			if err2 := l.Flush(); err2 != err {
				t.Fatalf("%s: flush after a failed write: %v, want the sticky %v", where, err2, err)
			}
		}
		if r.doing != "read" {
			// What the log holds still reads back (no read faults left:
			// OnIndex fired).
			want := batchesFrom(r.live, l.LogStartOffset()) // a retention may have moved it
			if r.pendingCut != noCut {
				want = nil // the truncation may have happened in part
			}
			if want != nil {
				if rerr := checkReads(l, want); rerr != nil {
					t.Fatalf("%s: reads after the failure: %v", where, rerr)
				}
			}
		} else {
			// A failed read leaves the log usable.
			if _, err2 := l.AppendAsLeader(buildBatches(t, 1, 1, 10, 1_000_000, 0, -1), 1, OriginClient); err2 != nil {
				t.Fatalf("%s: append after a failed read: %v", where, err2)
			}
			if err2 := l.Flush(); err2 != nil {
				t.Fatalf("%s: flush after a failed read: %v", where, err2)
			}
			if _, rerr := readLogState(l); rerr != nil {
				t.Fatalf("%s: reads after a failed read: %v", where, rerr)
			}
		}
		_ = l.Close()
	}
	if cerr := checkAcked(mem, Options{SegmentBytes: 1024, SegmentIndexBytes: 4096}, acked, r.maxStart); cerr != nil {
		t.Fatalf("%s (%v): %v", where, err, cerr)
	}
	return true
}
