package tierstate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
)

// sealFakeLog is a FetchLog with set offsets and epoch answers. It counts
// the epoch questions, so a test can tell whether lineage was consulted.
type sealFakeLog struct {
	logStart, localStart, leo, hw int64
	remote                        bool
	// epochs answers EndOffsetForEpoch; a missing epoch has no answer.
	epochs    map[int32]EpochEndOffset
	questions int
}

func (l *sealFakeLog) LogStartOffset() int64        { return l.logStart }
func (l *sealFakeLog) LocalLogStartOffset() int64   { return l.localStart }
func (l *sealFakeLog) LogEndOffset() int64          { return l.leo }
func (l *sealFakeLog) HighWatermark() int64         { return l.hw }
func (l *sealFakeLog) RemoteStorageEnabled() bool   { return l.remote }
func (l *sealFakeLog) EarliestEpoch() (int32, bool) { return 0, false }

func (l *sealFakeLog) EndOffsetForEpoch(epoch int32) EpochEndOffset {
	l.questions++
	a, ok := l.epochs[epoch]
	if !ok {
		return undefinedEpochEndOffset
	}
	return a
}

func mustSwitch(t *testing.T, phase Phase, seal int64, consolidating bool) State {
	t.Helper()
	s := State{}.WithConsolidating(consolidating)
	var err error
	if phase >= PhaseSealPending {
		s, err = s.ArmSwitch()
		require.NoError(t, err)
	}
	if phase >= PhaseOne {
		s, err = s.CommitSeal(seal, nil)
		require.NoError(t, err)
	}
	if phase == PhaseTwo {
		s, err = s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 5, Seal: seal,
			LastClassicLeaderEpoch: 3}, Leadership{Leader: 1, LeaderEpoch: 5})
		require.NoError(t, err)
	}
	return s
}

// sealCase is a leader at seal 100 holding the prefix: epoch 3 on
// [0, 100), epoch 6 on [100, 160), HW 160; leader epoch 6; follower 2
// assigned, outside the ISR, registered in broker epoch 7, fetching at 100
// in epoch 3.
type sealCase struct {
	log     *sealFakeLog
	leader  SealLeader
	replica SealReplica
	req     SealFetchRequest
}

func newSealCase(t *testing.T) *sealCase {
	l := &sealFakeLog{logStart: 0, localStart: 0, leo: 160, hw: 160, epochs: map[int32]EpochEndOffset{
		3: {Epoch: 3, EndOffset: 100},
		4: {Epoch: 3, EndOffset: 100},
		5: {Epoch: 3, EndOffset: 100},
		6: {Epoch: 6, EndOffset: 160},
	}}
	return &sealCase{
		log:     l,
		leader:  SealLeader{Log: l, State: mustSwitch(t, PhaseTwo, 100, true), LeaderEpoch: 6, IsLeader: true},
		replica: SealReplica{Assigned: true, RegisteredBrokerEpoch: 7},
		req: SealFetchRequest{
			FetchRequest: FetchRequest{Fetcher: FetcherFollower, FetchOffset: 100, LastFetchedEpoch: 3, CurrentLeaderEpoch: 6},
			ReplicaID:    2,
			BrokerEpoch:  7,
		},
	}
}

func (c *sealCase) validate(t *testing.T) SealFetchDecision {
	t.Helper()
	d, err := ValidateFetchAtSeal(c.leader, c.replica, c.req)
	require.NoError(t, err)
	checkSealDecision(t, c.leader.State.Seal(), d)
	return d
}

func TestValidateFetchAtSealNotAtSeal(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(t *testing.T, c *sealCase)
	}{
		{"consumer", func(_ *testing.T, c *sealCase) { c.req.Fetcher = FetcherConsumer }},
		{"future replica", func(_ *testing.T, c *sealCase) { c.req.Fetcher = FetcherFuture }},
		{"below the seal", func(_ *testing.T, c *sealCase) { c.req.FetchOffset = 99 }},
		{"classic", func(t *testing.T, c *sealCase) { c.leader.State = mustSwitch(t, PhaseClassic, 0, true) }},
		{"seal pending", func(t *testing.T, c *sealCase) { c.leader.State = mustSwitch(t, PhaseSealPending, 0, true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSealCase(t)
			tc.mod(t, c)
			require.False(t, IsFetchAtSeal(c.leader.State, c.req.FetchRequest))
			_, err := ValidateFetchAtSeal(c.leader, c.replica, c.req)
			require.ErrorIs(t, err, ErrNotAtSeal)
			require.ErrorIs(t, err, base.ErrInvalidArgument)
			require.Zero(t, c.log.questions)
		})
	}
}

// TestValidateFetchAtSealRefusals covers every answer that does not admit:
// each error, and the divergence.
func TestValidateFetchAtSealRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mod      func(c *sealCase)
		step     SealFetchStep
		err      SealFetchError
		reason   string
		diverges bool
	}{
		{name: "fenced leader epoch", mod: func(c *sealCase) { c.req.CurrentLeaderEpoch = 5 },
			step: SealStepZeroByteRead, err: SealErrorFencedLeaderEpoch, reason: "older than leader epoch 6"},
		{name: "unknown leader epoch", mod: func(c *sealCase) { c.req.CurrentLeaderEpoch = 7 },
			step: SealStepZeroByteRead, err: SealErrorUnknownLeaderEpoch, reason: "newer than leader epoch 6"},
		{name: "fencing before divergence", mod: func(c *sealCase) { c.req.CurrentLeaderEpoch = 5; c.req.LastFetchedEpoch = 4 },
			step: SealStepZeroByteRead, err: SealErrorFencedLeaderEpoch, reason: "older"},
		{name: "not leader", mod: func(c *sealCase) { c.leader.IsLeader = false },
			step: SealStepZeroByteRead, err: SealErrorNotLeaderOrFollower, reason: "does not lead"},
		{name: "not assigned", mod: func(c *sealCase) { c.replica.Assigned = false },
			step: SealStepZeroByteRead, err: SealErrorNotLeaderOrFollower, reason: "not assigned"},
		{name: "stale broker epoch", mod: func(c *sealCase) { c.req.BrokerEpoch = 6 },
			step: SealStepZeroByteRead, err: SealErrorNotLeaderOrFollower, reason: "broker epoch 6 older than registered 7"},
		{name: "no end offset for the last fetched epoch", mod: func(c *sealCase) { c.req.LastFetchedEpoch = 9 },
			step: SealStepZeroByteRead, err: SealErrorOffsetOutOfRange, reason: "no end offset for last fetched epoch 9"},
		{name: "diverging", mod: func(c *sealCase) { c.req.LastFetchedEpoch = 4 },
			step: SealStepZeroByteRead, diverges: true, reason: "leader has epoch 3 ending at 100"},
		{name: "diverging from an old broker incarnation", mod: func(c *sealCase) { c.req.LastFetchedEpoch = 4; c.req.BrokerEpoch = 1 },
			step: SealStepZeroByteRead, diverges: true, reason: "leader has epoch 3 ending at 100"},
		{name: "past the log end, log start past the seal", mod: func(c *sealCase) {
			c.log.logStart, c.log.localStart = 120, 120
			c.req.FetchOffset, c.req.LastFetchedEpoch = 170, base.UndefinedEpoch
		}, step: SealStepZeroByteRead, err: SealErrorOffsetOutOfRange, reason: "offset 170 above log end 160"},
		{name: "prefix expired, fenced", mod: func(c *sealCase) { c.log.logStart = 120; c.req.CurrentLeaderEpoch = 5 },
			step: SealStepPrefixExpired, err: SealErrorFencedLeaderEpoch, reason: "older"},
		{name: "prefix expired, unknown epoch", mod: func(c *sealCase) { c.log.logStart = 120; c.req.CurrentLeaderEpoch = 8 },
			step: SealStepPrefixExpired, err: SealErrorUnknownLeaderEpoch, reason: "newer"},
		{name: "prefix expired, not leader", mod: func(c *sealCase) { c.log.logStart = 120; c.leader.IsLeader = false },
			step: SealStepPrefixExpired, err: SealErrorNotLeaderOrFollower, reason: "does not lead"},
		{name: "prefix expired, not assigned", mod: func(c *sealCase) { c.log.logStart = 120; c.replica.Assigned = false },
			step: SealStepPrefixExpired, err: SealErrorNotLeaderOrFollower, reason: "not assigned"},
		{name: "prefix expired, stale broker epoch", mod: func(c *sealCase) { c.log.logStart = 120; c.req.BrokerEpoch = 3 },
			step: SealStepPrefixExpired, err: SealErrorNotLeaderOrFollower, reason: "broker epoch 3 older than registered 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSealCase(t)
			tc.mod(c)
			d := c.validate(t)
			require.Equal(t, tc.step, d.Step, "%s", d)
			require.Equal(t, tc.err, d.Error, "%s", d)
			require.Contains(t, d.Reason, tc.reason)
			require.Equal(t, tc.diverges, d.Diverging(), "%s", d)
			require.False(t, d.TryAdmission, "%s", d)
			require.Equal(t, base.UndefinedOffset, d.RecordOffset, "%s", d)
			if tc.step == SealStepPrefixExpired {
				require.Zero(t, c.log.questions, "step 2 checks no lineage")
			}
		})
	}
}

func TestValidateFetchAtSealSteps(t *testing.T) {
	t.Run("step 1 validates nothing", func(t *testing.T) {
		c := newSealCase(t)
		c.log.leo, c.log.hw = 60, 60
		// Every check would fail.
		c.leader.IsLeader, c.replica.Assigned = false, false
		c.req.CurrentLeaderEpoch, c.req.LastFetchedEpoch, c.req.BrokerEpoch = 1, 9, 1
		d := c.validate(t)
		require.Equal(t, SealStepLeaderBelowSeal, d.Step)
		require.Equal(t, SealErrorNone, d.Error)
		require.Equal(t, int64(100), d.HighWatermark)
		require.Zero(t, d.LogStartOffset)
		require.False(t, d.Diverging())
		require.False(t, d.TryAdmission)
		require.Equal(t, base.UndefinedOffset, d.RecordOffset)
		require.Equal(t, base.UndefinedOffset, d.ValidatedOffset)
		require.Zero(t, c.log.questions)
	})
	t.Run("step 2 records the real fetch offset", func(t *testing.T) {
		c := newSealCase(t)
		c.log.logStart, c.log.localStart = 120, 120
		c.req.FetchOffset, c.req.LastFetchedEpoch = 110, 42 // an epoch nobody knows: not asked
		d := c.validate(t)
		require.Equal(t, SealStepPrefixExpired, d.Step)
		require.Equal(t, int64(110), d.RecordOffset)
		require.True(t, d.TryAdmission)
		require.Equal(t, int64(100), d.HighWatermark)
		require.Zero(t, c.log.questions)
	})
	t.Run("step 3 clamps a follower past the seal to the seal", func(t *testing.T) {
		c := newSealCase(t)
		c.req.FetchOffset, c.req.LastFetchedEpoch = 130, 6
		d := c.validate(t)
		require.Equal(t, SealStepZeroByteRead, d.Step)
		require.Equal(t, int64(100), d.ValidatedOffset)
		require.Equal(t, int64(100), d.RecordOffset)
		require.True(t, d.TryAdmission)
		require.Equal(t, int64(100), d.HighWatermark, "never the leader's high watermark 160")
	})
	t.Run("step 3 validates at the fetch offset past the log start", func(t *testing.T) {
		c := newSealCase(t)
		c.log.logStart, c.log.localStart = 120, 120
		c.req.FetchOffset, c.req.LastFetchedEpoch = 140, 6
		d := c.validate(t)
		require.Equal(t, int64(140), d.ValidatedOffset)
		require.Equal(t, int64(140), d.RecordOffset)
		require.True(t, d.TryAdmission)
	})
	t.Run("step 3 ignores the tiered range", func(t *testing.T) {
		c := newSealCase(t)
		c.log.localStart, c.log.remote = 130, true
		// ValidateFetch on the log itself sends the follower to remote storage.
		require.Equal(t, FetchOffsetMovedToTieredStorage, ValidateFetch(c.log, 6, c.req.FetchRequest).Outcome)
		d := c.validate(t)
		require.Equal(t, SealErrorNone, d.Error)
		require.True(t, d.TryAdmission)
		// An unknown epoch in the tiered range stays OFFSET_OUT_OF_RANGE.
		c.req.LastFetchedEpoch = 9
		require.Equal(t, SealErrorOffsetOutOfRange, c.validate(t).Error)
	})
	t.Run("a fetch without broker epoch or leader epoch", func(t *testing.T) {
		c := newSealCase(t)
		c.req.BrokerEpoch, c.req.CurrentLeaderEpoch = NoBrokerEpoch, base.UndefinedEpoch
		d := c.validate(t)
		require.True(t, d.TryAdmission, "%s", d)
		// Nor does a broker without a registration fence a fetch.
		c.replica.RegisteredBrokerEpoch, c.req.BrokerEpoch = NoBrokerEpoch, 3
		require.True(t, c.validate(t).TryAdmission)
	})
}

// TestValidateFetchAtSealExhaustive runs every small combination of log
// shape and fetch and checks the rules of ValidateFetchAtSeal that hold
// for all.
func TestValidateFetchAtSealExhaustive(t *testing.T) {
	const seal = 4
	s := mustSwitch(t, PhaseOne, seal, true)
	n := 0
	for logStart := int64(0); logStart <= 8; logStart++ {
		for leo := logStart; leo <= 8; leo++ {
			for offset := int64(seal); offset <= 9; offset++ {
				for _, lastEpoch := range []int32{base.UndefinedEpoch, 1, 2, 3} {
					l := &sealFakeLog{logStart: logStart, localStart: logStart, leo: leo, hw: leo, epochs: map[int32]EpochEndOffset{
						1: {Epoch: 1, EndOffset: min(leo, 3)},
						2: {Epoch: 2, EndOffset: leo},
					}}
					leader := SealLeader{Log: l, State: s, LeaderEpoch: 2, IsLeader: true}
					req := SealFetchRequest{FetchRequest: FetchRequest{Fetcher: FetcherFollower, FetchOffset: offset,
						LastFetchedEpoch: lastEpoch, CurrentLeaderEpoch: 2}, ReplicaID: 2, BrokerEpoch: 1}
					d, err := ValidateFetchAtSeal(leader, SealReplica{Assigned: true, RegisteredBrokerEpoch: 1}, req)
					require.NoError(t, err)
					where := fmt.Sprintf("log [%d, %d) fetch %d epoch %d: %s", logStart, leo, offset, lastEpoch, d)
					checkSealDecision(t, seal, d)
					switch {
					case leo < seal:
						require.Equal(t, SealStepLeaderBelowSeal, d.Step, where)
					case logStart > seal && offset < logStart:
						require.Equal(t, SealStepPrefixExpired, d.Step, where)
						require.Equal(t, offset, d.RecordOffset, where)
					default:
						require.Equal(t, SealStepZeroByteRead, d.Step, where)
						want := int64(seal)
						if logStart > seal {
							want = offset
						}
						require.Equal(t, want, d.ValidatedOffset, where)
						if d.TryAdmission {
							require.Equal(t, want, d.RecordOffset, where)
						}
					}
					if d.Step != SealStepZeroByteRead {
						require.Zero(t, l.questions, "steps 1 and 2 check no lineage: %s", where)
					}
					n++
				}
			}
		}
	}
	require.Greater(t, n, 1000)
}

func TestShouldAdmitAtSeal(t *testing.T) {
	admission := func(t *testing.T) SealAdmission {
		return SealAdmission{
			State:               mustSwitch(t, PhaseTwo, 100, true),
			IsLeader:            true,
			Replica:             SealReplica{Assigned: true, RegisteredBrokerEpoch: 7},
			RecordedEndOffset:   100,
			RecordedBrokerEpoch: 7,
		}
	}
	admit, why := ShouldAdmitAtSeal(admission(t))
	require.True(t, admit, why)

	for _, tc := range []struct {
		name string
		mod  func(t *testing.T, a *SealAdmission)
		why  string
	}{
		{"classic", func(t *testing.T, a *SealAdmission) { a.State = mustSwitch(t, PhaseClassic, 0, true) }, "no committed seal"},
		{"seal pending", func(t *testing.T, a *SealAdmission) { a.State = mustSwitch(t, PhaseSealPending, 0, true) }, "no committed seal"},
		{"not leader", func(_ *testing.T, a *SealAdmission) { a.IsLeader = false }, "does not lead"},
		{"ISR change in flight", func(_ *testing.T, a *SealAdmission) { a.IsrChangeInFlight = true }, "in flight"},
		{"already in the ISR", func(_ *testing.T, a *SealAdmission) { a.Replica.InIsr = true }, "already in the ISR"},
		{"not assigned", func(_ *testing.T, a *SealAdmission) { a.Replica.Assigned = false }, "not an assigned replica"},
		{"fenced", func(_ *testing.T, a *SealAdmission) { a.Replica.Fenced = true }, "fenced"},
		{"controlled shutdown", func(_ *testing.T, a *SealAdmission) { a.Replica.InControlledShutdown = true }, "controlled shutdown"},
		{"nothing recorded", func(_ *testing.T, a *SealAdmission) { a.RecordedEndOffset = base.UndefinedOffset }, "no position recorded"},
		{"no registration", func(_ *testing.T, a *SealAdmission) { a.Replica.RegisteredBrokerEpoch = NoBrokerEpoch }, "no live registration"},
		{"broker epoch mismatch", func(_ *testing.T, a *SealAdmission) { a.RecordedBrokerEpoch = 8 }, "recorded broker epoch 8, registered 7"},
		{"below the seal", func(_ *testing.T, a *SealAdmission) { a.RecordedEndOffset = 99 }, "recorded end 99 below seal 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := admission(t)
			tc.mod(t, &a)
			admit, why := ShouldAdmitAtSeal(a)
			require.False(t, admit)
			require.Contains(t, why, tc.why)
		})
	}

	t.Run("admitted", func(t *testing.T) {
		for _, mod := range []func(a *SealAdmission){
			func(a *SealAdmission) { a.RecordedBrokerEpoch = NoBrokerEpoch }, // a follower before KIP-903
			func(a *SealAdmission) { a.RecordedEndOffset = 130 },             // past the seal
		} {
			a := admission(t)
			mod(&a)
			admit, why := ShouldAdmitAtSeal(a)
			require.True(t, admit, why)
		}
		// Phase 1, non-consolidating: the same rule.
		a := admission(t)
		a.State = mustSwitch(t, PhaseOne, 100, false)
		admit, why := ShouldAdmitAtSeal(a)
		require.True(t, admit, why)
	})
}

// sealFakeFollower is a SealFollowerLog with set offsets.
type sealFakeFollower struct {
	leo, hw  int64
	hasEpoch bool
}

func (l sealFakeFollower) LogEndOffset() int64  { return l.leo }
func (l sealFakeFollower) HighWatermark() int64 { return l.hw }
func (l sealFakeFollower) LatestEpoch() (int32, bool) {
	if l.hasEpoch {
		return 3, true
	}
	return base.UndefinedEpoch, false
}

func TestHandOffAtSeal(t *testing.T) {
	for _, tc := range []struct {
		name          string
		phase         Phase
		consolidating bool
		leo, hw       int64
		inIsr         bool
		want          SealHandOffAction
	}{
		{"classic", PhaseClassic, true, 120, 120, true, HandOffContinue},
		{"seal pending", PhaseSealPending, true, 120, 120, true, HandOffContinue},
		{"below the seal", PhaseTwo, true, 99, 99, true, HandOffContinue},
		{"below the seal, outside the ISR", PhaseOne, false, 99, 99, false, HandOffContinue},
		{"at the seal, outside the ISR", PhaseTwo, true, 100, 100, false, HandOffWaitForIsr},
		{"past the seal, outside the ISR", PhaseTwo, true, 130, 100, false, HandOffWaitForIsr},
		{"non-consolidating, outside the ISR", PhaseOne, false, 100, 100, false, HandOffWaitForIsr},
		{"consolidating, in the ISR", PhaseTwo, true, 100, 100, true, HandOffConsolidate},
		{"consolidating phase 2, HW below the seal", PhaseTwo, true, 100, 90, true, HandOffConsolidate},
		// Phase 1 has no diskless epoch: consolidation waits for the flag.
		{"consolidating phase 1, HW below the seal", PhaseOne, true, 100, 90, true, HandOffWaitForHighWatermark},
		{"consolidating phase 1, HW at the seal", PhaseOne, true, 100, 100, true, HandOffEvict},
		{"non-consolidating phase 1, HW below the seal", PhaseOne, false, 100, 90, true, HandOffWaitForHighWatermark},
		{"non-consolidating phase 1, HW at the seal", PhaseOne, false, 100, 100, true, HandOffEvict},
		{"non-consolidating phase 2, HW below the seal", PhaseTwo, false, 100, 90, true, HandOffEvict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSwitch(t, tc.phase, 100, tc.consolidating)
			h := HandOffAtSeal(s, sealFakeFollower{leo: tc.leo, hw: tc.hw, hasEpoch: true}, tc.inIsr)
			require.Equal(t, tc.want, h.Action, "%s", h)
			require.Equal(t, tc.want == HandOffConsolidate || tc.want == HandOffEvict, h.Evicts())
			require.Equal(t, tc.want == HandOffWaitForIsr || tc.want == HandOffWaitForHighWatermark, h.BacksOff())
			if tc.want == HandOffConsolidate {
				require.Equal(t, tc.leo, h.ConsolidationStartOffset)
			} else {
				require.Equal(t, base.UndefinedOffset, h.ConsolidationStartOffset)
			}
		})
	}
}

func TestRouteFollowerFetcher(t *testing.T) {
	for _, tc := range []struct {
		name          string
		phase         Phase
		consolidating bool
		log           sealFakeFollower
		inIsr         bool
		fetcher       FollowerFetcher
		start         int64
	}{
		{"not consolidating", PhaseTwo, false, sealFakeFollower{130, 100, true}, true, ClassicFetcher, 130},
		{"born diskless", PhaseClassic, true, sealFakeFollower{130, 100, true}, false, ConsolidationFetcher, 130},
		{"born diskless without an epoch", PhaseClassic, true, sealFakeFollower{130, 100, false}, false, ConsolidationFetcher, 100},
		{"seal pending", PhaseSealPending, true, sealFakeFollower{130, 100, true}, true, ClassicFetcher, 130},
		{"below the seal", PhaseTwo, true, sealFakeFollower{90, 80, true}, true, ClassicFetcher, 90},
		{"at the seal, outside the ISR", PhaseTwo, true, sealFakeFollower{100, 100, true}, false, ClassicFetcher, 100},
		{"past the seal, outside the ISR: real LEO", PhaseTwo, true, sealFakeFollower{130, 100, true}, false, ClassicFetcher, 130},
		{"no epoch, outside the ISR: HW", PhaseOne, true, sealFakeFollower{130, 110, false}, false, ClassicFetcher, 110},
		{"at the seal, in the ISR", PhaseTwo, true, sealFakeFollower{100, 90, true}, true, ConsolidationFetcher, 100},
		{"phase 1 at the seal, in the ISR: waits for the flag", PhaseOne, true, sealFakeFollower{100, 90, true}, true, ClassicFetcher, 100},
		{"past the seal, in the ISR: LEO even without an epoch", PhaseTwo, true, sealFakeFollower{130, 110, false}, true, ConsolidationFetcher, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := RouteFollowerFetcher(mustSwitch(t, tc.phase, 100, tc.consolidating), tc.log, tc.inIsr)
			require.Equal(t, tc.fetcher, r.Fetcher, "%s", r)
			require.Equal(t, tc.start, r.StartOffset, "%s", r)
		})
	}
}

// TestSealHandOffAgreesWithRoute checks that the two follower decisions
// never disagree: whenever an append would hand a partition to
// consolidation, applyDelta routes it there too, and a partition that
// waits at the seal is routed to the classic fetcher.
func TestSealHandOffAgreesWithRoute(t *testing.T) {
	for _, phase := range []Phase{PhaseClassic, PhaseSealPending, PhaseOne, PhaseTwo} {
		for _, consolidating := range []bool{false, true} {
			s := mustSwitch(t, phase, 10, consolidating)
			for leo := int64(8); leo <= 12; leo++ {
				for _, inIsr := range []bool{false, true} {
					l := sealFakeFollower{leo: leo, hw: leo, hasEpoch: true}
					h, r := HandOffAtSeal(s, l, inIsr), RouteFollowerFetcher(s, l, inIsr)
					where := fmt.Sprintf("%s leo=%d in-isr=%t: %s / %s", s, leo, inIsr, h, r)
					if h.Action == HandOffConsolidate {
						require.Equal(t, ConsolidationFetcher, r.Fetcher, where)
						require.Equal(t, h.ConsolidationStartOffset, r.StartOffset, where)
					}
					if h.BacksOff() {
						require.Equal(t, ClassicFetcher, r.Fetcher, where)
					}
				}
			}
		}
	}
}

func TestSealStrings(t *testing.T) {
	for want, s := range map[string]fmt.Stringer{
		"SealFetchStep(0)":       SealFetchStep(0),
		"SealFetchError(9)":      SealFetchError(9),
		"SealHandOffAction(9)":   SealHandOffAction(9),
		"FollowerFetcher(9)":     FollowerFetcher(9),
		"OFFSET_OUT_OF_RANGE":    SealErrorOffsetOutOfRange,
		"NOT_LEADER_OR_FOLLOWER": SealErrorNotLeaderOrFollower,
		"prefix-expired":         SealStepPrefixExpired,
		"consolidation":          ConsolidationFetcher,
	} {
		require.Equal(t, want, s.String())
	}
	require.True(t, errors.Is(ErrNotAtSeal, base.ErrInvalidArgument))
}
