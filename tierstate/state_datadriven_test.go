package tierstate

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
)

// TestStateDataDriven runs testdata/state_*: one partition's switch State
// through the operations and records of the switch. Every command that
// changes the State prints the new State and the change record that
// carries it (ChangeTags); a refused one prints the error and leaves the
// State as it was. After every command the harness checks the State's
// invariants, that the change record replays to the same State
// (ApplyChange), that the full record rebuilds it (FromPartitionRecord)
// and that both records survive encoding.
//
// Commands:
//
//	reset [consolidating]                 classic partition
//	from-record [seal=] [producers=N] [diskless-epoch=] [flag=] [recorded-epoch=] [seal-lineage=(E@S,...)]
//	apply       [seal=] [producers=N] [diskless-epoch=] [flag=] [recorded-epoch=] [seal-lineage=(E@S,...)]
//	arm | abort | rearm
//	commit-seal seal= [producers=N] [seal-lineage=(E@S,...)]
//	reseal seal= [seal-epoch=E | leader-lineage=(E@S,...)] [clear-producer-states]
//	start-phase-2 seal= partition-epoch= [recorded-epoch=]
//	set-flag seal= recorded-epoch= partition-epoch= [epoch=] [broker=] [leader=]
//	elect seal=
//	consolidating on|off
//	show                                   State, full record, predicates
func TestStateDataDriven(t *testing.T) {
	forEachFile(t, "testdata/state_*", func(t *testing.T, path string) {
		var s State
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return runStateCommand(t, d, &s)
		})
	})
}

// forEachFile runs f as a subtest for each file matching pattern.
func forEachFile(t *testing.T, pattern string, f func(t *testing.T, path string)) {
	paths, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no files match %s", pattern)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { f(t, path) })
	}
}

func runStateCommand(t *testing.T, d *datadriven.TestData, s *State) string {
	prev := *s
	var next State
	var err error
	switch d.Cmd {
	case "reset":
		*s = State{consolidating: d.HasArg("consolidating")}
		return s.String()
	case "from-record":
		next, err = FromPartitionRecord(scanTags(t, d))
		if err == nil {
			next = next.WithConsolidating(prev.consolidating)
			*s = next
			checkState(t, next)
			return next.String()
		}
		return "error: " + err.Error()
	case "apply":
		next, err = prev.ApplyChange(scanTags(t, d))
	case "arm":
		next, err = prev.ArmSwitch()
	case "abort":
		next, err = prev.AbortSwitch()
	case "rearm":
		next, err = prev.RearmSwitch()
	case "commit-seal":
		var seal int64
		n := 0
		d.ScanArgs(t, "seal", &seal)
		d.MaybeScanArgs(t, "producers", &n)
		prop := SealProposal{Seal: seal, Producers: testProducers(n)}
		if arg, ok := d.Arg("seal-lineage"); ok {
			prop.Lineage = parseLineage(t, arg.Vals)
		}
		next, err = prev.CommitSealProposal(prop)
	case "reseal":
		var seal int64
		d.ScanArgs(t, "seal", &seal)
		// seal-epoch=E is the leader's lineage known at seal-1 only.
		var leader []epochcache.Entry
		if d.HasArg("seal-epoch") {
			var e int32
			d.ScanArgs(t, "seal-epoch", &e)
			leader = []epochcache.Entry{{Epoch: e, StartOffset: seal - 1}}
		}
		if arg, ok := d.Arg("leader-lineage"); ok {
			leader = parseLineage(t, arg.Vals)
		}
		next, err = prev.Reseal(seal, leader, d.HasArg("clear-producer-states"))
	case "set-flag":
		var req ClassicPrefixRequest
		var p Leadership
		p.Leader = 1
		d.ScanArgs(t, "seal", &req.Seal)
		d.ScanArgs(t, "recorded-epoch", &req.LastClassicLeaderEpoch)
		d.ScanArgs(t, "partition-epoch", &p.LeaderEpoch)
		d.MaybeScanArgs(t, "leader", &p.Leader)
		req.BrokerID, req.LeaderEpoch = p.Leader, p.LeaderEpoch
		d.MaybeScanArgs(t, "broker", &req.BrokerID)
		d.MaybeScanArgs(t, "epoch", &req.LeaderEpoch)
		next, err = prev.SetClassicPrefixInRemoteStorage(req, p)
	case "start-phase-2":
		var seal int64
		var epoch int32
		d.ScanArgs(t, "seal", &seal)
		d.ScanArgs(t, "partition-epoch", &epoch)
		recorded := base.UndefinedEpoch
		d.MaybeScanArgs(t, "recorded-epoch", &recorded)
		next, err = prev.StartPhaseTwo(seal, recorded, epoch)
	case "elect":
		var seal int64
		d.ScanArgs(t, "seal", &seal)
		if err := prev.ValidateElectReplica(seal); err != nil {
			return "error: " + err.Error()
		}
		return "ok: " + prev.String()
	case "consolidating":
		on := d.HasArg("on")
		if !on && !d.HasArg("off") {
			d.Fatalf(t, "consolidating on|off")
		}
		*s = prev.WithConsolidating(on)
		return s.String()
	case "show":
		t := s.Tags()
		return fmt.Sprintf("%s\nrecord: %s\nuses-recorded-epoch=%t runs-replica-check=%t",
			s, t, s.UsesRecordedEpoch(), s.RunsReplicaCheck())
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	if err != nil {
		require.Equal(t, prev, next, "a refused transition must return the State unchanged")
		return "error: " + err.Error()
	}
	checkState(t, next)
	checkTransition(t, prev, next)
	*s = next
	if next == prev {
		return "unchanged: " + next.String()
	}
	return fmt.Sprintf("%s\nrecord: %s", next, ChangeTags(prev, next))
}

// checkState checks a State's invariants and that its full record, encoded
// and decoded, rebuilds it.
func checkState(t *testing.T, s State) {
	t.Helper()
	require.NoError(t, s.validate())
	tags, err := DecodeTags(s.Tags().Encode())
	require.NoError(t, err)
	back, err := FromPartitionRecord(tags)
	require.NoError(t, err, "full record of %s", s)
	require.Equal(t, s.WithConsolidating(false), back, "full record of %s", s)
}

// checkTransition checks the rules every accepted transition keeps and
// that its change record, encoded and decoded, replays it.
func checkTransition(t *testing.T, prev, next State) {
	t.Helper()
	require.NoError(t, monotonic(prev, next))
	rec, err := DecodeTags(ChangeTags(prev, next).Encode())
	require.NoError(t, err)
	replayed, err := prev.ApplyChange(rec)
	require.NoError(t, err, "change record %s from %s", rec, prev)
	require.Equal(t, next, replayed, "change record %s from %s", rec, prev)
}

// monotonic states what no accepted transition may do.
func monotonic(prev, next State) error {
	switch {
	case next.phase < prev.phase && !(prev.phase == PhaseSealPending && next.phase == PhaseClassic):
		return fmt.Errorf("phase went back: %s -> %s", prev, next)
	case prev.SealCommitted() && !next.SealCommitted():
		return fmt.Errorf("committed seal undone: %s -> %s", prev, next)
	case prev.SealCommitted() && next.seal > prev.seal:
		return fmt.Errorf("seal rose: %s -> %s", prev, next)
	case prev.phase == PhaseTwo && next.seal != prev.seal:
		return fmt.Errorf("phase-2 seal changed: %s -> %s", prev, next)
	case prev.SealCommitted() && next.DisklessLeaderEpoch() < prev.DisklessLeaderEpoch():
		return fmt.Errorf("diskless epoch fell: %s -> %s", prev, next)
	case prev.phase == PhaseTwo && next.lastClassicLeaderEpoch != prev.lastClassicLeaderEpoch:
		return fmt.Errorf("recorded epoch changed after the flag: %s -> %s", prev, next)
	case next.sealLineage != prev.sealLineage && next.seal == prev.seal && prev.SealCommitted() &&
		prev.sealLineage != "":
		return fmt.Errorf("a known seal lineage changed without the seal: %s -> %s", prev, next)
	case prev.phase == PhaseSealPending && next.phase == PhaseClassic && next.consolidating:
		return fmt.Errorf("an abort left the partition consolidating (born diskless): %s -> %s", prev, next)
	case next.consolidating != prev.consolidating && !(prev.phase == PhaseSealPending && next.phase == PhaseClassic):
		return fmt.Errorf("a transition changed consolidating: %s -> %s", prev, next)
	}
	return nil
}

// scanTags reads the fields a record command sets; absent arguments are
// absent fields.
func scanTags(t *testing.T, d *datadriven.TestData) Tags {
	var tags Tags
	for _, arg := range d.CmdArgs {
		var err error
		switch arg.Key {
		case "seal":
			var v int64
			_, err = fmt.Sscan(arg.Vals[0], &v)
			tags.ClassicToDisklessStartOffset = Some(v)
		case "producers":
			var n int
			_, err = fmt.Sscan(arg.Vals[0], &n)
			ps := testProducers(n)
			if ps == nil {
				ps = []ProducerStateEntry{}
			}
			tags.ProducerStates = Some(ps)
		case "diskless-epoch":
			var v int32
			_, err = fmt.Sscan(arg.Vals[0], &v)
			tags.DisklessLeaderEpoch = Some(v)
		case "flag":
			var v bool
			_, err = fmt.Sscan(arg.Vals[0], &v)
			tags.ClassicPrefixInRemoteStorage = Some(v)
		case "recorded-epoch":
			var v int32
			_, err = fmt.Sscan(arg.Vals[0], &v)
			tags.LastClassicLeaderEpoch = Some(v)
		case "seal-lineage":
			tags.SealLineage = Some(parseLineage(t, arg.Vals))
		default:
			d.Fatalf(t, "unknown field %s", arg.Key)
		}
		require.NoError(t, err, "argument %s", arg.Key)
	}
	return tags
}

// parseLineage reads "seal-lineage=(1@0,2@90)" (an empty value: the
// empty lineage).
func parseLineage(t *testing.T, vals []string) []epochcache.Entry {
	es, err := epochcache.ParseEntries(strings.Join(vals, ","))
	require.NoError(t, err, "seal-lineage %v", vals)
	if es == nil {
		es = []epochcache.Entry{}
	}
	return es
}

// testProducers returns n distinct producer states.
func testProducers(n int) []ProducerStateEntry {
	var ps []ProducerStateEntry
	for i := range n {
		ps = append(ps, ProducerStateEntry{
			ProducerID: 1000 + int64(i), ProducerEpoch: 0, BaseSequence: 0, LastSequence: 9,
			AssignedOffset: int64(10 * i), BatchMaxTimestamp: 1_700_000_000_000,
		})
	}
	return ps
}
