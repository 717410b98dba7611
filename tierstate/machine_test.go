package tierstate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/truncation"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func entries(pairs ...int64) []epochcache.Entry {
	var out []epochcache.Entry
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, epochcache.Entry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

// TestUpstreamTarget: the target epoch of Kafka's
// TierStateMachine.buildRemoteLogAuxState, including skipped epochs that
// had no records (cache 0@20 1@85 3@90 4@98, local start 90) and the
// answers of a DisklessLeaderEndPoint (which echoes the requested epoch
// with the seal as end offset).
func TestUpstreamTarget(t *testing.T) {
	for _, tc := range []struct {
		local  OffsetAndEpoch
		answer EpochEndOffset
		want   OffsetAndEpoch
	}{
		// {0:20, 1:85, 3:90, 4:98}, local start 90: ask 2 -> (1, 90).
		{OffsetAndEpoch{Offset: 90, Epoch: 3}, EpochEndOffset{Epoch: 1, EndOffset: 90}, OffsetAndEpoch{Offset: 89, Epoch: 1}},
		// Local start inside epoch 3: the previous epoch ends before 94.
		{OffsetAndEpoch{Offset: 95, Epoch: 3}, EpochEndOffset{Epoch: 1, EndOffset: 90}, OffsetAndEpoch{Offset: 94, Epoch: 3}},
		// Epoch 0: no question, the answer is ignored.
		{OffsetAndEpoch{Offset: 50, Epoch: 0}, EpochEndOffset{Epoch: 7, EndOffset: 1000}, OffsetAndEpoch{Offset: 49, Epoch: 0}},
		// No answer (undefined): the local start's epoch.
		{OffsetAndEpoch{Offset: 7, Epoch: 7}, EpochEndOffset{Epoch: base.UndefinedEpoch, EndOffset: base.UndefinedOffset}, OffsetAndEpoch{Offset: 6, Epoch: 7}},
		// Diskless endpoint, E_d = 5, seal 100: asks 4, gets (4, 100).
		{OffsetAndEpoch{Offset: 100, Epoch: 5}, EpochEndOffset{Epoch: 4, EndOffset: 100}, OffsetAndEpoch{Offset: 99, Epoch: 4}},
	} {
		require.Equal(t, tc.want, UpstreamTarget(tc.local, tc.answer), "%v %v", tc.local, tc.answer)
	}
	require.False(t, NeedsEpochQuery(OffsetAndEpoch{Offset: 10, Epoch: 0}))
	require.False(t, NeedsEpochQuery(OffsetAndEpoch{Offset: 10, Epoch: base.UndefinedEpoch}))
	require.True(t, NeedsEpochQuery(OffsetAndEpoch{Offset: 10, Epoch: 1}))
}

// TestPlanRestore: the restore decided from a segment: the next offset,
// the epoch entries kept and whether the producer snapshot is restored,
// upstream and in phase 2.
func TestPlanRestore(t *testing.T) {
	seg := func(start, end int64) remote.SegmentMetadata {
		return remote.SegmentMetadata{StartOffset: start, EndOffset: end}
	}
	for _, tc := range []struct {
		name       string
		mode       RebuildMode
		seal       int64
		target     OffsetAndEpoch
		seg        remote.SegmentMetadata
		checkpoint []epochcache.Entry
		want       string
	}{
		{"upstream", RebuildUpstream, NoSeal, OffsetAndEpoch{Offset: 4, Epoch: 4}, seg(0, 4), entries(0, 0, 2, 1, 4, 2),
			"next=5 epochs=0@0 2@1 4@2 dropped=(empty) snapshot=true"},
		{"phase 2 ends at the seal", RebuildPhaseTwo, 100, OffsetAndEpoch{Offset: 99, Epoch: 2}, seg(50, 99), entries(0, 0, 2, 80),
			"next=100 epochs=0@0 2@80 dropped=(empty) snapshot=true"},
		{"phase 2 crosses the seal", RebuildPhaseTwo, 100, OffsetAndEpoch{Offset: 99, Epoch: 2}, seg(50, 119), entries(2, 50, 3, 100),
			"next=100 epochs=2@50 dropped=3@100 snapshot=false"},
		{"phase 2 one epoch across", RebuildPhaseTwo, 100, OffsetAndEpoch{Offset: 99, Epoch: 2}, seg(60, 109), entries(2, 50),
			"next=100 epochs=2@50 dropped=(empty) snapshot=false"},
		{"checkpoint maps the target elsewhere", RebuildUpstream, NoSeal, OffsetAndEpoch{Offset: 9, Epoch: 2}, seg(5, 9), entries(1, 0, 3, 5),
			"error: inconsistent"},
		{"empty checkpoint", RebuildUpstream, NoSeal, OffsetAndEpoch{Offset: 9, Epoch: 2}, seg(5, 9), nil, "error: inconsistent"},
		{"segment does not hold the target", RebuildPhaseTwo, 100, OffsetAndEpoch{Offset: 99, Epoch: 2}, seg(0, 50), entries(2, 0),
			"error: inconsistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanRestore(tc.mode, tc.seal, tc.target, tc.seg, tc.checkpoint)
			got := fmt.Sprintf("next=%d epochs=%s dropped=%s snapshot=%t", p.NextOffset,
				epochcache.FormatEntries(p.Epochs), epochcache.FormatEntries(p.Dropped), p.RestoreSnapshot)
			if err != nil {
				require.ErrorIs(t, err, ErrRemoteEpochsInconsistent)
				got = "error: inconsistent"
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestModeAndPhaseTwoTarget(t *testing.T) {
	require.Equal(t, RebuildUpstream, ModeFor(State{}))
	s := phaseTwoState(t, 100, 2, 4)
	require.Equal(t, RebuildPhaseTwo, ModeFor(s))
	target, ok := PhaseTwoTarget(s)
	require.True(t, ok)
	require.Equal(t, OffsetAndEpoch{Offset: 99, Epoch: 2}, target)
	s = phaseTwoState(t, 100, base.UndefinedEpoch, 4)
	require.Equal(t, RebuildUpstream, ModeFor(s), "R = -1 keeps the upstream rebuild")
	_, ok = PhaseTwoTarget(s)
	require.False(t, ok)
}

func TestRebuildAction(t *testing.T) {
	wrap := func(err error, changed bool) error {
		return &RebuildError{Step: StepSegmentLookup, LocalLogChanged: changed, Err: err}
	}
	require.Equal(t, ActionNone, RebuildAction(nil))
	require.Equal(t, ActionMarkFailed, RebuildAction(wrap(fmt.Errorf("x: %w", base.ErrFencedEpoch), false)))
	require.Equal(t, ActionStop, RebuildAction(wrap(context.Canceled, false)))
	require.Equal(t, ActionRetry, RebuildAction(wrap(context.DeadlineExceeded, false)))
	require.Equal(t, ActionRetry, RebuildAction(wrap(&SegmentNotFoundError{Epoch: 2, Offset: 99}, false)))
	require.Equal(t, ActionRetry, RebuildAction(wrap(ErrRemoteStorageNotReady, false)))
	require.Equal(t, ActionOffline, RebuildAction(wrap(errors.New("log: write refused"), true)))

	var nf *SegmentNotFoundError
	err := wrap(&SegmentNotFoundError{Partition: testTP, Epoch: 2, Offset: 99}, false)
	require.ErrorAs(t, err, &nf)
	require.Equal(t, int64(99), nf.Offset)
	require.ErrorIs(t, err, ErrRemoteSegmentNotFound)
	require.ErrorIs(t, ErrLeaderLogStartBeyondNextOffset, ErrOffsetOutOfRange)
}

func TestNewMachineValidates(t *testing.T) {
	_, err := NewMachine(MachineOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	m, err := NewMachine(MachineOptions{Leader: newFakeLeader(), Metadata: fakeMeta{}, Data: newFakeData()})
	require.NoError(t, err)
	_, err = m.Rebuild(context.Background(), RebuildRequest{})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

type fakeMeta struct {
	seg remote.SegmentMetadata
	ok  bool
	err error
}

func (f fakeMeta) SegmentFor(remote.TopicIDPartition, int32, int64) (remote.SegmentMetadata, bool, error) {
	return f.seg, f.ok, f.err
}

// cancellingLeader cancels the rebuild's context while it answers.
type cancellingLeader struct {
	*fakeLeader
	cancel context.CancelFunc
}

func (c cancellingLeader) FetchEpochEndOffset(ctx context.Context, tp remote.TopicIDPartition, cur, epoch int32) (EpochEndOffset, error) {
	c.cancel()
	return c.fakeLeader.FetchEpochEndOffset(ctx, tp, cur, epoch)
}

// TestRebuildCancelledMidway: a context cancelled while the source answers
// stops the rebuild before its remote reads, with the local log untouched;
// the listener and the logger see the failure.
func TestRebuildCancelledMidway(t *testing.T) {
	l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.AppendAsLeader(producerBatch(t, 3, base.NoProducerID, 0), 1, log.OriginClient)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 10, Epoch: 2}
	core, logs := observer.New(zap.InfoLevel)
	var started, finished int
	var finishedErr error
	seg := remote.SegmentMetadata{StartOffset: 0, EndOffset: 9, SegmentID: remote.SegmentID{ID: remote.UUID{9}}}
	m, err := NewMachine(MachineOptions{Leader: cancellingLeader{leader, cancel}, Metadata: fakeMeta{seg: seg, ok: true},
		Data: newFakeData(), Logger: zap.New(core), Listener: MachineListener{
			RebuildStarted:  func(RebuildStart) { started++ },
			RebuildFinished: func(_ RebuildResult, err error) { finished++; finishedErr = err },
		}})
	require.NoError(t, err)
	_, err = m.Rebuild(ctx, RebuildRequest{Partition: testTP, Log: l})
	require.ErrorIs(t, err, context.Canceled)
	var re *RebuildError
	require.ErrorAs(t, err, &re)
	require.Equal(t, StepSegmentLookup, re.Step, "cancelled before the lookup: %v", err)
	require.False(t, re.LocalLogChanged)
	require.Equal(t, ActionStop, RebuildAction(err))
	require.EqualValues(t, 3, l.LogEndOffset())
	require.Equal(t, 1, started)
	require.Equal(t, 1, finished)
	require.Equal(t, err, finishedErr)
	require.Equal(t, 1, logs.FilterMessage("rebuild from remote storage failed").Len())
}

// TestRebuildClosedLog: a closed log is refused without being "changed".
func TestRebuildClosedLog(t *testing.T) {
	l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	data := newFakeData()
	seg := remote.SegmentMetadata{StartOffset: 0, EndOffset: 9, SegmentID: remote.SegmentID{ID: remote.UUID{9}}}
	data.segments[seg.SegmentID.ID] = fakeSegment{epochs: entries(0, 0), snapshot: producerSnapshot(t)}
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 10, Epoch: 0}
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: fakeMeta{seg: seg, ok: true}, Data: data})
	require.NoError(t, err)
	_, err = m.Rebuild(context.Background(), RebuildRequest{Partition: testTP, Log: l})
	require.ErrorIs(t, err, log.ErrClosed)
	require.Equal(t, ActionRetry, RebuildAction(err))

	// A metadata error is returned as such.
	l2, err := log.Open("p1", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
	require.NoError(t, err)
	defer l2.Close()
	m, err = NewMachine(MachineOptions{Leader: leader, Metadata: fakeMeta{err: remote.ErrClosed}, Data: data})
	require.NoError(t, err)
	_, err = m.Rebuild(context.Background(), RebuildRequest{Partition: testTP, Log: l2})
	require.ErrorIs(t, err, remote.ErrClosed)
}

// TestRebuildSourceStartsAtZero: a source whose local log starts at 0 has
// no record below it; the lookup is not even made.
func TestRebuildSourceStartsAtZero(t *testing.T) {
	l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
	require.NoError(t, err)
	defer l.Close()
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 0, Epoch: 0}
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: fakeMeta{err: errors.New("not asked")}, Data: newFakeData()})
	require.NoError(t, err)
	_, err = m.Rebuild(context.Background(), RebuildRequest{Partition: testTP, Log: l})
	var nf *SegmentNotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, int64(-1), nf.Offset)
	require.Equal(t, ActionRetry, RebuildAction(err))
}

// One OffsetAndEpoch and one EpochEndOffset: the log's, the cache's, the
// truncation planner's and this package's are the same types.
var (
	_ log.OffsetAndEpoch        = OffsetAndEpoch{}
	_ epochcache.OffsetAndEpoch = OffsetAndEpoch{}
	_ truncation.EpochEndOffset = EpochEndOffset{}
	_ epochcache.EpochEndOffset = EpochEndOffset{}
)

// TestRebuildFailedKeepsLookups: a rebuild that fails at the restore still
// returns (and hands the listener) what it looked up before: the source's
// local log start, the target and the segment; nothing of a rebuilt log.
func TestRebuildFailedKeepsLookups(t *testing.T) {
	l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	data := newFakeData()
	seg := remote.SegmentMetadata{StartOffset: 0, EndOffset: 9, SegmentID: remote.SegmentID{ID: remote.UUID{9}}}
	data.segments[seg.SegmentID.ID] = fakeSegment{epochs: entries(0, 0), snapshot: producerSnapshot(t)}
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 10, Epoch: 0}
	var heard RebuildResult
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: fakeMeta{seg: seg, ok: true}, Data: data,
		Listener: MachineListener{RebuildFinished: func(r RebuildResult, _ error) { heard = r }}})
	require.NoError(t, err)
	res, err := m.Rebuild(context.Background(), RebuildRequest{Partition: testTP, Log: l})
	require.ErrorIs(t, err, log.ErrClosed)
	require.Equal(t, testTP, res.Partition)
	require.Equal(t, OffsetAndEpoch{Offset: 10, Epoch: 0}, res.LeaderLocalLogStart)
	require.Equal(t, OffsetAndEpoch{Offset: 9, Epoch: 0}, res.Target)
	require.Equal(t, seg, res.Segment)
	require.False(t, res.ProducerSnapshotRestored)
	require.Empty(t, res.Epochs)
	require.Equal(t, res, heard)
}

func TestModeForFetch(t *testing.T) {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(100, nil)
	require.NoError(t, err)
	require.Equal(t, RebuildUpstream, ModeForFetch(s, 0), "phase 1")
	p2, err := s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: 100, LastClassicLeaderEpoch: 2},
		Leadership{Leader: 1, LeaderEpoch: 4})
	require.NoError(t, err)
	require.Equal(t, RebuildPhaseTwo, ModeForFetch(p2, 0))
	require.Equal(t, RebuildPhaseTwo, ModeForFetch(p2, 99))
	require.Equal(t, RebuildUpstream, ModeForFetch(p2, 100), "at the seal")
	require.Equal(t, RebuildUpstream, ModeForFetch(p2, 130), "past the seal")
}
