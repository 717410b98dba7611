package remote

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/epochcache"
)

// TestMetadataDataDriven runs the scenario files under testdata/metadata.
// Each file starts with an empty crashable in-memory FS and a manager open
// on it. Segment ids are names (X, A, ...) mapped to fixed UUIDs; output
// prints the names.
//
// Commands (errors are printed as output, never fatal); every command takes
// an optional partition=N (default 0) of topic "t":
//
//	add id=X start=S end=E epochs=0@0,1@80 [size=N] [txn] [broker=B] [ts=T]
//	finish id=X | delete-start id=X | delete-finish id=X   [ts=T]
//	update id=X state=STATE                 any target state, by Kafka name
//	lookup epoch=E offset=(O,...)           SegmentFor: a name or "none"
//	highest epoch=(E,...)                   HighestOffsetForEpoch
//	list [epoch=E]                          ListSegments(ForEpoch)
//	size [epoch=E]                          RemoteLogSize (no epoch: all)
//	next-txn epoch=E offset=O               NextSegmentWithTxnIndex
//	delete-partition state=STATE            PutPartitionDeleteMetadata
//	delete-state                            PartitionDeleteState
//	reopen                                  Close and Open again
//	crash                                   CrashClone (nothing unsynced kept), Open the clone
//	transitions                             the table of IsValidTransition
func TestMetadataDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/metadata", func(t *testing.T, path string) {
		e := newMetaEnv(t)
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

const metaDir = "meta"

type metaEnv struct {
	t     testing.TB
	mem   *vfs.MemFS
	m     *MetadataManager
	names map[UUID]string
	ids   map[string]UUID
}

func newMetaEnv(t testing.TB) *metaEnv {
	e := &metaEnv{t: t, mem: vfs.NewCrashableMem(), names: map[UUID]string{}, ids: map[string]UUID{}}
	e.open()
	return e
}

func (e *metaEnv) open() {
	m, err := Open(e.mem, metaDir, MetadataOptions{})
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	e.m = m
}

func (e *metaEnv) close() {
	if e.m != nil {
		_ = e.m.Close()
		e.m = nil
	}
}

var testTopicID = UUID{0x74, 0x69, 0x65, 0x72, 0x6c, 0x6f, 0x67} // "tierlog"

func testPartition(n int32) TopicIDPartition {
	return TopicIDPartition{TopicID: testTopicID, Topic: "t", Partition: n}
}

// id maps a segment name to a fixed UUID (the name's bytes, zero padded).
func (e *metaEnv) id(name string) UUID {
	if u, ok := e.ids[name]; ok {
		return u
	}
	var u UUID
	copy(u[:], name)
	u[15] = 0xee
	e.ids[name], e.names[u] = u, name
	return u
}

// printable replaces UUIDs and the partition's text form with short names.
func (e *metaEnv) printable(s string) string {
	for u, name := range e.names {
		s = strings.ReplaceAll(s, u.String(), name)
	}
	return strings.ReplaceAll(s, testTopicID.String()+":", "")
}

func parseSegmentState(s string) SegmentState {
	for st := CopySegmentStarted; st <= DeleteSegmentFinished; st++ {
		if st.String() == s {
			return st
		}
	}
	return 0x7f
}

func parsePartitionDeleteState(s string) PartitionDeleteState {
	for _, st := range []PartitionDeleteState{DeletePartitionMarked, DeletePartitionStarted, DeletePartitionFinished} {
		if st.String() == s || strings.EqualFold(strings.TrimPrefix(st.String(), "DELETE_PARTITION_"), s) {
			return st
		}
	}
	return 0x7f
}

func formatSegment(s *SegmentMetadata) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%d,%d] %s %s size=%d", s.SegmentID.ID, s.StartOffset, s.EndOffset,
		epochcache.FormatEntries(s.SegmentLeaderEpochs), s.State, s.SizeBytes)
	if !s.TxnIndexEmpty {
		b.WriteString(" txn")
	}
	return b.String()
}

func (e *metaEnv) handle(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	arg := func(key string) (string, bool) {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "", true
				}
				return a.Vals[0], true
			}
		}
		return "", false
	}
	intArg := func(key string, def int64) int64 {
		v, ok := arg(key)
		if !ok || v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "bad %s=%q", key, v)
		}
		return n
	}
	ints := func(key string) []int64 {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				var out []int64
				for _, v := range a.Vals {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						d.Fatalf(t, "bad %s=%q", key, v)
					}
					out = append(out, n)
				}
				return out
			}
		}
		d.Fatalf(t, "missing %s", key)
		return nil
	}
	tp := testPartition(int32(intArg("partition", 0)))
	segID := func() SegmentID {
		name, ok := arg("id")
		if !ok {
			d.Fatalf(t, "missing id")
		}
		return SegmentID{TopicIDPartition: tp, ID: e.id(name)}
	}
	result := func(err error) string {
		if err != nil {
			return e.printable("error: " + err.Error())
		}
		return "ok"
	}
	update := func(state SegmentState) string {
		return result(e.m.UpdateSegment(ctx, SegmentMetadataUpdate{
			SegmentID: segID(), State: state, EventTimestampMs: intArg("ts", 0), BrokerID: int32(intArg("broker", 0)),
		}))
	}

	switch d.Cmd {
	case "add":
		epochsArg, _ := arg("epochs")
		epochs, err := epochcache.ParseEntries(epochsArg)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		_, txn := arg("txn")
		state := CopySegmentStarted
		if s, ok := arg("state"); ok {
			state = parseSegmentState(s)
		}
		return result(e.m.AddSegment(ctx, SegmentMetadata{
			SegmentID:           segID(),
			StartOffset:         intArg("start", 0),
			EndOffset:           intArg("end", 0),
			SegmentLeaderEpochs: epochs,
			SizeBytes:           intArg("size", 0),
			MaxTimestampMs:      intArg("max-ts", 0),
			BrokerID:            int32(intArg("broker", 0)),
			EventTimestampMs:    intArg("ts", 0),
			State:               state,
			TxnIndexEmpty:       !txn,
		}))
	case "finish":
		return update(CopySegmentFinished)
	case "delete-start":
		return update(DeleteSegmentStarted)
	case "delete-finish":
		return update(DeleteSegmentFinished)
	case "update":
		s, _ := arg("state")
		return update(parseSegmentState(s))
	case "lookup":
		epoch := int32(intArg("epoch", 0))
		var out []string
		for _, off := range ints("offset") {
			seg, ok, err := e.m.SegmentFor(tp, epoch, off)
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("(%d, %d) -> error: %v", epoch, off, err))
			case !ok:
				out = append(out, fmt.Sprintf("(%d, %d) -> none", epoch, off))
			default:
				out = append(out, fmt.Sprintf("(%d, %d) -> %s", epoch, off, seg.SegmentID.ID))
			}
		}
		return e.printable(strings.Join(out, "\n"))
	case "highest":
		var out []string
		for _, ep := range ints("epoch") {
			h, ok, err := e.m.HighestOffsetForEpoch(tp, int32(ep))
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("epoch %d: error: %v", ep, err))
			case !ok:
				out = append(out, fmt.Sprintf("epoch %d: none", ep))
			default:
				out = append(out, fmt.Sprintf("epoch %d: %d", ep, h))
			}
		}
		return strings.Join(out, "\n")
	case "list":
		var segs []SegmentMetadata
		var err error
		if _, ok := arg("epoch"); ok {
			segs, err = e.m.ListSegmentsForEpoch(tp, int32(intArg("epoch", 0)))
		} else {
			segs, err = e.m.ListSegments(tp)
		}
		if err != nil {
			return result(err)
		}
		if len(segs) == 0 {
			return "(none)"
		}
		var out []string
		for i := range segs {
			out = append(out, formatSegment(&segs[i]))
		}
		return e.printable(strings.Join(out, "\n"))
	case "size":
		epoch := int64(-1)
		if _, ok := arg("epoch"); ok {
			epoch = intArg("epoch", 0)
		}
		n, err := e.m.RemoteLogSize(tp, int32(epoch))
		if err != nil {
			return result(err)
		}
		return strconv.FormatInt(n, 10)
	case "next-txn":
		seg, ok, err := e.m.NextSegmentWithTxnIndex(tp, int32(intArg("epoch", 0)), intArg("offset", 0))
		switch {
		case err != nil:
			return result(err)
		case !ok:
			return "none"
		}
		return e.printable(seg.SegmentID.ID.String())
	case "delete-partition":
		s, _ := arg("state")
		return result(e.m.PutPartitionDeleteMetadata(ctx, PartitionDeleteMetadata{
			TopicIDPartition: tp, State: parsePartitionDeleteState(s), EventTimestampMs: intArg("ts", 0),
		}))
	case "delete-state":
		st, err := e.m.PartitionDeleteState(tp)
		if err != nil {
			return result(err)
		}
		return st.String()
	case "reopen":
		if err := e.m.Close(); err != nil {
			return result(err)
		}
		e.open()
		return "ok"
	case "crash":
		clone := e.mem.CrashClone(vfs.CrashCloneCfg{})
		_ = e.m.Close()
		e.mem = clone
		e.open()
		return "ok"
	case "transitions":
		states := []SegmentState{NoSegmentState, CopySegmentStarted, CopySegmentFinished, DeleteSegmentStarted, DeleteSegmentFinished}
		var out []string
		for _, from := range states {
			var to []string
			for _, s := range states[1:] {
				if IsValidTransition(from, s) {
					to = append(to, s.String())
				}
			}
			sort.Strings(to)
			out = append(out, fmt.Sprintf("%s -> %s", from, strings.Join(to, ", ")))
		}
		return strings.Join(out, "\n")
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}
