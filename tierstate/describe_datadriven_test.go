package tierstate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// Describe reads real logs and a real remote metadata store.
var (
	_ DescribeLog         = (*log.UnifiedLog)(nil)
	_ RemoteSegmentLister = (*remote.MetadataManager)(nil)
)

// TestDescribeDataDriven runs testdata/describe_*: the operator recovery of
// a phase-1 partition (https://github.com/aiven/inkless/pull/855). Each
// replica has a real *log.UnifiedLog and its broker's own
// *remote.MetadataManager (brokers read the remote log metadata at
// different speeds), all on one vfs.NewMem.
//
// Partition:
//
//	switch seal=S [phase=phase-1|phase-2|pending|classic] [leader-epoch=L]
//	    the State, built through the controller's operations (phase 2 by
//	    the flag commit with R = L - 1); consolidating
//	reseal seal=S                      operator `seal S` (State.Reseal)
//	plan-reseal seal=S leader=N        the tool's `seal S` (PlanReseal) with
//	                                   replica N's kept description as the
//	                                   leader's; on success the State
//	                                   becomes the plan's
//	cross-tier-start offset=X          the control plane's X
//
// Replicas (broker ids):
//
//	replica id=N [fenced] [not-ready] [no-log]
//	    a broker with an empty log and an empty remote metadata view
//	append replica=N epoch=E count=C   one leader batch of C records
//	set-hw replica=N offset=O
//	truncate-fully replica=N offset=O  an empty log at O (local log start O)
//
// Remote segments (in every replica's view unless replicas= says which):
//
//	remote-segment name=A start=S end=E [epochs=(E@O,...)] [broker=B]
//	               [state=started|finished|delete-started] [replicas=(N,...)]
//	remote-update name=A state=delete-started|delete-finished
//	remote replica=N                   the segments as that view lists them
//
// Checks:
//
//	describe [replica=N]               Describe (every replica when none
//	                                   named); keeps the description
//	elect replica=N                    CheckElectReplica(State, description)
//	start-phase-2 [accept-data-loss] [leader-epoch=L] [replicas=(N,...)]
//	    PlanStartPhaseTwo for the assignment (default: every replica)
//	    with the kept descriptions of its replicas; on success the State
//	    becomes the plan's Next
func TestDescribeDataDriven(t *testing.T) {
	forEachFile(t, "testdata/describe_*", func(t *testing.T, path string) {
		e := &describeEnv{fs: vfs.NewMem(), replicas: map[int32]*describeReplica{},
			descriptions: map[int32]ReplicaDescription{}, segments: map[string]describeSegment{}, leaderEpoch: 1}
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type describeEnv struct {
	fs           vfs.FS
	state        State
	leaderEpoch  int32
	x            int64
	replicas     map[int32]*describeReplica
	descriptions map[int32]ReplicaDescription
	segments     map[string]describeSegment
}

type describeReplica struct {
	log      *log.UnifiedLog // nil: the broker does not host the partition
	meta     *remote.MetadataManager
	fenced   bool
	notReady bool
}

type describeSegment struct {
	id    remote.SegmentID
	views []int32
}

func (e *describeEnv) close() {
	for _, r := range e.replicas {
		if r.log != nil {
			_ = r.log.Close()
		}
		_ = r.meta.Close()
	}
}

func (e *describeEnv) ids() []int32 {
	ids := make([]int32, 0, len(e.replicas))
	for id := range e.replicas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (e *describeEnv) replica(t *testing.T, d *datadriven.TestData) (int32, *describeReplica) {
	var id int32
	d.ScanArgs(t, "replica", &id)
	r := e.replicas[id]
	if r == nil {
		d.Fatalf(t, "no replica %d", id)
	}
	return id, r
}

func (e *describeEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "switch":
		return e.setSwitch(t, d)
	case "reseal":
		var seal int64
		d.ScanArgs(t, "seal", &seal)
		s, err := e.state.Reseal(seal, nil, false)
		if err != nil {
			return "error: " + err.Error()
		}
		e.state = s
		return s.String()
	case "plan-reseal":
		var seal int64
		var leader int32
		d.ScanArgs(t, "seal", &seal)
		d.ScanArgs(t, "leader", &leader)
		desc, ok := e.descriptions[leader]
		if !ok {
			d.Fatalf(t, "replica %d not described", leader)
		}
		s, err := PlanReseal(e.state, ResealRequest{Seal: seal, Leader: leader,
			LogStartOffset: desc.CrossTierLogStartOffset, LeaderLogEndOffset: desc.LogEndOffset,
			LeaderHighWatermark: desc.HighWatermark})
		if err != nil {
			return "error: " + err.Error()
		}
		e.state = s
		return s.String()
	case "cross-tier-start":
		d.ScanArgs(t, "offset", &e.x)
		return fmt.Sprintf("x=%d", e.x)
	case "replica":
		return e.addReplica(t, d)
	case "append", "set-hw", "truncate-fully":
		return e.handleLog(t, d)
	case "remote-segment":
		return e.addSegment(t, d)
	case "remote-update":
		return e.updateSegment(t, d)
	case "remote":
		_, r := e.replica(t, d)
		segs, err := r.meta.ListSegments(testTP)
		require.NoError(t, err)
		return e.segmentsString(segs)
	case "describe":
		return e.describe(t, d)
	case "elect":
		id, _ := e.replica(t, d)
		desc, ok := e.descriptions[id]
		if !ok {
			d.Fatalf(t, "replica %d not described", id)
		}
		if err := CheckElectReplica(e.state, desc); err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("ok: send AlterDisklessSwitch(seal=%d, leader=%d): ISR = {%d}", desc.Seal, id, id)
	case "start-phase-2":
		return e.startPhaseTwo(t, d)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// setSwitch builds the State through the controller's operations, so it
// is one the metadata can hold.
func (e *describeEnv) setSwitch(t *testing.T, d *datadriven.TestData) string {
	phase := "phase-1"
	var seal int64
	d.MaybeScanArgs(t, "phase", &phase)
	d.MaybeScanArgs(t, "seal", &seal)
	d.MaybeScanArgs(t, "leader-epoch", &e.leaderEpoch)
	s := State{}.WithConsolidating(true)
	var err error
	if phase != "classic" {
		s, err = s.ArmSwitch()
	}
	if err == nil && (phase == "phase-1" || phase == "phase-2") {
		s, err = s.CommitSeal(seal, nil)
	}
	if err == nil && phase == "phase-2" {
		s, err = s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: e.leaderEpoch,
			Seal: seal, LastClassicLeaderEpoch: e.leaderEpoch - 1}, Leadership{Leader: 1, LeaderEpoch: e.leaderEpoch})
	}
	require.NoError(t, err)
	e.state = s
	return s.String()
}

func (e *describeEnv) addReplica(t *testing.T, d *datadriven.TestData) string {
	var id int32
	d.ScanArgs(t, "id", &id)
	if e.replicas[id] != nil {
		d.Fatalf(t, "replica %d exists", id)
	}
	meta, err := remote.Open(e.fs, fmt.Sprintf("meta-%d", id), remote.MetadataOptions{})
	require.NoError(t, err)
	r := &describeReplica{meta: meta, fenced: d.HasArg("fenced"), notReady: d.HasArg("not-ready")}
	e.replicas[id] = r
	if d.HasArg("no-log") {
		return fmt.Sprintf("replica %d: no log", id)
	}
	r.log, err = log.Open(fmt.Sprintf("log-%d", id), log.Options{FS: e.fs, SegmentIndexBytes: 4096,
		RemoteStorageEnabled: true, Now: func() time.Time { return time.UnixMilli(testNowMs) }})
	require.NoError(t, err)
	return e.logString(id)
}

func (e *describeEnv) logString(id int32) string {
	l := e.replicas[id].log
	return fmt.Sprintf("replica %d: local-log-start=%d leo=%d hw=%d epochs=%s", id, l.LocalLogStartOffset(),
		l.LogEndOffset(), l.HighWatermark(), epochcache.FormatEntries(l.EpochEntries()))
}

func (e *describeEnv) handleLog(t *testing.T, d *datadriven.TestData) string {
	id, r := e.replica(t, d)
	if r.log == nil {
		d.Fatalf(t, "replica %d has no log", id)
	}
	switch d.Cmd {
	case "append":
		var epoch int32
		var count int
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "count", &count)
		_, err := r.log.AppendAsLeader(producerBatch(t, count, base.NoProducerID, 0), epoch, log.OriginClient)
		require.NoError(t, err)
	case "set-hw":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		r.log.UpdateHighWatermark(offset)
	case "truncate-fully":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		require.NoError(t, r.log.TruncateFullyAndStartAt(offset, base.UndefinedOffset))
	}
	return e.logString(id)
}

// views returns the replicas named by replicas=(...), or all of them.
func (e *describeEnv) views(t *testing.T, d *datadriven.TestData) []int32 {
	arg, ok := d.Arg("replicas")
	if !ok {
		return e.ids()
	}
	out := make([]int32, len(arg.Vals))
	for i := range arg.Vals {
		arg.Scan(t, i, &out[i])
		if e.replicas[out[i]] == nil {
			d.Fatalf(t, "no replica %d", out[i])
		}
	}
	return out
}

var describeSegmentStates = map[string]remote.SegmentState{
	"started":         remote.CopySegmentStarted,
	"finished":        remote.CopySegmentFinished,
	"delete-started":  remote.DeleteSegmentStarted,
	"delete-finished": remote.DeleteSegmentFinished,
}

// transitions lists the updates that take a new (STARTED) segment to a
// state.
func describeTransitions(to remote.SegmentState) []remote.SegmentState {
	var out []remote.SegmentState
	for _, s := range []remote.SegmentState{remote.CopySegmentFinished, remote.DeleteSegmentStarted,
		remote.DeleteSegmentFinished} {
		if s > to {
			break
		}
		out = append(out, s)
	}
	return out
}

func (e *describeEnv) addSegment(t *testing.T, d *datadriven.TestData) string {
	var name string
	state := "finished"
	broker := int32(1)
	seg := remote.SegmentMetadata{SizeBytes: 100, MaxTimestampMs: testNowMs, EventTimestampMs: testNowMs,
		State: remote.CopySegmentStarted, TxnIndexEmpty: true}
	d.ScanArgs(t, "name", &name)
	d.ScanArgs(t, "start", &seg.StartOffset)
	d.ScanArgs(t, "end", &seg.EndOffset)
	d.MaybeScanArgs(t, "state", &state)
	d.MaybeScanArgs(t, "broker", &broker)
	target, ok := describeSegmentStates[state]
	if !ok {
		d.Fatalf(t, "unknown state %s", state)
	}
	seg.BrokerID = broker
	seg.SegmentLeaderEpochs = []epochcache.Entry{{Epoch: 0, StartOffset: seg.StartOffset}}
	if d.HasArg("epochs") {
		seg.SegmentLeaderEpochs = epochsArg(t, d, "epochs")
	}
	var u remote.UUID
	copy(u[:], name)
	u[15] = 0xee
	seg.SegmentID = remote.SegmentID{TopicIDPartition: testTP, ID: u}
	views := e.views(t, d)
	e.segments[name] = describeSegment{id: seg.SegmentID, views: views}
	for _, id := range views {
		meta := e.replicas[id].meta
		require.NoError(t, meta.AddSegment(context.Background(), seg))
		for _, s := range describeTransitions(target) {
			require.NoError(t, meta.UpdateSegment(context.Background(), remote.SegmentMetadataUpdate{
				SegmentID: seg.SegmentID, State: s, EventTimestampMs: testNowMs, BrokerID: broker}))
		}
	}
	return fmt.Sprintf("%s [%d, %d] %s %s in %s", name, seg.StartOffset, seg.EndOffset,
		epochcache.FormatEntries(seg.SegmentLeaderEpochs), target, describeIDs(views))
}

func (e *describeEnv) updateSegment(t *testing.T, d *datadriven.TestData) string {
	var name, state string
	d.ScanArgs(t, "name", &name)
	d.ScanArgs(t, "state", &state)
	seg, ok := e.segments[name]
	if !ok {
		d.Fatalf(t, "no segment %s", name)
	}
	target, ok := describeSegmentStates[state]
	if !ok {
		d.Fatalf(t, "unknown state %s", state)
	}
	for _, id := range seg.views {
		err := e.replicas[id].meta.UpdateSegment(context.Background(), remote.SegmentMetadataUpdate{
			SegmentID: seg.id, State: target, EventTimestampMs: testNowMs, BrokerID: 1})
		if err != nil {
			return "error: " + err.Error()
		}
	}
	return fmt.Sprintf("%s %s in %s", name, target, describeIDs(seg.views))
}

func (e *describeEnv) segmentsString(segs []remote.SegmentMetadata) string {
	if len(segs) == 0 {
		return "no segments"
	}
	byID := map[remote.UUID]string{}
	for name, s := range e.segments {
		byID[s.id.ID] = name
	}
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s [%d, %d] %s broker=%d", byID[s.SegmentID.ID], s.StartOffset, s.EndOffset, s.State, s.BrokerID)
	}
	return b.String()
}

func describeIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (e *describeEnv) describe(t *testing.T, d *datadriven.TestData) string {
	ids := e.ids()
	if d.HasArg("replica") {
		id, _ := e.replica(t, d)
		ids = []int32{id}
	}
	var lines []string
	for _, id := range ids {
		r := e.replicas[id]
		req := DescribeRequest{Partition: testTP, BrokerID: id, State: e.state, FencedByBroker: r.fenced,
			CrossTierLogStartOffset: e.x, Remote: r.meta,
			RemoteReady: func(remote.TopicIDPartition) bool { return !r.notReady }}
		if r.log != nil {
			// A nil *log.UnifiedLog in the interface would not be nil.
			req.Log = r.log
		}
		desc, err := Describe(req)
		if err != nil {
			delete(e.descriptions, id)
			lines = append(lines, fmt.Sprintf("replica %d: error: %s", id, e.printable(err.Error())))
			continue
		}
		e.descriptions[id] = desc
		lines = append(lines, desc.String())
	}
	return strings.Join(lines, "\n")
}

func (e *describeEnv) startPhaseTwo(t *testing.T, d *datadriven.TestData) string {
	req := StartPhaseTwoRequest{CurrentLeaderEpoch: e.leaderEpoch, AcceptDataLoss: d.HasArg("accept-data-loss")}
	d.MaybeScanArgs(t, "leader-epoch", &req.CurrentLeaderEpoch)
	req.Replicas = e.ids()
	if d.HasArg("replicas") {
		req.Replicas = e.views(t, d)
	}
	for _, id := range req.Replicas {
		if desc, ok := e.descriptions[id]; ok {
			req.Descriptions = append(req.Descriptions, desc)
		}
	}
	plan, err := PlanStartPhaseTwo(e.state, req)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seal %d -> %d (remote end from replica %d), lost %s\n", plan.PreviousSeal, plan.Seal,
		plan.RemoteEndFrom, plan.Lost)
	if len(plan.NotDescribed) > 0 {
		fmt.Fprintf(&b, "not described: %v\n", plan.NotDescribed)
	}
	fmt.Fprintf(&b, "%s\nrecord: %s\n", plan.Next, ChangeTags(e.state, plan.Next))
	if r := plan.Reminder(); r != "" {
		fmt.Fprintf(&b, "reminder: %s\n", r)
	} else {
		b.WriteString("reminder: none (the seal is unchanged)\n")
	}
	e.state = plan.Next
	e.leaderEpoch = req.CurrentLeaderEpoch + 1
	return b.String()
}

// printable drops the topic id from partition names.
func (e *describeEnv) printable(s string) string {
	return strings.ReplaceAll(s, testTP.TopicID.String()+":", "")
}
