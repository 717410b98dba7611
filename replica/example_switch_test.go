package replica_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// controller is the broker's side of the controller round trip: it
// commits the leader's requests with the tierstate rules. The committed
// state comes back to the driver as the next delta, never from inside
// the call (the driver holds its lock across it).
type controller struct {
	state  tierstate.State
	leader tierstate.Leadership
}

func (c *controller) ProposeSeal(_ context.Context, _ remote.TopicIDPartition, epoch int32, p consolidate.SealProposal) error {
	s, err := c.state.CommitSeal(p.Seal, p.Producers)
	c.state = s
	fmt.Printf("  controller: seal %d committed (proposed in leader epoch %d)\n", p.Seal, epoch)
	return err
}

func (c *controller) SetClassicPrefixInRemoteStorage(_ context.Context, _ remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	s, err := c.state.SetClassicPrefixInRemoteStorage(req, c.leader)
	if err == nil {
		c.state, c.leader.LeaderEpoch = s, s.DisklessLeaderEpoch()
	}
	fmt.Printf("  controller: phase 2 with recorded epoch %d, diskless epoch %d\n", req.LastClassicLeaderEpoch, s.DisklessLeaderEpoch())
	return err
}

// Example_leaderSwitch drives the leader of a partition through the whole
// switch with the driver and the interfaces a broker implements: classic
// produce, the arming (seal pending: produce refused), the seal and its
// proposal, the WAL's row, consolidation and the pruner armed at S-1, the
// remote copy of the prefix, the phase-2 request, and the first prune,
// which moves the WAL's start to the seal. The fetchers are prints; the
// remote log manager, the control plane and the pruner are tierlog's.
func Example_leaderSwitch() {
	ctx := context.Background()
	fs := vfs.NewMem()
	tp := remote.TopicIDPartition{TopicID: remote.UUID{7}, Topic: "orders", Partition: 0}
	meta, _ := remote.Open(fs, "remote-metadata", remote.MetadataOptions{})
	defer meta.Close()
	storage, _ := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	rlm, _ := remote.NewManager(meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1})
	defer rlm.Close()
	cp, _ := pebblecp.Open(fs, "control-plane", pebblecp.Options{})
	defer cp.Close()
	pruner, _ := consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: cp})
	ctrl := &controller{leader: tierstate.Leadership{Leader: 1}}

	logs, err := openLogs(fs)
	if err != nil {
		fmt.Println("open the log manager:", err)
		return
	}
	defer logs.Close()
	r, _ := replica.New(replica.Options{Partition: tp, Logs: replica.ManagedLogs(logs), Classic: classic{}, Consolidation: consolidation{},
		Remote: rlm, BrokerID: 1, Controller: ctrl, ControlPlane: cp, Pruner: pruner, NowMs: func() int64 { return 0 },
		OnEvent: func(e replica.Event) { fmt.Println(" ", e.Action.Kind, e.Action.Reason) }})
	apply := func(title string, d replica.Delta) {
		fmt.Println(title)
		if _, err := r.Apply(ctx, d); err != nil {
			fmt.Println("  error:", err)
		}
	}

	apply("classic leader:", replica.Delta{Leader: true, LeaderEpoch: 0, InIsr: true, State: ctrl.state})
	bb := record.NewBuilder(record.DefaultBuilderOptions())
	for range 100 {
		bb.Add(0, nil, []byte("v"))
	}
	batch, _ := bb.Build()
	if _, err := r.AppendAsLeader(batch, 0, log.OriginClient); err != nil {
		fmt.Println("produce:", err)
	}
	if l, ok := r.Log().(*log.UnifiedLog); ok {
		l.UpdateHighWatermark(100) // the followers replicated [0, 100)
	}

	// The operator enables diskless: the arming bumps the leader epoch.
	ctrl.state, _ = tierstate.State{}.WithConsolidating(true).ArmSwitch()
	ctrl.leader.LeaderEpoch = 1
	apply("switch armed:", replica.Delta{Leader: true, LeaderEpoch: 1, InIsr: true, State: ctrl.state})
	_, err = r.AppendAsLeader(batch, 1, log.OriginClient)
	fmt.Println("  produce:", err)

	apply("seal committed:", replica.Delta{Leader: true, LeaderEpoch: 1, PartitionEpoch: 1, InIsr: true, State: ctrl.state})

	// The remote log manager copies the sealed prefix; the step after it
	// asks for phase 2.
	copied, _ := rlm.RunCopy(ctx, tp)
	fmt.Printf("remote copy of %d segment(s): highest offset in remote storage %d\n", len(copied.Copied),
		r.Log().HighestOffsetInRemoteStorage())
	if _, err := r.StepSwitch(ctx); err != nil {
		fmt.Println("  error:", err)
	}
	apply("phase 2:", replica.Delta{Leader: true, LeaderEpoch: ctrl.leader.LeaderEpoch, InIsr: true, State: ctrl.state})

	p, _ := r.PrunePartition()
	out, _ := pruner.Run(ctx, []consolidate.PrunePartition{p})
	fmt.Printf("pruner: %s at %d, WAL start %d\n", out[0].Decision.Reason, out[0].Decision.HighestTieredOffset,
		out[0].LogStartOffset)
	// Output:
	// classic leader:
	//   create-log no log
	//   become-leader leader epoch 0
	//   stop-fetching leader, not consolidating
	// switch armed:
	//   controller: seal 100 committed (proposed in leader epoch 1)
	//   become-leader leader epoch 1
	//   stop-fetching leader, seal pending: consolidation waits for the seal
	//   seal seal pending, leader epoch 1, log end 100, high watermark 100: abort, roll, flush; propose once HW = LEO; aborted 0 transaction(s), rolled true, flushed
	//   propose-seal S = log end 100 with 0 producer state(s), leader epoch 1
	//   produce: consolidate: classic append refused: seal pending
	// seal committed:
	//   become-leader leader epoch 1
	//   stop-fetching leader in phase-1 at seal 100: consolidation waits for the phase-2 flag and its diskless epoch
	//   init-diskless-log seal 100 committed, log end 100 at the seal: W = log start 0, HW = S; row created: W = 0, S = 100, 0 producer state(s)
	//   arm-pruner consolidating leader with log end 100 at or past seal 100: the first prune waits for S-1 in remote storage
	// remote copy of 1 segment(s): highest offset in remote storage 99
	//   controller: phase 2 with recorded epoch 0, diskless epoch 2
	//   request-phase-two phase 1, remote storage holds up to 99 >= S-1 = 99: recorded epoch 0
	// phase 2:
	//   consolidation fetcher: copy from 100
	//   check-replica leader epoch 1 -> 2, seal 100, recorded epoch 0: keep
	//   become-leader leader epoch 2
	//   start-consolidation leader with log end 100 at or past seal 100
	// pruner: prune at 99, WAL start 100
}
