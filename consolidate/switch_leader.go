package consolidate

import (
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/tierstate"
)

// PrefixLog is what the leader reads of its log to ask for phase 2.
// *log.UnifiedLog satisfies it.
type PrefixLog interface {
	HighestOffsetInRemoteStorage() int64
	LogStartOffset() int64
	EpochForOffset(offset int64) (int32, bool)
}

var _ PrefixLog = (*log.UnifiedLog)(nil)

// ClassicPrefixPlan is PlanClassicPrefixRequest's answer.
type ClassicPrefixPlan struct {
	// Send: the leader sends SetClassicPrefixInRemoteStorage now.
	Send bool
	// LastClassicLeaderEpoch is R, the epoch of the leader's record at
	// S-1, or -1 when its log holds no record below the seal.
	LastClassicLeaderEpoch int32
}

// PlanClassicPrefixRequest decides, for a phase-1 consolidating partition
// this broker leads, whether to ask the controller for phase 2
// (SetClassicPrefixInRemoteStorage, github.com/aiven/inkless/pull/827)
// and with which recorded epoch (github.com/aiven/inkless/pull/857): only
// once the remote copy reaches S-1 (h >= S-1), with R = the epoch at S-1
// when the log (local or remote) starts below the seal, else -1.
func PlanClassicPrefixRequest(s tierstate.State, l PrefixLog) ClassicPrefixPlan {
	none := ClassicPrefixPlan{LastClassicLeaderEpoch: base.UndefinedEpoch}
	if !s.Consolidating() || s.Phase() != tierstate.PhaseOne {
		return none
	}
	seal := s.Seal()
	if l.HighestOffsetInRemoteStorage() < seal-1 {
		return none
	}
	r := base.UndefinedEpoch
	if seal > 0 && l.LogStartOffset() <= seal-1 {
		if e, ok := l.EpochForOffset(seal - 1); ok {
			r = e
		}
	}
	return ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: r}
}
