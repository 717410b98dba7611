package tierstate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// phaseOne returns a consolidating phase-1 State at seal.
func describePhaseOne(t *testing.T, seal int64) State {
	t.Helper()
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(seal, nil)
	require.NoError(t, err)
	return s
}

type describeFakeLog struct{ localStart, leo, hw int64 }

func (f describeFakeLog) LocalLogStartOffset() int64 { return f.localStart }
func (f describeFakeLog) LogEndOffset() int64        { return f.leo }
func (f describeFakeLog) HighWatermark() int64       { return f.hw }

// EpochForOffset: the fake log has no epoch cache.
func (f describeFakeLog) EpochForOffset(int64) (int32, bool) { return 0, false }

type describeFakeLister struct {
	segs []remote.SegmentMetadata
	err  error
}

func (f describeFakeLister) ListSegments(remote.TopicIDPartition) ([]remote.SegmentMetadata, error) {
	return f.segs, f.err
}

func describeSeg(start, end int64, state remote.SegmentState) remote.SegmentMetadata {
	return remote.SegmentMetadata{StartOffset: start, EndOffset: end, State: state,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: start}}}
}

func describeFinished(start, end int64) remote.SegmentMetadata {
	return describeSeg(start, end, remote.CopySegmentFinished)
}

// requireRecoveryRefused checks err is a *RecoveryError for op with the reason.
func requireRecoveryRefused(t *testing.T, err error, op string, reason error) *RecoveryError {
	t.Helper()
	require.ErrorIs(t, err, ErrRecoveryRefused)
	require.ErrorIs(t, err, reason)
	var re *RecoveryError
	require.ErrorAs(t, err, &re)
	require.Equal(t, op, re.Op)
	return re
}

func TestGapFreeRemoteEnd(t *testing.T) {
	cases := []struct {
		name    string
		segs    []remote.SegmentMetadata
		x, seal int64
		want    int64
	}{
		{"no segments", nil, 0, 1000, 0},
		{"no segments, X above 0", nil, 250, 1000, 250},
		{"contiguous", []remote.SegmentMetadata{describeFinished(0, 299), describeFinished(300, 599)}, 0, 1000, 600},
		{"unsorted listing", []remote.SegmentMetadata{describeFinished(300, 599), describeFinished(0, 299)}, 0, 1000, 600},
		{"gap stops the run", []remote.SegmentMetadata{describeFinished(0, 199), describeFinished(400, 599)}, 0, 1000, 200},
		{"starts above X", []remote.SegmentMetadata{describeFinished(100, 599)}, 0, 1000, 0},
		{"X inside a segment", []remote.SegmentMetadata{describeFinished(0, 299), describeFinished(300, 599)}, 150, 1000, 600},
		{"segment wholly below X", []remote.SegmentMetadata{describeFinished(0, 99)}, 100, 1000, 100},
		{"segment ending at X-1 then one at X",
			[]remote.SegmentMetadata{describeFinished(0, 99), describeFinished(100, 199)}, 100, 1000, 200},
		{"overlapping copies", []remote.SegmentMetadata{describeFinished(0, 399), describeFinished(200, 699)}, 0, 1000, 700},
		{"contained copy", []remote.SegmentMetadata{describeFinished(0, 399), describeFinished(100, 149)}, 0, 1000, 400},
		{"started does not count",
			[]remote.SegmentMetadata{describeFinished(0, 299), describeSeg(300, 599, remote.CopySegmentStarted)}, 0, 1000, 300},
		{"delete started does not count",
			[]remote.SegmentMetadata{describeFinished(0, 299), describeSeg(300, 599, remote.DeleteSegmentStarted)}, 0, 1000, 300},
		{"capped at the seal", []remote.SegmentMetadata{describeFinished(0, 1499)}, 0, 1000, 1000},
		{"segment at the seal", []remote.SegmentMetadata{describeFinished(0, 999), describeFinished(1000, 1999)}, 0, 1000, 1000},
		{"X at the seal", []remote.SegmentMetadata{describeFinished(0, 1999)}, 1000, 1000, 1000},
		{"X past the seal", nil, 1200, 1000, 1000},
		{"seal 0", []remote.SegmentMetadata{describeFinished(0, 9)}, 0, 0, 0},
		{"max end offset", []remote.SegmentMetadata{describeFinished(0, 1<<63-1)}, 0, 1000, 1000},
		{"malformed segment skipped", []remote.SegmentMetadata{describeFinished(0, 99), describeFinished(100, 50)}, 0, 1000, 100},
		// DeleteRecords to 42 inside the segment before its copy: its
		// records below 42 have no epoch and are never served.
		{"first epoch above the segment start", []remote.SegmentMetadata{firstEpochAt(describeFinished(0, 99), 42)}, 0, 1000, 0},
		{"first epoch above the start, X there", []remote.SegmentMetadata{firstEpochAt(describeFinished(0, 99), 42)}, 42, 1000, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, gapFreeRemoteEnd(c.segs, c.x, c.seal))
		})
	}
}

// firstEpochAt gives s one leader epoch, starting at start.
func firstEpochAt(s remote.SegmentMetadata, start int64) remote.SegmentMetadata {
	s.SegmentLeaderEpochs = []epochcache.Entry{{Epoch: 2, StartOffset: start}}
	return s
}

// TestGapFreeRemoteEndOracle compares gapFreeRemoteEnd with an
// offset-by-offset walk over random segment sets.
func TestGapFreeRemoteEndOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(855, 717))
	states := []remote.SegmentState{remote.CopySegmentStarted, remote.CopySegmentFinished,
		remote.CopySegmentFinished, remote.CopySegmentFinished, remote.DeleteSegmentStarted}
	for range 2000 {
		const space = 64
		var segs []remote.SegmentMetadata
		held := make([]bool, space+32)
		for range rng.IntN(8) {
			start := rng.Int64N(space)
			end := start + rng.Int64N(24)
			st := states[rng.IntN(len(states))]
			segs = append(segs, describeSeg(start, end, st))
			if st == remote.CopySegmentFinished {
				for o := start; o <= end; o++ {
					held[o] = true
				}
			}
		}
		x, seal := rng.Int64N(space), rng.Int64N(space)
		want := min(x, seal)
		for want < seal && held[want] {
			want++
		}
		require.Equal(t, want, gapFreeRemoteEnd(segs, x, seal), "segments %v x=%d seal=%d", segs, x, seal)
	}
}

func TestReplicaDescriptionCoverage(t *testing.T) {
	d := func(x, remoteEnd, localStart, leo, hw int64) ReplicaDescription {
		return ReplicaDescription{BrokerID: 1, Seal: 1000, CrossTierLogStartOffset: x, RemoteEndOffset: remoteEnd,
			LocalLogStartOffset: localStart, LogEndOffset: leo, HighWatermark: hw}
	}
	cases := []struct {
		name    string
		d       ReplicaDescription
		missing []OffsetRange
		holds   bool
		loss    OffsetRange
	}{
		{"empty log", d(0, 600, 0, 0, 0), []OffsetRange{{600, 1000}}, false, OffsetRange{600, 1000}},
		{"log fills the tail", d(0, 600, 0, 1000, 1000), nil, true, OffsetRange{600, 1000}},
		{"log starts at the remote end", d(0, 600, 600, 1000, 990), nil, true, OffsetRange{600, 1000}},
		{"gap between remote and log", d(0, 600, 700, 1000, 1000), []OffsetRange{{600, 700}}, false,
			OffsetRange{600, 1000}},
		{"log ends below the seal", d(0, 600, 0, 800, 800), []OffsetRange{{800, 1000}}, false, OffsetRange{600, 1000}},
		{"two gaps", d(0, 400, 600, 800, 800), []OffsetRange{{400, 600}, {800, 1000}}, false,
			OffsetRange{400, 1000}},
		{"log alone from X", d(100, 100, 50, 1000, 1000), nil, true, OffsetRange{100, 1000}},
		{"log past the seal", d(0, 600, 500, 1200, 1200), nil, true, OffsetRange{600, 1000}},
		// Remote storage alone covers: every replica's view does, so a
		// replica whose log ends below the seal does not hold it.
		{"remote alone", d(0, 1000, 0, 0, 0), nil, false, OffsetRange{1000, 1000}},
		{"remote alone, log at the seal", d(0, 1000, 1000, 1000, 1000), nil, true, OffsetRange{1000, 1000}},
		{"X past the seal", d(1200, 1000, 1200, 1300, 1300), nil, true, OffsetRange{1000, 1000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.d.validate())
			assert.Equal(t, c.missing, c.d.MissingRanges())
			assert.Equal(t, len(c.missing) == 0, c.d.CoversClassicPrefix())
			assert.Equal(t, c.holds, c.d.HoldsClassicPrefix())
			assert.Equal(t, c.loss, c.d.StartPhaseTwoLoss())
		})
	}
}

func TestDescriptionValidate(t *testing.T) {
	ok := ReplicaDescription{Seal: 1000, RemoteEndOffset: 600, LogEndOffset: 1000, HighWatermark: 1000}
	require.NoError(t, ok.validate())
	for name, mutate := range map[string]func(*ReplicaDescription){
		"negative seal":        func(d *ReplicaDescription) { d.Seal = -1 },
		"negative X":           func(d *ReplicaDescription) { d.CrossTierLogStartOffset = -1 },
		"local start past LEO": func(d *ReplicaDescription) { d.LocalLogStartOffset = 1001 },
		"HW past LEO":          func(d *ReplicaDescription) { d.HighWatermark = 1001 },
		"remote end past seal": func(d *ReplicaDescription) { d.RemoteEndOffset = 1001 },
		"remote end below X":   func(d *ReplicaDescription) { d.CrossTierLogStartOffset = 700 },
	} {
		d := ok
		mutate(&d)
		require.Error(t, d.validate(), name)
	}
}

func TestDescribe(t *testing.T) {
	s := describePhaseOne(t, 1000)
	lister := describeFakeLister{segs: []remote.SegmentMetadata{describeFinished(0, 299), describeFinished(300, 599),
		describeSeg(600, 999, remote.CopySegmentStarted)}}
	req := DescribeRequest{Partition: testTP, BrokerID: 2, State: s, Log: describeFakeLog{0, 1000, 990},
		FencedByBroker: true, Remote: lister}
	d, err := Describe(req)
	require.NoError(t, err)
	require.Equal(t, ReplicaDescription{BrokerID: 2, Seal: 1000, LocalLogStartOffset: 0, LogEndOffset: 1000,
		HighWatermark: 990, FencedByBroker: true, RemoteEndOffset: 600, RemoteEndEpoch: 0}, d)

	// A log read mid-change never gives a description that contradicts
	// itself.
	req.Log = describeFakeLog{localStart: 1200, leo: 1000, hw: 1100}
	d, err = Describe(req)
	require.NoError(t, err)
	require.NoError(t, d.validate())

	// In phase 2 it still answers.
	s2, err := s.StartPhaseTwo(600, 0, 3)
	require.NoError(t, err)
	req.State = s2
	d, err = Describe(req)
	require.NoError(t, err)
	require.Equal(t, int64(600), d.Seal)
	require.Equal(t, int64(600), d.RemoteEndOffset)
}

func TestDescribeRefusals(t *testing.T) {
	s := describePhaseOne(t, 1000)
	pending, err := State{}.ArmSwitch()
	require.NoError(t, err)
	base := DescribeRequest{Partition: testTP, BrokerID: 3, State: s, Log: describeFakeLog{0, 10, 10},
		Remote: describeFakeLister{}}
	cases := []struct {
		name   string
		mutate func(*DescribeRequest)
		reason error
	}{
		{"classic", func(r *DescribeRequest) { r.State = State{} }, ErrNotSwitching},
		{"seal pending", func(r *DescribeRequest) { r.State = pending }, ErrSealNotCommitted},
		{"not hosted", func(r *DescribeRequest) { r.Log = nil }, ErrReplicaNotHosted},
		{"not hosted, nil *log.UnifiedLog", func(r *DescribeRequest) { r.Log = (*log.UnifiedLog)(nil) }, ErrReplicaNotHosted},
		{"no remote metadata", func(r *DescribeRequest) { r.Remote = nil }, ErrInvalidArgument},
		{"no remote metadata, nil *remote.MetadataManager", func(r *DescribeRequest) {
			r.Remote = (*remote.MetadataManager)(nil)
		}, ErrInvalidArgument},
		{"negative X", func(r *DescribeRequest) { r.CrossTierLogStartOffset = -1 }, ErrInvalidArgument},
		{"remote not ready", func(r *DescribeRequest) {
			r.RemoteReady = func(tp remote.TopicIDPartition) bool { return tp != testTP }
		}, ErrRemoteStorageNotReady},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := base
			c.mutate(&req)
			_, err := Describe(req)
			re := requireRecoveryRefused(t, err, OpDescribeReplica, c.reason)
			require.Equal(t, int32(3), re.BrokerID)
		})
	}

	t.Run("listing fails", func(t *testing.T) {
		req := base
		req.Remote = describeFakeLister{err: remote.ErrClosed}
		_, err := Describe(req)
		require.ErrorIs(t, err, remote.ErrClosed)
		require.NotErrorIs(t, err, ErrRecoveryRefused)
	})
}

func TestCheckElectReplica(t *testing.T) {
	s := describePhaseOne(t, 1000)
	good := ReplicaDescription{BrokerID: 2, Seal: 1000, RemoteEndOffset: 600, LogEndOffset: 1000, HighWatermark: 1000}
	require.NoError(t, CheckElectReplica(s, good))

	t.Run("switch rules come from ValidateElectReplica", func(t *testing.T) {
		stale := good
		stale.Seal = 1100
		err := CheckElectReplica(s, stale)
		require.ErrorIs(t, err, ErrSealMismatch)
		var te *TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, OpElectReplica, te.Op)
		require.NotErrorIs(t, err, ErrRecoveryRefused)

		s2, err := s.StartPhaseTwo(1000, -1, 1)
		require.NoError(t, err)
		require.ErrorIs(t, CheckElectReplica(s2, good), ErrInPhaseTwo)
		require.ErrorIs(t, CheckElectReplica(State{}, good), ErrNotSwitching)
	})
	cases := []struct {
		name   string
		mutate func(*ReplicaDescription)
		reason error
	}{
		// HW 990 < S with every record: rejected (a limitation of the elect
		// check).
		{"HW below the seal", func(d *ReplicaDescription) { d.HighWatermark = 990 }, ErrHighWatermarkNotAtSeal},
		{"HW past the seal", func(d *ReplicaDescription) { d.LogEndOffset, d.HighWatermark = 1100, 1100 },
			ErrHighWatermarkNotAtSeal},
		{"gap between remote and log", func(d *ReplicaDescription) { d.LocalLogStartOffset = 700 }, ErrClassicPrefixGap},
		{"no remote, log above X", func(d *ReplicaDescription) {
			d.RemoteEndOffset, d.LocalLogStartOffset = 0, 1
		}, ErrClassicPrefixGap},
		{"contradicting offsets", func(d *ReplicaDescription) { d.RemoteEndOffset = 1200 }, ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := good
			c.mutate(&d)
			re := requireRecoveryRefused(t, CheckElectReplica(s, d), OpElectReplica, c.reason)
			require.Equal(t, int32(2), re.BrokerID)
		})
	}
}

func TestPlanStartPhaseTwo(t *testing.T) {
	s := describePhaseOne(t, 1000)
	// The remote record at 599 is in epoch 2, at 499 in epoch 1.
	wiped := func(id int32, remoteEnd int64) ReplicaDescription {
		return ReplicaDescription{BrokerID: id, Seal: 1000, RemoteEndOffset: remoteEnd,
			RemoteEndEpoch: map[int64]int32{500: 1, 600: 2, 1000: 2}[remoteEnd]}
	}
	// Every replica lost its disk, remote storage holds [0, 599].
	req := StartPhaseTwoRequest{Replicas: []int32{1, 2, 3},
		Descriptions: []ReplicaDescription{wiped(3, 600), wiped(1, 600), wiped(2, 500)}, CurrentLeaderEpoch: 3}

	_, err := PlanStartPhaseTwo(s, req)
	re := requireRecoveryRefused(t, err, OpStartPhaseTwo, ErrDataLossNotAccepted)
	require.Equal(t, noReplica, re.BrokerID)

	req.AcceptDataLoss = true
	plan, err := PlanStartPhaseTwo(s, req)
	require.NoError(t, err)
	want, err := s.StartPhaseTwo(600, 2, 3)
	require.NoError(t, err)
	require.Equal(t, StartPhaseTwoPlan{PreviousSeal: 1000, Seal: 600, RemoteEndFrom: 1, RecordedEpoch: 2,
		Lost: OffsetRange{600, 1000}, Next: want}, plan)
	require.Equal(t, int32(2), plan.Next.LastClassicLeaderEpoch())
	require.True(t, plan.Next.UsesRecordedEpoch())
	require.True(t, plan.RepairNeeded())
	require.Contains(t, plan.Reminder(), "repair")
	require.Contains(t, plan.Reminder(), "1000")
	require.Contains(t, plan.String(), "start phase 2 at seal 600")

	t.Run("no loss needs neither acceptance nor repair", func(t *testing.T) {
		r := StartPhaseTwoRequest{Replicas: []int32{1}, Descriptions: []ReplicaDescription{wiped(1, 1000)},
			CurrentLeaderEpoch: 3}
		plan, err := PlanStartPhaseTwo(s, r)
		require.NoError(t, err)
		require.Equal(t, int64(1000), plan.Seal)
		require.True(t, plan.Lost.Empty())
		require.False(t, plan.RepairNeeded())
		require.Empty(t, plan.Reminder())
	})

	t.Run("switch rules come from StartPhaseTwo", func(t *testing.T) {
		_, err := PlanStartPhaseTwo(State{}, req)
		require.ErrorIs(t, err, ErrNotSwitching)
		var te *TransitionError
		require.ErrorAs(t, err, &te)

		s2, err := s.StartPhaseTwo(600, 2, 3)
		require.NoError(t, err)
		_, err = PlanStartPhaseTwo(s2, req)
		require.ErrorIs(t, err, ErrInPhaseTwo)

		r := req
		r.CurrentLeaderEpoch = -1
		_, err = PlanStartPhaseTwo(s, r)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorAs(t, err, &te)
	})

	holder := ReplicaDescription{BrokerID: 2, Seal: 1000, RemoteEndOffset: 600, LogEndOffset: 1000, HighWatermark: 990}
	gapped := ReplicaDescription{BrokerID: 2, Seal: 1000, RemoteEndOffset: 600, LocalLogStartOffset: 700,
		LogEndOffset: 1000, HighWatermark: 1000}
	stale := wiped(2, 600)
	stale.Seal = 1100
	cases := []struct {
		name   string
		r      StartPhaseTwoRequest
		reason error
		broker int32
	}{
		{"a replica holds the prefix (any HW)", StartPhaseTwoRequest{Replicas: []int32{1, 2},
			Descriptions: []ReplicaDescription{wiped(1, 600), holder}}, ErrReplicaHoldsClassicPrefix, 2},
		{"no replica described", StartPhaseTwoRequest{Replicas: []int32{1, 2, 3}}, ErrReplicaNotDescribed, noReplica},
		{"no replicas", StartPhaseTwoRequest{}, ErrInvalidArgument, noReplica},
		{"stale description", StartPhaseTwoRequest{Replicas: []int32{1, 2},
			Descriptions: []ReplicaDescription{wiped(1, 600), stale}}, ErrSealMismatch, 2},
		{"described twice", StartPhaseTwoRequest{Replicas: []int32{1},
			Descriptions: []ReplicaDescription{wiped(1, 600), wiped(1, 500)}}, ErrInvalidArgument, 1},
		{"not a replica", StartPhaseTwoRequest{Replicas: []int32{1},
			Descriptions: []ReplicaDescription{wiped(1, 600), wiped(4, 600)}}, ErrInvalidArgument, 4},
		{"contradicting offsets", StartPhaseTwoRequest{Replicas: []int32{1},
			Descriptions: []ReplicaDescription{wiped(1, 1100)}}, ErrInvalidArgument, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.r.AcceptDataLoss, c.r.CurrentLeaderEpoch = true, 3
			_, err := PlanStartPhaseTwo(s, c.r)
			re := requireRecoveryRefused(t, err, OpStartPhaseTwo, c.reason)
			require.Equal(t, c.broker, re.BrokerID)
		})
	}

	t.Run("a replica with a gap does not block", func(t *testing.T) {
		r := StartPhaseTwoRequest{Replicas: []int32{1, 2}, Descriptions: []ReplicaDescription{wiped(1, 600), gapped},
			CurrentLeaderEpoch: 3, AcceptDataLoss: true}
		plan, err := PlanStartPhaseTwo(s, r)
		require.NoError(t, err)
		require.Equal(t, int64(600), plan.Seal)
	})
}

// TestPlanStartPhaseTwoRule is start-phase-2's rule as
// github.com/aiven/inkless/pull/855 states it: it "fails while a replica
// has the whole prefix" (its log plus remote storage cover [X, S)),
// whatever its high watermark, and plans from "the replica with the
// highest remote end" among the replicas that answered; one that did not
// answer blocks nothing. The refusal advises elect only for a replica
// elect takes (CheckElectReplica agrees with the advice).
func TestPlanStartPhaseTwoRule(t *testing.T) {
	s := describePhaseOne(t, 1000)
	desc := func(id int32, remoteEnd, leo, hw int64) ReplicaDescription {
		return ReplicaDescription{BrokerID: id, Seal: 1000, RemoteEndOffset: remoteEnd, LogEndOffset: leo,
			HighWatermark: hw}
	}
	for _, tc := range []struct {
		name      string
		descs     []ReplicaDescription
		reason    error  // nil: planned
		broker    int32  // the refusal's replica
		advice    string // in the refusal's message
		seal      int64
		undescrib []int32
	}{
		{"holder at the seal: elect it instead", []ReplicaDescription{desc(1, 600, 0, 0), desc(2, 600, 1000, 1000)},
			ErrReplicaHoldsClassicPrefix, 2, "elect it instead", 0, nil},
		{"holder below the seal's high watermark: elect refuses it too",
			[]ReplicaDescription{desc(1, 600, 0, 0), desc(3, 600, 1000, 990)},
			ErrReplicaHoldsClassicPrefix, 3, "elect refuses it too", 0, nil},
		{"a dead broker's replica blocks nothing", []ReplicaDescription{desc(1, 600, 0, 0), desc(2, 500, 990, 990)},
			nil, 0, "", 600, []int32{3}},
		{"the highest remote end of the answering replicas",
			[]ReplicaDescription{desc(2, 500, 0, 0), desc(3, 700, 0, 0)}, nil, 0, "", 700, []int32{1}},
		{"remote storage alone covers the prefix: lossless", []ReplicaDescription{desc(2, 1000, 0, 0)},
			nil, 0, "", 1000, []int32{1, 3}},
		{"nobody answered", nil, ErrReplicaNotDescribed, noReplica, "no replica", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanStartPhaseTwo(s, StartPhaseTwoRequest{Replicas: []int32{1, 2, 3}, Descriptions: tc.descs,
				CurrentLeaderEpoch: 3, AcceptDataLoss: true})
			if tc.reason == nil {
				require.NoError(t, err)
				require.Equal(t, tc.seal, plan.Seal)
				require.Equal(t, tc.undescrib, plan.NotDescribed)
				require.Contains(t, plan.String(), fmt.Sprintf("replicas not described %v", tc.undescrib))
				return
			}
			re := requireRecoveryRefused(t, err, OpStartPhaseTwo, tc.reason)
			require.Equal(t, tc.broker, re.BrokerID)
			require.Contains(t, err.Error(), tc.advice)
			if tc.reason == ErrReplicaHoldsClassicPrefix {
				for _, d := range tc.descs {
					if d.BrokerID == tc.broker {
						electErr := CheckElectReplica(s, d)
						require.Equal(t, electErr == nil, strings.Contains(err.Error(), "elect it instead"),
							"advice %q, elect: %v", err, electErr)
					}
				}
			}
		})
	}
}

// TestPlanStartPhaseTwoProperties checks, over random descriptions, what
// an accepted plan always satisfies: the seal never rises, it is a remote
// end some replica reported and the highest, the loss is exactly what it
// gives up, nobody held the prefix, and the loss was accepted.
func TestPlanStartPhaseTwoProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	const seal = 100
	s := describePhaseOne(t, seal)
	for range 2000 {
		n := 1 + rng.IntN(3)
		req := StartPhaseTwoRequest{CurrentLeaderEpoch: 4, AcceptDataLoss: rng.IntN(2) == 0}
		x := rng.Int64N(seal + 10)
		for id := range int32(n) {
			leo := rng.Int64N(seal + 20)
			localStart := rng.Int64N(leo + 1)
			d := ReplicaDescription{BrokerID: id, Seal: seal, CrossTierLogStartOffset: x,
				RemoteEndOffset: min(x, seal) + rng.Int64N(seal-min(x, seal)+1), LocalLogStartOffset: localStart,
				LogEndOffset: leo, HighWatermark: rng.Int64N(leo + 1)}
			req.Replicas = append(req.Replicas, id)
			req.Descriptions = append(req.Descriptions, d)
		}
		plan, err := PlanStartPhaseTwo(s, req)
		holds, highest := false, int64(-1)
		for _, d := range req.Descriptions {
			holds = holds || d.HoldsClassicPrefix()
			highest = max(highest, d.RemoteEndOffset)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrRecoveryRefused)
			switch {
			case holds:
				require.ErrorIs(t, err, ErrReplicaHoldsClassicPrefix)
			default:
				require.ErrorIs(t, err, ErrDataLossNotAccepted)
				require.False(t, req.AcceptDataLoss)
				require.Less(t, highest, int64(seal))
			}
			continue
		}
		require.False(t, holds)
		require.Equal(t, highest, plan.Seal)
		require.LessOrEqual(t, plan.Seal, int64(seal))
		require.Equal(t, OffsetRange{plan.Seal, seal}, plan.Lost)
		require.True(t, plan.Lost.Empty() || req.AcceptDataLoss)
		require.Equal(t, PhaseTwo, plan.Next.Phase())
		require.Equal(t, plan.Seal, plan.Next.Seal())
	}
}

func TestRecoveryErrorMessage(t *testing.T) {
	err := error(refuseRecovery(OpStartPhaseTwo, noReplica, ErrDataLossNotAccepted, "loses %s", OffsetRange{600, 1000}))
	require.Equal(t, "tierstate: start-phase-2 refused: start-phase-2 loses records and data loss is not accepted: "+
		"loses [600, 1000)", err.Error())
	err = refuseRecovery(OpElectReplica, 3, ErrHighWatermarkNotAtSeal, "")
	require.Equal(t, "tierstate: elect-replica refused for replica 3: replica high watermark not at the seal", err.Error())
	require.True(t, errors.Is(err, ErrHighWatermarkNotAtSeal))
	require.Equal(t, "none", OffsetRange{5, 5}.String())
}

// Every replica lost its disk and remote storage holds [0, 599] of
// the classic prefix [0, 1000), the record at 599 in leader epoch 2.
func ExamplePlanStartPhaseTwo() {
	s, _ := State{}.WithConsolidating(true).ArmSwitch()
	s, _ = s.CommitSeal(1000, nil)
	var descs []ReplicaDescription
	for _, id := range []int32{1, 2, 3} {
		// What Describe answers for a wiped replica: an empty log.
		descs = append(descs, ReplicaDescription{BrokerID: id, Seal: 1000, RemoteEndOffset: 600,
			RemoteEndEpoch: 2, FencedByBroker: id == 1})
	}
	fmt.Println(descs[0])
	req := StartPhaseTwoRequest{Replicas: []int32{1, 2, 3}, Descriptions: descs, CurrentLeaderEpoch: 3}
	if _, err := PlanStartPhaseTwo(s, req); errors.Is(err, ErrDataLossNotAccepted) {
		fmt.Println("without --accept-data-loss:", err)
	}
	req.AcceptDataLoss = true
	plan, _ := PlanStartPhaseTwo(s, req)
	fmt.Println(plan.Next)
	fmt.Println(plan.Reminder())
	// Output:
	// replica 1: seal=1000 log=none hw=0 fenced x=0 remote=[0, 600) missing=[600, 1000) holds-prefix=false start-phase-2-loses=[600, 1000)
	// without --accept-data-loss: tierstate: start-phase-2 refused: start-phase-2 loses records and data loss is not accepted: new seal 600 (remote end from replica 1) loses [600, 1000)
	// phase-2 seal=600 seal-lineage=2@599 recorded-epoch=2 diskless-epoch=4 consolidating
	// run kafka-topic-switch.sh repair: the control plane's diskless_start_offset keeps the old seal 1000 until then
}

// TestDescribeRemoteEndEpochOfTheLaterLineage: an unclean election before
// the switch left two finished copies of offsets 500..599 in remote
// storage, one by the epoch-1 leader and one by the epoch-3 leader that
// replaced them; the remote end epoch is the later lineage's.
func TestDescribeRemoteEndEpochOfTheLaterLineage(t *testing.T) {
	s := describePhaseOne(t, 600)
	old := describeFinished(0, 599)
	old.SegmentLeaderEpochs = []epochcache.Entry{{Epoch: 1, StartOffset: 0}}
	later := describeFinished(400, 599)
	later.SegmentLeaderEpochs = []epochcache.Entry{{Epoch: 1, StartOffset: 400}, {Epoch: 3, StartOffset: 500}}
	for _, segs := range [][]remote.SegmentMetadata{{old, later}, {later, old}} {
		d, err := Describe(DescribeRequest{Partition: testTP, BrokerID: 1, State: s, Log: describeFakeLog{0, 0, 0},
			Remote: describeFakeLister{segs: segs}})
		require.NoError(t, err)
		require.Equal(t, int64(600), d.RemoteEndOffset)
		require.Equal(t, int32(3), d.RemoteEndEpoch)
	}
	// Nothing copied: no epoch.
	d, err := Describe(DescribeRequest{Partition: testTP, BrokerID: 1, State: s, Log: describeFakeLog{0, 0, 0},
		Remote: describeFakeLister{}})
	require.NoError(t, err)
	require.Equal(t, int64(0), d.RemoteEndOffset)
	require.Equal(t, int32(-1), d.RemoteEndEpoch)
}
