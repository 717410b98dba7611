package tierstate

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote"
)

// lineageLog is a DescribeLog with an epoch cache.
type lineageLog struct {
	describeFakeLog
	epochs []epochcache.Entry
}

func (l lineageLog) EpochForOffset(offset int64) (int32, bool) {
	return epochcache.EpochForOffsetIn(l.epochs, offset)
}

// sealedAt is a consolidating phase-1 State at seal, committed with the
// leader's epoch at seal-1 (sealEpoch < 0: a proposal without it).
func sealedAt(t *testing.T, seal int64, sealEpoch int32) State {
	t.Helper()
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	p := SealProposal{Seal: seal}
	if sealEpoch >= 0 {
		p.Lineage = []epochcache.Entry{{Epoch: sealEpoch, StartOffset: seal - 1}}
	}
	s, err = s.CommitSealProposal(p)
	require.NoError(t, err)
	return s
}

// epochSeg is a finished remote segment [start, end] of one epoch.
func epochSeg(start, end int64, epoch int32) remote.SegmentMetadata {
	return remote.SegmentMetadata{StartOffset: start, EndOffset: end, State: remote.CopySegmentFinished,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: epoch, StartOffset: start}}}
}

// TestCheckElectReplicaRefusesDiscardedLineage: broker 1 alone committed
// [0, 5) in epoch 0 and stopped; an unclean election made an empty broker
// the leader, which committed [0, 4) of epoch 2 and sealed at 4. Broker 1,
// truncated to the seal, holds [0, 4) of epoch 0 with hw 4: the high
// watermark rule alone would elect it, and it would lead with the
// records the unclean election discarded.
func TestCheckElectReplicaRefusesDiscardedLineage(t *testing.T) {
	describe := func(s State, epoch int32) ReplicaDescription {
		t.Helper()
		l := lineageLog{describeFakeLog{0, 4, 4}, []epochcache.Entry{{Epoch: epoch, StartOffset: 0}}}
		d, err := Describe(DescribeRequest{Partition: testTP, BrokerID: 1, State: s, Log: l,
			Remote: describeFakeLister{}})
		require.NoError(t, err)
		return d
	}
	s := sealedAt(t, 4, 2)
	d := describe(s, 0)
	require.Equal(t, Some(int32(0)), d.EpochBeforeSeal)
	require.False(t, d.LogOfSealedLineage())
	require.False(t, d.HoldsClassicPrefix(), "another lineage holds nothing of the prefix")
	require.Contains(t, d.String(), "seal-epoch=2 log-lineage=0")
	err := CheckElectReplica(s, d)
	require.ErrorIs(t, err, ErrSealLineageMismatch)
	require.ErrorIs(t, err, ErrRecoveryRefused)
	require.EqualError(t, err, "tierstate: elect-replica refused for replica 1: replica's record before the seal "+
		"is of another lineage: epoch at 3 is 0, sealed in epoch 2")

	// The sealed lineage is elected.
	require.NoError(t, CheckElectReplica(s, describe(s, 2)))
	// A seal committed without its epoch (an Inkless leader's proposal)
	// cannot tell: the high watermark rule alone decides.
	unknown := sealedAt(t, 4, -1)
	require.NoError(t, CheckElectReplica(unknown, describe(unknown, 0)))
	// The State decides, not the description's copy of it.
	d = describe(unknown, 0)
	require.Error(t, CheckElectReplica(s, d))
}

// TestPlanStartPhaseTwoRemoteOfDiscardedLineage: broker 1 committed and
// tiered [0, 1) in epoch 0; an unclean election made an empty broker the
// leader, which committed its own [0, 1) in epoch 2 and sealed at 1.
// Broker 1 lost its disk; the others did not answer. Remote storage's
// [0, 1) is of epoch 0: start-phase-2 must not take it for the prefix.
func TestPlanStartPhaseTwoRemoteOfDiscardedLineage(t *testing.T) {
	plan := func(s State, segs ...remote.SegmentMetadata) (StartPhaseTwoPlan, error) {
		t.Helper()
		d, err := Describe(DescribeRequest{Partition: testTP, BrokerID: 1, State: s, Log: describeFakeLog{},
			Remote: describeFakeLister{segs: segs}})
		require.NoError(t, err)
		return PlanStartPhaseTwo(s, StartPhaseTwoRequest{Replicas: []int32{1, 2, 3},
			Descriptions: []ReplicaDescription{d}, CurrentLeaderEpoch: 3, AcceptDataLoss: true})
	}
	s := sealedAt(t, 1, 2)
	p, err := plan(s, epochSeg(0, 0, 0))
	require.NoError(t, err)
	require.Equal(t, int64(0), p.Seal)
	require.Equal(t, OffsetRange{Start: 0, End: 1}, p.Lost)
	require.Equal(t, int32(-1), p.RecordedEpoch)
	require.Equal(t, "phase-2 seal=0 recorded-epoch=-1 diskless-epoch=4 consolidating", p.Next.String())

	// The sealed lineage's copy is the prefix.
	p, err = plan(s, epochSeg(0, 0, 2))
	require.NoError(t, err)
	require.Equal(t, int64(1), p.Seal)
	require.True(t, p.Lost.Empty())
	require.Equal(t, int32(2), p.RecordedEpoch)

	// A run ending below the seal in an epoch above the seal epoch is of
	// another lineage too (a lineage's epochs never fall); at or below it
	// the run may be the sealed lineage's.
	s = sealedAt(t, 1000, 2)
	p, err = plan(s, epochSeg(0, 599, 3))
	require.NoError(t, err)
	require.Equal(t, int64(0), p.Seal)
	p, err = plan(s, epochSeg(0, 599, 1))
	require.NoError(t, err)
	require.Equal(t, int64(600), p.Seal)
	require.Equal(t, int32(1), p.RecordedEpoch)

	// Without a seal epoch the remote end epoch is taken as it is.
	p, err = plan(sealedAt(t, 1, -1), epochSeg(0, 0, 0))
	require.NoError(t, err)
	require.Equal(t, int64(1), p.Seal)
	require.Equal(t, int32(0), p.RecordedEpoch)
}

// TestPlanStartPhaseTwoRemoteBelowTheSealEpoch: broker 1 committed and
// tiered [0, 1) in epoch 0; an unclean election made an empty broker the
// leader, which committed [0, 2) in epoch 3 and sealed at 2 (lineage
// 3@0). Remote storage's [0, 1) ends below the seal in epoch 0, below the
// seal epoch: the seal epoch alone cannot tell it from the sealed
// lineage, whose epoch at 0 is 3. The seal lineage can.
func TestPlanStartPhaseTwoRemoteBelowTheSealEpoch(t *testing.T) {
	sealed := func(lineage ...epochcache.Entry) State {
		t.Helper()
		s, err := State{}.WithConsolidating(true).ArmSwitch()
		require.NoError(t, err)
		s, err = s.CommitSealProposal(SealProposal{Seal: 2, Lineage: lineage})
		require.NoError(t, err)
		return s
	}
	plan := func(s State) (ReplicaDescription, StartPhaseTwoPlan) {
		t.Helper()
		d, err := Describe(DescribeRequest{Partition: testTP, BrokerID: 1, State: s, Log: describeFakeLog{},
			Remote: describeFakeLister{segs: []remote.SegmentMetadata{epochSeg(0, 0, 0)}}})
		require.NoError(t, err)
		p, err := PlanStartPhaseTwo(s, StartPhaseTwoRequest{Replicas: []int32{1, 2, 3},
			Descriptions: []ReplicaDescription{d}, CurrentLeaderEpoch: 4, AcceptDataLoss: true})
		require.NoError(t, err)
		return d, p
	}
	s := sealed(epochcache.Entry{Epoch: 3, StartOffset: 0})
	d, p := plan(s)
	require.Equal(t, Some(int32(3)), d.SealedEpochAtRemoteEnd)
	require.False(t, d.RemoteOfSealedLineage())
	require.Equal(t, int64(0), p.Seal, "nothing of the prefix is held")
	require.Equal(t, OffsetRange{Start: 0, End: 2}, p.Lost)
	require.Equal(t, int32(-1), p.RecordedEpoch)
	// The State refuses the remote record's epoch at the lowered seal too.
	_, err := s.StartPhaseTwo(1, 0, 4)
	require.ErrorIs(t, err, ErrInvalidRecordedEpoch)

	// A lineage whose epoch 0 reaches offset 0 takes the copy: [0, 1) is
	// kept, [1, 2) lost.
	d, p = plan(sealed(epochcache.Entry{Epoch: 0, StartOffset: 0}, epochcache.Entry{Epoch: 3, StartOffset: 1}))
	require.True(t, d.RemoteOfSealedLineage())
	require.Equal(t, int64(1), p.Seal)
	require.Equal(t, int32(0), p.RecordedEpoch)
	require.Equal(t, "phase-2 seal=1 seal-lineage=0@0 recorded-epoch=0 diskless-epoch=5 consolidating", p.Next.String())

	// The seal epoch alone (a lineage known at S - 1 only) cannot tell:
	// the copy counts, as before the lineage was recorded.
	d, _ = plan(sealed(epochcache.Entry{Epoch: 3, StartOffset: 1}))
	require.False(t, d.SealedEpochAtRemoteEnd.Present)
	require.True(t, d.RemoteOfSealedLineage())
}
