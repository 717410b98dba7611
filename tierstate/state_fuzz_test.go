package tierstate

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/epochcache"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// program reads a sequence of switch operations and records from bytes,
// so that the fuzzer and the seeded property test drive the same steps.
type program struct {
	b []byte
}

func (p *program) byte() byte {
	if len(p.b) == 0 {
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

// seal picks a seal near the interesting values: negative ones, 0, and
// around 100 (the seal most steps commit).
func (p *program) seal() int64 {
	switch c := p.byte(); c % 4 {
	case 0:
		return int64(c%8) - 3 // -3 .. 4
	default:
		return 96 + int64(c%10) // 96 .. 105
	}
}

func (p *program) epoch() int32 { return int32(p.byte()%12) - 2 } // -2 .. 9

func (p *program) tags() Tags {
	var t Tags
	mask := p.byte()
	if mask&1 != 0 {
		t.ClassicToDisklessStartOffset = Some(p.seal())
	}
	if mask&2 != 0 {
		ps := testProducers(int(p.byte() % 3))
		if ps == nil {
			ps = []ProducerStateEntry{}
		}
		t.ProducerStates = Some(ps)
	}
	if mask&4 != 0 {
		t.DisklessLeaderEpoch = Some(p.epoch())
	}
	if mask&8 != 0 {
		t.ClassicPrefixInRemoteStorage = Some(p.byte()%2 == 0)
	}
	if mask&16 != 0 {
		t.LastClassicLeaderEpoch = Some(p.epoch())
	}
	if mask&32 != 0 {
		t.SealLineage = Some(p.lineage(p.seal()))
	}
	return t
}

// lineage draws up to three entries near seal, mostly valid ones
// (increasing, below the seal), sometimes not.
func (p *program) lineage(seal int64) []epochcache.Entry {
	es := []epochcache.Entry{}
	e, start := p.epoch(), seal-int64(p.byte()%8)
	for range p.byte() % 4 {
		es = append(es, epochcache.Entry{Epoch: e, StartOffset: start})
		e += int32(p.byte() % 3)
		start += int64(p.byte() % 4)
	}
	return es
}

// step runs one operation. transition is false for steps that are not
// switch transitions (a fresh full record, the consolidating setting).
func (p *program) step(s State) (next State, err error, transition bool, name string) {
	switch op := p.byte() % 11; op {
	case 0:
		next, err = s.ArmSwitch()
		return next, err, true, "arm"
	case 1:
		next, err = s.AbortSwitch()
		return next, err, true, "abort"
	case 2:
		seal := p.seal()
		lineage := p.lineage(seal)
		next, err = s.CommitSealProposal(SealProposal{Seal: seal, Lineage: lineage, Producers: testProducers(int(p.byte() % 3))})
		return next, err, true, fmt.Sprintf("commit-seal %d seal-lineage=%s", seal, formatSealLineage(lineage))
	case 3:
		seal, clear := p.seal(), p.byte()%2 == 0
		leader := p.lineage(seal)
		next, err = s.Reseal(seal, leader, clear)
		return next, err, true, fmt.Sprintf("reseal %d leader-lineage=%s clear=%t", seal, formatSealLineage(leader), clear)
	case 4:
		l := Leadership{Leader: int32(p.byte() % 2), LeaderEpoch: p.epoch()}
		req := ClassicPrefixRequest{BrokerID: int32(p.byte() % 2), LeaderEpoch: l.LeaderEpoch, Seal: s.Seal(),
			LastClassicLeaderEpoch: p.epoch()}
		if c := p.byte(); c%3 == 0 {
			req.LeaderEpoch = p.epoch()
		} else if c%3 == 1 {
			req.Seal = p.seal()
		}
		next, err = s.SetClassicPrefixInRemoteStorage(req, l)
		return next, err, true, fmt.Sprintf("set-flag %+v %+v", req, l)
	case 5:
		seal, recorded, epoch := p.seal(), p.epoch(), p.epoch()
		next, err = s.StartPhaseTwo(seal, recorded, epoch)
		return next, err, true, fmt.Sprintf("start-phase-2 %d %d %d", seal, recorded, epoch)
	case 6:
		seal := p.seal()
		return s, s.ValidateElectReplica(seal), true, fmt.Sprintf("elect %d", seal)
	case 7, 8:
		t := p.tags()
		next, err = s.ApplyChange(t)
		return next, err, true, "apply " + t.String()
	case 9:
		t := p.tags()
		next, err = FromPartitionRecord(t)
		if err != nil {
			return s, nil, false, "from-record (refused) " + t.String()
		}
		return next.WithConsolidating(s.consolidating), nil, false, "from-record " + t.String()
	default:
		return s.WithConsolidating(!s.consolidating), nil, false, "toggle consolidating"
	}
}

// runProgram runs a program from the classic State and checks every step:
// a refusal is a typed error with the State unchanged; an accepted
// transition keeps the invariants and the monotonicity rules, and its
// change record replays it; every State survives its full record.
func runProgram(t *testing.T, data []byte) map[Phase]bool {
	p := &program{b: data}
	var s State
	seen := map[Phase]bool{PhaseClassic: true}
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %q: %s", trace, fmt.Sprintf(format, args...))
	}
	for steps := 0; len(p.b) > 0 && steps < 200; steps++ {
		next, err, transition, name := p.step(s)
		trace = append(trace, name)
		if err != nil {
			if !errors.Is(err, ErrInvalidTransition) {
				fail("error %v is not an ErrInvalidTransition", err)
			}
			var te *TransitionError
			if !errors.As(err, &te) || te.Reason == nil || te.From != s.phase {
				fail("malformed refusal %#v", err)
			}
			if next != s {
				fail("refusal changed the state: %s -> %s", s, next)
			}
			continue
		}
		if verr := next.validate(); verr != nil {
			fail("invalid state %s: %v", next, verr)
		}
		if transition {
			if merr := monotonic(s, next); merr != nil {
				fail("%v", merr)
			}
			replayed, rerr := s.ApplyChange(ChangeTags(s, next))
			if rerr != nil || replayed != next {
				fail("change record %s from %s gives %s, %v; want %s", ChangeTags(s, next), s, replayed, rerr, next)
			}
		}
		tags, derr := DecodeTags(next.Tags().Encode())
		back, ferr := FromPartitionRecord(tags)
		if derr != nil || ferr != nil || back != next.WithConsolidating(false) {
			fail("full record of %s gives %s, %v, %v", next, back, derr, ferr)
		}
		s = next
		seen[s.phase] = true
		if uerr := undoRule(s); uerr != nil {
			fail("%v", uerr)
		}
	}
	return seen
}

// undoRule checks the switch document's undo rule on s: the abort and the
// re-arm are accepted only while the seal is pending (the abort gives the
// classic, non-consolidating State; the re-arm changes nothing) and
// refused otherwise, ErrNotSwitching on classic, ErrSealCommitted once a
// seal is committed, naming s's phase.
func undoRule(s State) error {
	for _, op := range []struct {
		name string
		f    func(State) (State, error)
		want State
	}{{OpAbort, State.AbortSwitch, State{}}, {OpRearm, State.RearmSwitch, s}} {
		next, err := op.f(s)
		var te *TransitionError
		switch {
		case s.phase == PhaseSealPending && (err != nil || next != op.want):
			return fmt.Errorf("%s from %s: %s, %v; want %s", op.name, s, next, err, op.want)
		case s.phase == PhaseSealPending:
		case !errors.As(err, &te) || te.From != s.phase || te.Op != op.name || next != s:
			return fmt.Errorf("%s from %s: %s, %v; want a refusal naming the phase", op.name, s, next, err)
		case s.phase == PhaseClassic && !errors.Is(err, ErrNotSwitching),
			s.SealCommitted() && !errors.Is(err, ErrSealCommitted):
			return fmt.Errorf("%s from %s: %v", op.name, s, err)
		}
	}
	return nil
}

// FuzzStateTransitions: no sequence of operations and records, accepted
// or refused, produces a State that breaks an invariant, moves a phase
// backwards (other than an abort of a pending seal), raises a committed
// seal, lowers the diskless epoch or changes a recorded epoch.
func FuzzStateTransitions(f *testing.F) {
	f.Add([]byte{0, 2, 1, 0, 4, 1, 1, 5, 1, 5})                    // arm, commit, flag
	f.Add([]byte{0, 1, 0, 3, 9, 0, 5, 101, 3, 10})                 // arm, abort, arm, reseal, start-phase-2
	f.Add([]byte{7, 1, 2, 7, 3, 1, 10, 8, 0x1f, 1, 1, 4, 0, 7, 0}) // records
	f.Fuzz(func(t *testing.T, data []byte) {
		runProgram(t, data)
	})
}

// TestRandomTransitions runs many seeded random programs (the property
// test behind FuzzStateTransitions) and checks they reach every phase.
func TestRandomTransitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(857, 1))
	seen := map[Phase]bool{}
	for range 3000 {
		data := make([]byte, 1+rng.IntN(120))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for ph := range runProgram(t, data) {
			seen[ph] = true
		}
	}
	for _, ph := range []Phase{PhaseClassic, PhaseSealPending, PhaseOne, PhaseTwo} {
		require.True(t, seen[ph], "no program reached %s", ph)
	}
}

// FuzzDecodeTags: decoding never panics; what decodes re-encodes to the
// same bytes for the switch tags, Inkless's 100..104 and tierlog's 105
// (other tags are dropped).
func FuzzDecodeTags(f *testing.F) {
	f.Add(uint8(100), []byte{0, 0, 0, 0, 0, 0, 0, 100}, uint8(103), []byte{1})
	f.Add(uint8(101), []byte{0, 0, 0, 0}, uint8(104), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(102), []byte{0, 0, 0, 6}, uint8(50), []byte("x"))
	f.Add(uint8(100), []byte{0, 0, 0, 0, 0, 0, 0, 100}, uint8(105), []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 99})
	f.Fuzz(func(t *testing.T, tag1 uint8, data1 []byte, tag2 uint8, data2 []byte) {
		fields := []RawTaggedField{{uint32(tag1), data1}, {uint32(tag2), data2}}
		tags, err := DecodeTags(fields)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidTags)
			return
		}
		var inkless []RawTaggedField
		for _, f := range fields {
			if f.Tag >= TagClassicToDisklessStartOffset && f.Tag <= TagSealLineage {
				inkless = append(inkless, f)
			}
		}
		got := tags.Encode()
		require.Len(t, got, len(inkless))
		for i := range got {
			require.Equal(t, inkless[i].Tag, got[i].Tag)
			require.True(t, bytes.Equal(inkless[i].Data, got[i].Data), "tag %d", got[i].Tag)
		}
		// Whatever decodes is either a valid full record or refused with
		// a reason; never a panic.
		if s, err := FromPartitionRecord(tags); err == nil {
			require.NoError(t, s.validate())
		} else {
			require.ErrorIs(t, err, ErrInvalidTags)
		}
	})
}
