package tierstate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
)

// mustRecord builds a State from a full record or fails the test.
func mustRecord(t *testing.T, tags Tags) State {
	t.Helper()
	s, err := FromPartitionRecord(tags)
	require.NoError(t, err)
	return s
}

var (
	tagsPending = Tags{ClassicToDisklessStartOffset: Some(SealPending)}
	tagsPhase1  = Tags{ClassicToDisklessStartOffset: Some[int64](100)}
	tagsPhase2  = Tags{
		ClassicToDisklessStartOffset: Some[int64](100),
		DisklessLeaderEpoch:          Some[int32](6),
		ClassicPrefixInRemoteStorage: Some(true),
		LastClassicLeaderEpoch:       Some[int32](2),
	}
)

// TestRefusalReasons makes each refusal reason happen once, through the
// operation or record that the switch rules forbid, and checks the error's
// type, both sentinels it matches and that the State is returned unchanged.
func TestRefusalReasons(t *testing.T) {
	classic := State{}
	pending := mustRecord(t, tagsPending)
	phase1 := mustRecord(t, tagsPhase1)
	phase2 := mustRecord(t, tagsPhase2)
	leader := Leadership{Leader: 1, LeaderEpoch: 5}
	flagReq := ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 5, Seal: 100, LastClassicLeaderEpoch: 2}
	with := func(f func(*ClassicPrefixRequest)) ClassicPrefixRequest {
		r := flagReq
		f(&r)
		return r
	}

	cases := []struct {
		name   string
		from   State
		op     func(State) (State, error)
		reason error
		opName string
	}{
		{"arm after commit", phase1, State.ArmSwitch, ErrSealCommitted, OpArm},
		{"abort on classic", classic, State.AbortSwitch, ErrNotSwitching, OpAbort},
		{"abort after commit", phase2, State.AbortSwitch, ErrSealCommitted, OpAbort},
		{"commit on classic", classic, func(s State) (State, error) { return s.CommitSeal(100, nil) }, ErrNotSwitching, OpCommitSeal},
		{"commit twice", phase1, func(s State) (State, error) { return s.CommitSeal(100, nil) }, ErrSealCommitted, OpCommitSeal},
		{"commit negative", pending, func(s State) (State, error) { return s.CommitSeal(-1, nil) }, ErrInvalidSeal, OpCommitSeal},
		{"reseal classic", classic, func(s State) (State, error) { return s.Reseal(10, nil, false) }, ErrNotSwitching, OpReseal},
		{"reseal up", phase1, func(s State) (State, error) { return s.Reseal(101, nil, false) }, ErrSealIncrease, OpReseal},
		{"reseal negative", phase1, func(s State) (State, error) { return s.Reseal(-1, nil, false) }, ErrInvalidSeal, OpReseal},
		{"reseal phase 2", phase2, func(s State) (State, error) { return s.Reseal(90, nil, false) }, ErrInPhaseTwo, OpReseal},
		{"flag other seal after flag", phase2, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.Seal = 90 }), leader)
		}, ErrSealMismatch, OpSetClassicPrefix},
		{"flag epoch ahead", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.LeaderEpoch = 6 }), leader)
		}, ErrLeaderEpochAhead, OpSetClassicPrefix},
		{"flag epoch fenced", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.LeaderEpoch = 4 }), leader)
		}, ErrFencedEpoch, OpSetClassicPrefix},
		{"flag not leader", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.BrokerID = 2 }), leader)
		}, ErrNotLeader, OpSetClassicPrefix},
		{"flag classic", classic, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(flagReq, leader)
		}, ErrNotSwitching, OpSetClassicPrefix},
		{"flag pending", pending, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(flagReq, leader)
		}, ErrSealNotCommitted, OpSetClassicPrefix},
		{"flag seal mismatch", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.Seal = 90 }), leader)
		}, ErrSealMismatch, OpSetClassicPrefix},
		{"flag R too high", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.LastClassicLeaderEpoch = 6 }), leader)
		}, ErrInvalidRecordedEpoch, OpSetClassicPrefix},
		{"flag R too low", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(with(func(r *ClassicPrefixRequest) { r.LastClassicLeaderEpoch = -2 }), leader)
		}, ErrInvalidRecordedEpoch, OpSetClassicPrefix},
		{"flag bad partition epoch", phase1, func(s State) (State, error) {
			return s.SetClassicPrefixInRemoteStorage(flagReq, Leadership{Leader: 1, LeaderEpoch: base.UndefinedEpoch})
		}, ErrInvalidArgument, OpSetClassicPrefix},
		{"flag E_d would fall", mustRecord(t, Tags{ClassicToDisklessStartOffset: Some[int64](100), DisklessLeaderEpoch: Some[int32](7)}),
			func(s State) (State, error) { return s.SetClassicPrefixInRemoteStorage(flagReq, leader) }, ErrDisklessEpochDecrease, OpSetClassicPrefix},
		{"start-phase-2 E_d would fall", mustRecord(t, Tags{ClassicToDisklessStartOffset: Some[int64](100), DisklessLeaderEpoch: Some[int32](7)}),
			func(s State) (State, error) { return s.StartPhaseTwo(50, -1, 5) }, ErrDisklessEpochDecrease, OpStartPhaseTwo},
		{"start-phase-2 classic", classic, func(s State) (State, error) { return s.StartPhaseTwo(50, -1, 5) }, ErrNotSwitching, OpStartPhaseTwo},
		{"start-phase-2 pending", pending, func(s State) (State, error) { return s.StartPhaseTwo(50, -1, 5) }, ErrSealNotCommitted, OpStartPhaseTwo},
		{"start-phase-2 twice", phase2, func(s State) (State, error) { return s.StartPhaseTwo(50, -1, 5) }, ErrInPhaseTwo, OpStartPhaseTwo},
		{"start-phase-2 negative", phase1, func(s State) (State, error) { return s.StartPhaseTwo(-1, -1, 5) }, ErrInvalidSeal, OpStartPhaseTwo},
		{"start-phase-2 up", phase1, func(s State) (State, error) { return s.StartPhaseTwo(101, -1, 5) }, ErrSealIncrease, OpStartPhaseTwo},
		{"start-phase-2 bad epoch", phase1, func(s State) (State, error) { return s.StartPhaseTwo(50, -1, -1) }, ErrInvalidArgument, OpStartPhaseTwo},
		{"start-phase-2 recorded epoch -2", phase1, func(s State) (State, error) { return s.StartPhaseTwo(50, -2, 5) }, ErrInvalidRecordedEpoch, OpStartPhaseTwo},
		{"start-phase-2 recorded epoch above the leader epoch", phase1, func(s State) (State, error) { return s.StartPhaseTwo(50, 6, 5) }, ErrInvalidRecordedEpoch, OpStartPhaseTwo},
		{"elect classic", classic, elect(100), ErrNotSwitching, OpElectReplica},
		{"elect pending", pending, elect(100), ErrSealNotCommitted, OpElectReplica},
		{"elect phase 2", phase2, elect(100), ErrInPhaseTwo, OpElectReplica},
		{"elect other seal", phase1, elect(90), ErrSealMismatch, OpElectReplica},
		{"record seal below -2", classic, apply(Tags{ClassicToDisklessStartOffset: Some[int64](-3)}), ErrInvalidSeal, OpApplyChange},
		{"record undo after commit", phase1, apply(Tags{ClassicToDisklessStartOffset: Some(NoSeal)}), ErrSealCommitted, OpApplyChange},
		{"record undo with fields", pending, apply(Tags{ClassicToDisklessStartOffset: Some(NoSeal), DisklessLeaderEpoch: Some[int32](1)}), ErrConflictingTags, OpApplyChange},
		{"record seal on classic", classic, apply(tagsPhase1), ErrNotSwitching, OpApplyChange},
		{"record seal up", phase1, apply(Tags{ClassicToDisklessStartOffset: Some[int64](101)}), ErrSealIncrease, OpApplyChange},
		{"record seal down in phase 2", phase2, apply(Tags{ClassicToDisklessStartOffset: Some[int64](90)}), ErrInPhaseTwo, OpApplyChange},
		{"record producers pending", pending, apply(Tags{ProducerStates: Some(testProducers(1))}), ErrSealNotCommitted, OpApplyChange},
		{"record E_d pending", pending, apply(Tags{DisklessLeaderEpoch: Some[int32](1)}), ErrSealNotCommitted, OpApplyChange},
		{"record E_d below -1", phase1, apply(Tags{DisklessLeaderEpoch: Some[int32](-2)}), ErrInvalidEpoch, OpApplyChange},
		{"record E_d down", phase2, apply(Tags{DisklessLeaderEpoch: Some[int32](5)}), ErrDisklessEpochDecrease, OpApplyChange},
		{"record flag pending", pending, apply(Tags{ClassicToDisklessStartOffset: Some[int64](100), ClassicPrefixInRemoteStorage: Some(true)}), ErrSealNotCommitted, OpApplyChange},
		{"record flag cleared", phase2, apply(Tags{ClassicPrefixInRemoteStorage: Some(false)}), ErrPhaseBackwards, OpApplyChange},
		{"record R below -1", phase1, apply(Tags{LastClassicLeaderEpoch: Some[int32](-2)}), ErrInvalidEpoch, OpApplyChange},
		{"record R without flag", phase1, apply(Tags{LastClassicLeaderEpoch: Some[int32](2)}), ErrRecordedEpochNotWithFlag, OpApplyChange},
		{"record R changed", phase2, apply(Tags{LastClassicLeaderEpoch: Some[int32](3)}), ErrRecordedEpochNotWithFlag, OpApplyChange},
		{"record R not below E_d", phase1, apply(Tags{ClassicPrefixInRemoteStorage: Some(true), DisklessLeaderEpoch: Some[int32](2), LastClassicLeaderEpoch: Some[int32](2)}), ErrInvalidRecordedEpoch, OpApplyChange},
	}
	seen := map[error]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.op(c.from)
			require.Error(t, err)
			require.Equal(t, c.from, got, "a refusal returns the State unchanged")
			require.ErrorIs(t, err, ErrInvalidTransition)
			require.ErrorIs(t, err, c.reason)
			var te *TransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, c.opName, te.Op)
			require.Equal(t, c.from.Phase(), te.From)
			seen[c.reason] = true
		})
	}
	// Every transition reason of the package is covered.
	for _, reason := range []error{
		ErrNotSwitching, ErrSealCommitted, ErrSealNotCommitted, ErrInvalidSeal, ErrSealIncrease,
		ErrSealMismatch, ErrInPhaseTwo, ErrPhaseBackwards, ErrInvalidRecordedEpoch,
		ErrRecordedEpochNotWithFlag, ErrInvalidEpoch, ErrDisklessEpochDecrease, ErrConflictingTags,
		ErrLeaderEpochAhead, ErrFencedEpoch, ErrNotLeader, ErrInvalidArgument,
	} {
		require.True(t, seen[reason], "no case for %v", reason)
	}
}

func elect(seal int64) func(State) (State, error) {
	return func(s State) (State, error) { return s, s.ValidateElectReplica(seal) }
}

func apply(t Tags) func(State) (State, error) {
	return func(s State) (State, error) { return s.ApplyChange(t) }
}

// TestPartitionRecordRefusals covers each reason a full record is refused
// for, as a *TagError naming the tag.
func TestPartitionRecordRefusals(t *testing.T) {
	cases := []struct {
		tags   Tags
		tag    uint32
		reason error
	}{
		{Tags{ClassicToDisklessStartOffset: Some[int64](-3)}, TagClassicToDisklessStartOffset, ErrInvalidSeal},
		{Tags{ProducerStates: Some(testProducers(1))}, TagProducerStates, ErrSealNotCommitted},
		{Tags{DisklessLeaderEpoch: Some[int32](-2)}, TagDisklessLeaderEpoch, ErrInvalidEpoch},
		{Tags{DisklessLeaderEpoch: Some[int32](1)}, TagDisklessLeaderEpoch, ErrSealNotCommitted},
		{Tags{ClassicPrefixInRemoteStorage: Some(true)}, TagClassicPrefixInRemoteStorage, ErrSealNotCommitted},
		{Tags{ClassicToDisklessStartOffset: Some[int64](1), LastClassicLeaderEpoch: Some[int32](-2)}, TagLastClassicLeaderEpoch, ErrInvalidEpoch},
		{Tags{ClassicToDisklessStartOffset: Some[int64](1), LastClassicLeaderEpoch: Some[int32](0)}, TagLastClassicLeaderEpoch, ErrRecordedEpochNotWithFlag},
		{Tags{ClassicToDisklessStartOffset: Some[int64](1), ClassicPrefixInRemoteStorage: Some(true), LastClassicLeaderEpoch: Some[int32](0)}, TagLastClassicLeaderEpoch, ErrInvalidRecordedEpoch},
	}
	for _, c := range cases {
		_, err := FromPartitionRecord(c.tags)
		require.ErrorIs(t, err, ErrInvalidTags, "%s", c.tags)
		require.ErrorIs(t, err, c.reason, "%s", c.tags)
		var te *TagError
		require.ErrorAs(t, err, &te)
		require.Equal(t, c.tag, te.Tag, "%s", c.tags)
	}
}

// TestDecodeTagsCorruption covers each malformed payload.
func TestDecodeTagsCorruption(t *testing.T) {
	cases := []struct {
		name   string
		fields []RawTaggedField
	}{
		{"short seal", []RawTaggedField{{100, make([]byte, 7)}}},
		{"long seal", []RawTaggedField{{100, make([]byte, 9)}}},
		{"no producer count", []RawTaggedField{{101, []byte{0, 0}}}},
		{"producer count too high", []RawTaggedField{{101, []byte{0, 0, 0, 1}}}},
		{"producer count too low", []RawTaggedField{{101, append([]byte{0, 0, 0, 0}, make([]byte, producerStateBytes)...)}}},
		{"producer entry cut", []RawTaggedField{{101, append([]byte{0, 0, 0, 1}, make([]byte, producerStateBytes-1)...)}}},
		{"huge producer count", []RawTaggedField{{101, []byte{0xff, 0xff, 0xff, 0xff}}}},
		{"short epoch", []RawTaggedField{{102, make([]byte, 3)}}},
		{"flag two bytes", []RawTaggedField{{103, []byte{1, 0}}}},
		{"flag value 2", []RawTaggedField{{103, []byte{2}}}},
		{"long recorded epoch", []RawTaggedField{{104, make([]byte, 5)}}},
		{"tags out of order", []RawTaggedField{{103, []byte{1}}, {102, make([]byte, 4)}}},
		{"tag repeated", []RawTaggedField{{100, make([]byte, 8)}, {100, make([]byte, 8)}}},
	}
	for _, c := range cases {
		_, err := DecodeTags(c.fields)
		require.ErrorIs(t, err, ErrCorruption, c.name)
		require.ErrorIs(t, err, ErrInvalidTags, c.name)
	}
	// Other tags are skipped, in order.
	tags, err := DecodeTags([]RawTaggedField{{7, []byte("x")}, {100, make([]byte, 8)}, {200, nil}})
	require.NoError(t, err)
	require.Equal(t, Tags{ClassicToDisklessStartOffset: Some[int64](0)}, tags)
}

// TestTagsEncodingIsBigEndianInTagOrder pins the byte layout of the
// Inkless tagged fields.
func TestTagsEncodingIsBigEndianInTagOrder(t *testing.T) {
	tags := Tags{
		ClassicToDisklessStartOffset: Some[int64](100),
		ProducerStates: Some([]ProducerStateEntry{{
			ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3, LastSequence: 4, AssignedOffset: 5, BatchMaxTimestamp: 6,
		}}),
		DisklessLeaderEpoch:          Some[int32](6),
		ClassicPrefixInRemoteStorage: Some(true),
		LastClassicLeaderEpoch:       Some(base.UndefinedEpoch),
	}
	got := tags.Encode()
	require.Equal(t, []RawTaggedField{
		{100, []byte{0, 0, 0, 0, 0, 0, 0, 100}},
		{101, []byte{0, 0, 0, 1,
			0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4,
			0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6}},
		{102, []byte{0, 0, 0, 6}},
		{103, []byte{1}},
		{104, []byte{0xff, 0xff, 0xff, 0xff}},
	}, got)
	back, err := DecodeTags(got)
	require.NoError(t, err)
	require.Equal(t, tags, back)
}

// TestZeroStateIsClassic: the zero State is a valid classic partition.
func TestZeroStateIsClassic(t *testing.T) {
	var s State
	require.NoError(t, s.validate())
	require.Equal(t, PhaseClassic, s.Phase())
	require.Equal(t, NoSeal, s.Seal())
	require.Equal(t, base.UndefinedEpoch, s.DisklessLeaderEpoch())
	require.Equal(t, base.UndefinedEpoch, s.LastClassicLeaderEpoch())
	require.Nil(t, s.ProducerStates())
	require.True(t, s.Tags().Empty())
	require.Equal(t, "classic", s.String())
}

// TestProducerStatesAreCopied: a State does not alias the caller's slice.
func TestProducerStatesAreCopied(t *testing.T) {
	ps := testProducers(2)
	s, err := mustRecord(t, tagsPending).CommitSeal(100, ps)
	require.NoError(t, err)
	ps[0].ProducerID = 42
	got := s.ProducerStates()
	require.Equal(t, int64(1000), got[0].ProducerID)
	got[1].ProducerID = 43
	require.Equal(t, int64(1001), s.ProducerStates()[1].ProducerID)
}

func TestErrorMessages(t *testing.T) {
	_, err := State{}.AbortSwitch()
	require.EqualError(t, err, "tierstate: abort refused (classic -> classic): partition is not being switched")
	_, err = DecodeTags([]RawTaggedField{{103, []byte{2}}})
	require.EqualError(t, err, "tierstate: tag 103: tierlog: corruption: payload 02, want one byte 0 or 1")
	require.True(t, errors.Is(err, base.ErrCorruption))
}
