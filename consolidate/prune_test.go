package consolidate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// fakePruneLog is a leader log's remote progress and end; every offset
// is of epoch 0.
type fakePruneLog struct{ h, leo int64 }

func (f *fakePruneLog) HighestOffsetInRemoteStorageInLineage() int64 { return f.h }
func (f *fakePruneLog) LogEndOffset() int64                          { return f.leo }
func (f *fakePruneLog) EpochForOffset(int64) (int32, bool)           { return 0, true }

// fakeRemoteSegments answers SegmentFor: a finished segment holds every
// offset unless missing.
type fakeRemoteSegments struct{ missing bool }

func (f *fakeRemoteSegments) SegmentFor(_ remote.TopicIDPartition, epoch int32, offset int64) (remote.SegmentMetadata, bool, error) {
	if f.missing {
		return remote.SegmentMetadata{}, false, nil
	}
	return remote.SegmentMetadata{StartOffset: offset, EndOffset: offset, State: remote.CopySegmentFinished,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: epoch, StartOffset: offset}}}, true, nil
}

// TestPruneDataDriven runs testdata/prune_*: the pruner over a real
// control plane (Pebble on vfs.NewMem) and a WAL written through
// wal.Writer, for one partition whose leader log is a fake (h and LEO).
//
// Commands:
//
//	state born-diskless|seal-pending|phase-1|phase-2 [seal=S] [recorded-epoch=R]
//	      [start-phase-2=S'] [not-consolidating]
//	wal-init log-start=W seal=S      InitDisklessLog
//	wal-create                       CreatePartitions (a born-diskless row)
//	wal-repair seal=S                RepairDisklessLog
//	produce count=N                  one batch through the writer
//	log h=H leo=L [awaiting-rebuild]
//	remote held|missing              whether the remote log metadata holds h
//	arm                              Pruner.Arm at the state's seal
//	run                              Pruner.Run; prints decision, W, floor
//	wal                              the control plane's row
//	raise-floor floor=F w=W          RaiseFloor
func TestPruneDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasPrefix(pathBase(path), "prune_") {
			t.Skip()
		}
		e := newWALEnv(t)
		segs := &fakeRemoteSegments{}
		pr, err := NewPruner(PrunerOptions{ControlPlane: e.cp, RemoteSegments: segs})
		require.NoError(t, err)
		env := &pruneEnv{walEnv: e, pruner: pr, log: &fakePruneLog{h: -1}, remote: segs}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.handle(t, d)
		})
	})
}

type pruneEnv struct {
	*walEnv
	pruner   *Pruner
	state    tierstate.State
	log      *fakePruneLog
	remote   *fakeRemoteSegments
	awaiting bool
}

func (e *pruneEnv) handle(t *testing.T, d *datadriven.TestData) string {
	args := argMap(d)
	switch d.Cmd {
	case "state":
		s := tierstate.State{}.WithConsolidating(!d.HasArg("not-consolidating"))
		var err error
		phase := d.CmdArgs[0].Key
		if phase != "born-diskless" {
			s, err = s.ArmSwitch()
			require.NoError(t, err)
		}
		if phase == "phase-1" || phase == "phase-2" {
			s, err = s.CommitSeal(mustInt(t, d, args, "seal"), nil)
			require.NoError(t, err)
		}
		if phase == "phase-2" {
			if v, ok := args["start-phase-2"]; ok {
				args["s2"] = v
				s, err = s.StartPhaseTwo(mustInt(t, d, args, "s2"), -1, 4)
			} else {
				s, err = s.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4,
					Seal: s.Seal(), LastClassicLeaderEpoch: int32(mustInt(t, d, args, "recorded-epoch"))},
					tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
			}
			require.NoError(t, err)
		}
		e.state = s
		return s.String()
	case "wal-init":
		res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: walTP(e.tp), Topic: e.tp.Topic,
			LogStartOffset: mustInt(t, d, args, "log-start"), DisklessStartOffset: mustInt(t, d, args, "seal")}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return e.row(t)
	case "wal-create":
		require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
		return e.row(t)
	case "wal-repair":
		_, err := e.cp.RepairDisklessLog(e.ctx, []wal.RepairDisklessLogRequest{{Partition: walTP(e.tp), DisklessStartOffset: mustInt(t, d, args, "seal")}})
		require.NoError(t, err)
		return e.row(t)
	case "produce":
		n := int(mustInt(t, d, args, "count"))
		base := e.produce(n, "v")
		return fmt.Sprintf("[%d, %d]", base, base+int64(n)-1)
	case "log":
		e.log.h, e.log.leo = mustInt(t, d, args, "h"), mustInt(t, d, args, "leo")
		e.awaiting = d.HasArg("awaiting-rebuild")
		return fmt.Sprintf("h=%d leo=%d", e.log.h, e.log.leo)
	case "remote":
		e.remote.missing = d.CmdArgs[0].Key == "missing"
		return fmt.Sprintf("remote holds h: %t", !e.remote.missing)
	case "arm":
		e.pruner.Arm(e.tp, e.state.Seal())
		return fmt.Sprintf("floor=%s", floorString(e.pruner.Floor(e.tp)))
	case "run":
		out, err := e.pruner.Run(e.ctx, []PrunePartition{{Partition: e.tp, State: e.state, Log: e.log, AwaitingRebuild: e.awaiting}})
		if err != nil {
			return "error: " + err.Error()
		}
		o := out[0]
		var b strings.Builder
		b.WriteString(o.Decision.Reason.String())
		if o.Decision.Prune() {
			fmt.Fprintf(&b, " at %d", o.Decision.HighestTieredOffset)
			if o.Err != nil {
				fmt.Fprintf(&b, ": error %v", o.Err)
			} else {
				fmt.Fprintf(&b, ": W=%d", o.LogStartOffset)
			}
		}
		fmt.Fprintf(&b, " floor=%s", floorString(o.Floor))
		return b.String()
	case "wal":
		return e.row(t)
	case "raise-floor":
		f, lowered := RaiseFloor(mustInt(t, d, args, "floor"), mustInt(t, d, args, "w"))
		if lowered {
			return fmt.Sprintf("floor=%d (lower WAL start ignored)", f)
		}
		return fmt.Sprintf("floor=%d", f)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func floorString(f int64) string {
	if f == NoFloor {
		return "none"
	}
	return fmt.Sprint(f)
}

func (e *pruneEnv) row(t *testing.T) string {
	info, err := e.cp.LogInfo(e.ctx, walTP(e.tp))
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("W=%d HW=%d S=%d", info.LogStartOffset, info.HighWatermark, info.DisklessStartOffset)
}
