package consolidate

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// classicBatch is one client batch of n records "<prefix>-<i>"; a
// producer id >= 0 makes it transactional from sequence seq.
func classicBatch(t testing.TB, n int, prefix string, pid int64, seq int32) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	if pid >= 0 {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, 0, seq, true
	}
	b := record.NewBuilder(opts)
	for i := range n {
		b.Add(int64(1000+i), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// writeClassic writes the classic log of the sealing tests: epoch 0
// writes [0, 80) in batches of 10, epoch 2 writes [80, 90), producer 7
// opens a transaction at [90, 95) and [95, 99) follows: LEO = 99, one
// segment, the transaction undecided. It flushes, so nothing of it is
// lost in a crash.
func writeClassic(t testing.TB, l LeaderAppender, flush func() error) {
	t.Helper()
	for i := range 8 {
		_, err := l.AppendAsLeader(classicBatch(t, 10, fmt.Sprintf("e0b%d", i), -1, 0), 0, log.OriginClient)
		require.NoError(t, err)
	}
	for _, b := range [][]byte{classicBatch(t, 10, "e2a", -1, 0), classicBatch(t, 5, "txn", 7, 0), classicBatch(t, 4, "e2b", -1, 0)} {
		_, err := l.AppendAsLeader(b, 2, log.OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, flush())
}

// fakeController commits the leader's requests with the tierstate rules.
type fakeController struct {
	state  tierstate.State
	leader tierstate.Leadership
	calls  []string
}

func (c *fakeController) ProposeSeal(_ context.Context, _ remote.TopicIDPartition, epoch int32, p SealProposal) error {
	c.calls = append(c.calls, fmt.Sprintf("InitDisklessLog seal %d epoch %d producers %d", p.Seal, epoch, len(p.Producers)))
	s, err := c.state.CommitSealProposal(p)
	if err == nil {
		c.state = s
	}
	return err
}

func (c *fakeController) SetClassicPrefixInRemoteStorage(_ context.Context, _ remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	c.calls = append(c.calls, fmt.Sprintf("SetClassicPrefixInRemoteStorage seal %d R %d", req.Seal, req.LastClassicLeaderEpoch))
	s, err := c.state.SetClassicPrefixInRemoteStorage(req, c.leader)
	if err == nil {
		c.state = s
	}
	return err
}

// The leader's switch end to end with its numbers: the classic log of
// writeClassic (epochs 0@0 2@80, LEO 99, producer 7's transaction open at
// 90) is sealed at 100 (the ABORT marker at 99, the active segment rolled
// at 100), its classic appends are refused from the arming on, its WAL row
// is W = 0, HW = S = 100, and it asks for phase 2 with R = 2 only once
// remote storage holds 99.
func TestLeaderSwitch(t *testing.T) {
	e := newWALEnv(t)
	l := e.openLog("leader")
	writeClassic(t, l, l.Flush)
	l.UpdateHighWatermark(99)

	ctrl := &fakeController{leader: tierstate.Leadership{Leader: 1, LeaderEpoch: 2}}
	var err error
	ctrl.state, err = tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	gate := NewClassicGate(l, tierstate.State{})
	sw := &LeaderSwitch{TP: e.tp, BrokerID: 1, LeaderEpoch: 2, Log: l, Gate: gate, Controller: ctrl,
		ControlPlane: e.cp, NowMs: func() int64 { return 5_000 }}

	// Seal pending: a client append is refused, nothing written.
	st, err := sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	_, err = gate.AppendAsLeader(classicBatch(t, 1, "late", -1, 0), 2, log.OriginClient)
	require.ErrorIs(t, err, ErrSealPending)
	require.ErrorIs(t, err, ErrClassicAppendRefused)

	// The first step aborted producer 7 at 99 and rolled; the follower
	// has not replicated the marker yet (HW 99 < LEO 100): no proposal.
	require.Equal(t, []OpenTxn{{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: -1, FirstOffset: 90}}, st.Seal.Aborted)
	require.True(t, st.Seal.Rolled)
	require.False(t, st.Seal.Ready)
	require.False(t, st.Proposed)
	require.Equal(t, int64(100), l.LogEndOffset())
	require.Empty(t, l.OngoingTransactions())
	aborted, err := l.CollectAbortedTransactions(0, 100)
	require.NoError(t, err)
	require.Equal(t, []log.AbortedTxn{{ProducerID: 7, FirstOffset: 90, LastOffset: 99, LastStableOffset: 100}}, aborted)
	segs, err := l.Segments(0)
	require.NoError(t, err)
	require.Equal(t, "[0, 100) [100, 100) active", formatSegments(segs))
	require.Equal(t, "0@0 2@80", epochcache.FormatEntries(l.EpochEntries()))

	// The follower catches up: the proposal is S = 100 with producer 7's
	// last batch, and the controller commits it.
	l.UpdateHighWatermark(100)
	st, err = sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.True(t, st.Proposed)
	require.Empty(t, st.Seal.Aborted)
	require.False(t, st.Seal.Rolled, "the active segment is empty")
	require.Equal(t, []tierstate.ProducerStateEntry{{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, LastSequence: 4,
		AssignedOffset: 90, BatchMaxTimestamp: 1004}}, st.Seal.Proposal.Producers)
	require.Equal(t, "0@0 2@80", epochcache.FormatEntries(st.Seal.Proposal.Lineage), "the lineage below the seal")
	require.Equal(t, tierstate.PhaseOne, ctrl.state.Phase())
	require.Equal(t, int64(100), ctrl.state.Seal())
	require.Equal(t, int32(2), ctrl.state.SealEpoch(), "the epoch of the marker at 99")

	// Phase 1: every classic append is refused, the broker's own too;
	// the WAL row is created once.
	st, err = sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.NotNil(t, st.Init)
	require.Nil(t, st.PrefixSent, "remote storage holds nothing yet")
	_, err = gate.AppendAsLeader(classicBatch(t, 1, "late", -1, 0), 2, log.OriginCoordinator)
	var refused *ClassicAppendError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, &ClassicAppendError{Phase: tierstate.PhaseOne, Seal: 100}, refused)
	require.ErrorIs(t, err, ErrClassicLogSealed)
	require.Equal(t, int64(100), l.LogEndOffset())
	info, err := e.cp.LogInfo(e.ctx, walTP(e.tp))
	require.NoError(t, err)
	require.Equal(t, [3]int64{0, 100, 100}, [3]int64{info.LogStartOffset, info.HighWatermark, info.DisklessStartOffset}, "W, HW, S")
	require.Equal(t, []wal.ProducerState{{ProducerID: 7, ProducerEpoch: 0,
		Batches: []wal.ProducerBatch{{BaseSequence: 0, LastSequence: 4, AssignedOffset: 90, Timestamp: 1004}}}}, st.Init.ProducerStates)

	// Remote storage reaches 98, then 99: the request goes once, R = 2.
	l.UpdateHighestOffsetInRemoteStorage(98, l.TruncationCount())
	st, err = sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.Nil(t, st.Init, "the row exists")
	require.Nil(t, st.PrefixSent)
	l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount())
	st, err = sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.Equal(t, &tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 2, Seal: 100, LastClassicLeaderEpoch: 2}, st.PrefixSent)
	require.Equal(t, tierstate.PhaseTwo, ctrl.state.Phase())
	require.Equal(t, int32(3), ctrl.state.DisklessLeaderEpoch())
	st, err = sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.Nil(t, st.PrefixSent)
	require.Equal(t, []string{
		"InitDisklessLog seal 100 epoch 2 producers 1",
		"SetClassicPrefixInRemoteStorage seal 100 R 2",
	}, ctrl.calls)
}

func formatSegments(segs []log.SegmentInfo) string {
	out := ""
	for i, s := range segs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("[%d, %d)", s.BaseOffset, s.NextOffset)
		if s.Active {
			out += " active"
		}
	}
	return out
}

func TestPlanSeal(t *testing.T) {
	open := []OpenTxn{{ProducerID: 7, FirstOffset: 90}}
	for _, c := range []struct {
		name string
		in   SealInput
		want SealPlan
	}{
		{"classic: nothing", SealInput{Phase: tierstate.PhaseClassic, LogEnd: 99, ActiveBase: 0}, SealPlan{}},
		{"committed: nothing", SealInput{Phase: tierstate.PhaseOne, LogEnd: 100, HighWatermark: 100, ActiveBase: 100}, SealPlan{}},
		{"open transaction: abort and roll", SealInput{Phase: tierstate.PhaseSealPending, LogEnd: 99, HighWatermark: 99, Open: open},
			SealPlan{Seal: true, Abort: open, Roll: true}},
		{"non-empty active segment: roll", SealInput{Phase: tierstate.PhaseSealPending, LogEnd: 99, HighWatermark: 99, ActiveBase: 0},
			SealPlan{Seal: true, Roll: true}},
		{"high watermark behind: wait", SealInput{Phase: tierstate.PhaseSealPending, LogEnd: 100, HighWatermark: 99, ActiveBase: 100},
			SealPlan{Seal: true}},
		{"sealed: propose the log end", SealInput{Phase: tierstate.PhaseSealPending, LogEnd: 100, HighWatermark: 100, ActiveBase: 100},
			SealPlan{Seal: true, Ready: true, Proposed: 100}},
		{"empty log: seal 0", SealInput{Phase: tierstate.PhaseSealPending}, SealPlan{Seal: true, Ready: true, Proposed: 0}},
	} {
		require.Equal(t, c.want, PlanSeal(c.in), c.name)
	}
}

func TestSealRefusals(t *testing.T) {
	l := &log.UnifiedLog{}
	_, err := SealLeader(tierstate.State{}, l, 0, 0)
	require.ErrorIs(t, err, tierstate.ErrInvalidTransition, "a classic partition is not sealed")

	e := newWALEnv(t)
	ll := e.openLog("past")
	writeClassic(t, ll, ll.Flush)
	s, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	_, err = PlanInitDisklessLog(s, e.tp, ll)
	require.ErrorIs(t, err, tierstate.ErrInvalidTransition, "the seal is not committed")
	s, err = s.CommitSeal(90, nil)
	require.NoError(t, err)
	_, err = PlanInitDisklessLog(s, e.tp, ll)
	require.ErrorIs(t, err, ErrLogPastSeal)
	require.ErrorContains(t, err, "log end 99, seal 90")
}

// TestSealLeaderCrash crashes the leader's disk before every file
// operation of the sealing (the marker's write, the roll's new segment
// and producer snapshot, the flush's syncs; unsynced data dropped), and
// once more after the proposal, reopens the log from the image and seals
// again. Every image must seal at its log end with every classic record
// of [0, 99) kept, producer 7's transaction aborted by exactly one marker
// just below the seal, nothing open, the epochs 0@0 2@80. A lost marker
// is written again. The roll's new segment never survives without the
// marker: the rolled segment's data is synced before any directory fsync
// can make the new segment's entry durable (Kafka's log can keep the new
// segment and lose the marker, leaving a gap at 99 and a seal at 101), so
// every image seals at 100. An image taken after the proposal is sealed
// at the proposed offset as it is: the flush before the proposal made the
// seal durable.
func TestSealLeaderCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll("leader", 0o755))
	root, err := mem.OpenDir("")
	require.NoError(t, err)
	require.NoError(t, root.Sync())
	require.NoError(t, root.Close())
	pending, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)

	seal := func(l *log.UnifiedLog) (SealResult, error) {
		if _, err := SealLeader(pending, l, 2, 5_000); err != nil {
			return SealResult{}, err
		}
		l.UpdateHighWatermark(l.LogEndOffset()) // the follower caught up
		return SealLeader(pending, l, 2, 5_000)
	}
	var want []string
	for i := range 8 {
		want = append(want, expect(int64(10*i), 10, fmt.Sprintf("e0b%d", i))...)
	}
	want = append(append(append(want, expect(80, 10, "e2a")...), expect(90, 5, "txn")...), expect(95, 4, "e2b")...)
	proposed := int64(-1)
	seals := map[int64]int{}
	check := func(l *log.UnifiedLog) error {
		before := fmt.Sprintf("reopened at LEO %d, open %v", l.LogEndOffset(), l.OngoingTransactions())
		if proposed >= 0 && (l.LogEndOffset() != proposed || len(l.OngoingTransactions()) != 0) {
			return fmt.Errorf("%s after the proposal of %d", before, proposed)
		}
		s, err := checkResealed(l, before, seal)
		if err != nil {
			return err
		}
		seals[s]++
		if got := classicValues(t, l, 99); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s: records %v", before, got)
		}
		return nil
	}

	opts := log.Options{RetentionMs: log.RetentionInfinite}
	var rec *crashtest.Recorder
	rec = crashtest.New(1, func(int, string) error {
		copts := opts
		copts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		l, err := log.Open("leader", copts)
		if err != nil {
			return err
		}
		defer l.Close()
		return check(l)
	})
	opts.FS = rec.Wrap(mem)
	l, err := log.Open("leader", opts)
	require.NoError(t, err)
	writeClassic(t, l, l.Flush)
	rec.Arm(true)
	res, err := seal(l)
	require.NoError(t, err)
	require.True(t, res.Ready)
	require.Equal(t, int64(100), res.Proposal.Seal)
	proposed = res.Proposal.Seal
	rec.Point("after the proposal")
	rec.Arm(false)
	require.NoError(t, rec.Err())
	require.NoError(t, l.Close())
	t.Logf("%d crash points checked, seals %v", rec.Checked(), seals)
	require.Greater(t, rec.Checked(), 3)
	require.Equal(t, map[int64]int{100: rec.Checked()}, seals, "every image seals at 100")
}

// classicValues reads "offset:value" of the data records below end.
func classicValues(t testing.TB, l *log.UnifiedLog, end int64) []string {
	t.Helper()
	info, err := l.Read(nil, 0, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	var out []string
	s := record.NewScanner(info.Records, record.ScannerOptions{})
	it := record.NewIter(record.IterOptions{})
	for s.Next() {
		b := s.Batch()
		if b.IsControl() || b.BaseOffset() >= end {
			continue
		}
		it.Reset(b)
		for it.Next() {
			r := it.Record()
			out = append(out, fmt.Sprintf("%d:%s", b.BaseOffset()+int64(r.OffsetDelta), r.Value))
		}
	}
	return out
}

// blockingAppender holds every append until release is closed and
// records when its write is done.
type blockingAppender struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	events  []string
}

func (b *blockingAppender) event(e string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, e)
}

func (b *blockingAppender) AppendAsLeader([]byte, int32, log.AppendOrigin) (log.AppendInfo, error) {
	b.entered <- struct{}{}
	<-b.release
	b.event("classic append written")
	return log.AppendInfo{FirstOffset: 98, LastOffset: 98}, nil
}

// SetState waits for the appends admitted under the old state: a client
// append that passed the check while classic is written before the seal
// pending state is in place, so the sealing that follows sees it; the
// appends after it are refused.
func TestClassicGateDrainsAdmittedAppends(t *testing.T) {
	b := &blockingAppender{entered: make(chan struct{}), release: make(chan struct{})}
	g := NewClassicGate(b, tierstate.State{})
	appended := make(chan error)
	go func() {
		_, err := g.AppendAsLeader(nil, 2, log.OriginClient)
		appended <- err
	}()
	<-b.entered // admitted under the classic state, writing
	pending, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	calling := make(chan struct{})
	go func() {
		<-calling
		close(b.release)
	}()
	close(calling)
	g.SetState(pending)
	b.event("seal pending in place")
	require.NoError(t, <-appended)
	require.Equal(t, []string{"classic append written", "seal pending in place"}, b.events)
	_, err = g.AppendAsLeader(nil, 2, log.OriginClient)
	require.ErrorIs(t, err, ErrSealPending)
}

// checkResealed seals l again (the sealing test's log: [0, 99) acked in
// epochs 0@0 2@80, producer 7's transaction open from 90) and checks the
// outcome: ready at the log end, at least 100, the epochs unchanged, one
// abort marker ending producer 7's transaction at S-1, nothing left open.
// It returns S; at names the crash image in errors.
func checkResealed(l *log.UnifiedLog, at string, seal func(*log.UnifiedLog) (SealResult, error)) (int64, error) {
	res, err := seal(l)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", at, err)
	}
	s := res.Proposal.Seal
	if !res.Ready || s != l.LogEndOffset() || s < 100 {
		return 0, fmt.Errorf("%s: sealed at %d (ready %v), log end %d", at, s, res.Ready, l.LogEndOffset())
	}
	if e := epochcache.FormatEntries(l.EpochEntries()); e != "0@0 2@80" {
		return 0, fmt.Errorf("%s: epochs %s", at, e)
	}
	aborted, err := l.CollectAbortedTransactions(0, s)
	if err != nil {
		return 0, err
	}
	if len(aborted) != 1 || aborted[0].ProducerID != 7 || aborted[0].FirstOffset != 90 || aborted[0].LastOffset != s-1 {
		return 0, fmt.Errorf("%s: sealed at %d, aborted %v", at, s, aborted)
	}
	if len(l.OngoingTransactions()) != 0 {
		return 0, fmt.Errorf("%s: open transactions %v", at, l.OngoingTransactions())
	}
	return s, nil
}

// TestInitDisklessLogFromMetadata: a phase-2 leader whose log lost its
// disk (it ends below the seal) writes the WAL row from the metadata, so
// that its consolidation fetch below the seal is redirected to remote
// storage and it rebuilds. Every replica lost its disk after the seal 90
// was committed, before any leader wrote the row; the operator's
// start-phase-2 lowered the seal to 60. Producer 7's last batch (at 40)
// is in the classic prefix; producer 8's (at 80) was given up with
// [60, 90), so only its epoch is kept. In phase 1 such a leader is
// fenced below the seal, and the row waits for its log to end there.
func TestInitDisklessLogFromMetadata(t *testing.T) {
	e := newWALEnv(t)
	l := e.openLog("lost")
	s := committedSeal(t, 90, []tierstate.ProducerStateEntry{
		{ProducerID: 7, ProducerEpoch: 2, BaseSequence: 0, LastSequence: 4, AssignedOffset: 40, BatchMaxTimestamp: 1000},
		{ProducerID: 8, ProducerEpoch: 1, BaseSequence: 5, LastSequence: 9, AssignedOffset: 80, BatchMaxTimestamp: 2000},
	})
	_, err := PlanInitDisklessLog(s, e.tp, l)
	require.ErrorIs(t, err, ErrLogPastSeal, "phase 1: the row waits for the log to end at the seal")
	require.ErrorContains(t, err, "log end 0, seal 90")

	s, err = s.StartPhaseTwo(60, 0, 3)
	require.NoError(t, err)
	req, err := InitDisklessLog(e.ctx, e.cp, s, e.tp, l)
	require.NoError(t, err)
	require.Equal(t, wal.InitDisklessLogRequest{Partition: walTP(e.tp), Topic: e.tp.Topic, LogStartOffset: 0,
		DisklessStartOffset: 60, ProducerStates: []wal.ProducerState{
			{ProducerID: 7, ProducerEpoch: 2, Batches: []wal.ProducerBatch{{BaseSequence: 0, LastSequence: 4, AssignedOffset: 40, Timestamp: 1000}}},
			{ProducerID: 8, ProducerEpoch: 1},
		}}, req)
	info, err := e.cp.LogInfo(e.ctx, walTP(e.tp))
	require.NoError(t, err)
	require.Equal(t, [3]int64{0, 60, 60}, [3]int64{info.LogStartOffset, info.DisklessStartOffset, info.HighWatermark},
		"W, S and HW of the row")
	_, err = InitDisklessLog(e.ctx, e.cp, s, e.tp, l)
	require.NoError(t, err, "a row that exists is a success")

	// Without a recorded epoch the classic prefix is empty (remote
	// storage held no record below the new seal): W, and so the row's
	// first cross-tier log start, is the seal, so that the endpoint
	// resets a fetch below it rather than waiting for remote storage to
	// hold S-1.
	empty, err := committedSeal(t, 90, nil).StartPhaseTwo(60, -1, 3)
	require.NoError(t, err)
	req, err = PlanInitDisklessLog(empty, e.tp, l)
	require.NoError(t, err)
	require.Equal(t, int64(60), req.LogStartOffset)
	require.Equal(t, int64(60), req.InitialCrossTierLogStart())
}
