package replica_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// broker is what a broker author writes: its two fetcher managers and
// its remote log manager, here reduced to prints. Its logs live in a
// logmanager.Manager (openLogs), which replica.ManagedLogs adapts.
type broker struct{}

func (broker) StopPartitions(context.Context, []remote.StopPartition) error { return nil }
func (broker) OnLeadershipChange(_, _ []remote.Partition) error             { return nil }

// openLogs opens the broker's log manager: one log directory on fs, the
// background tasks off (an example's run is too short for them).
func openLogs(fs vfs.FS) (*logmanager.Manager, error) {
	return logmanager.Open(context.Background(), logmanager.Options{Dirs: []string{"/data"}, FS: fs,
		Log: log.Options{RemoteStorageEnabled: true}, NoBackgroundTasks: true})
}

type classic struct{}

func (classic) AddPartition(_ context.Context, _ remote.TopicIDPartition, leader int32, offset int64) error {
	fmt.Printf("  classic fetcher: fetch from broker %d at %d\n", leader, offset)
	return nil
}
func (classic) RemovePartition(context.Context, remote.TopicIDPartition) error { return nil }

type consolidation struct{}

func (consolidation) AddPartition(_ context.Context, s replica.ConsolidationStart) error {
	fmt.Printf("  consolidation fetcher: copy from %d\n", s.Offset)
	return nil
}
func (consolidation) RemovePartition(context.Context, remote.TopicIDPartition) error { return nil }

type isr struct{}

func (isr) ExpandIsr(_ context.Context, id int32) error {
	fmt.Printf("  AlterPartition: add broker %d to the ISR\n", id)
	return nil
}

// A follower of a consolidating topic through the switch: classic
// replication, the seal, the admission at the seal (it stays on the
// classic fetcher: consolidation waits for the phase-2 flag), and phase
// 2, where the replica check keeps its log and consolidation starts.
func Example() {
	ctx := context.Background()
	fs := vfs.NewMem()
	tp := remote.TopicIDPartition{TopicID: remote.UUID{7}, Topic: "orders", Partition: 0}
	logs, err := openLogs(fs)
	if err != nil {
		fmt.Println("open the log manager:", err)
		return
	}
	defer logs.Close()
	b := broker{}
	r, _ := replica.New(replica.Options{Partition: tp, Logs: replica.ManagedLogs(logs), Classic: classic{},
		Consolidation: consolidation{}, Remote: b,
		OnEvent: func(e replica.Event) { fmt.Println(" ", e.Action.Kind, e.Action.Reason) }})

	apply := func(title string, d replica.Delta) {
		fmt.Println(title)
		if _, err := r.Apply(ctx, d); err != nil {
			fmt.Println("  error:", err)
		}
	}
	apply("classic, follower of broker 1:", replica.Delta{LeaderID: 1, LeaderEpoch: 0, InIsr: true})

	// The classic fetcher appends 100 records (here appended directly in
	// epoch 0); the switch is armed, then the seal commits at 100.
	bb := record.NewBuilder(record.DefaultBuilderOptions())
	for range 100 {
		bb.Add(0, nil, []byte("v"))
	}
	batch, _ := bb.Build()
	if _, err := r.Log().(*log.UnifiedLog).AppendAsLeader(batch, 0, log.OriginClient); err != nil {
		fmt.Println("append:", err)
	}
	armed, _ := tierstate.State{}.ArmSwitch()
	apply("switch armed (seal pending):", replica.Delta{LeaderID: 1, LeaderEpoch: 0, PartitionEpoch: 1, InIsr: true,
		State: armed.WithConsolidating(true)})

	sealed, _ := tierstate.FromPartitionRecord(tierstate.Tags{
		ClassicToDisklessStartOffset: tierstate.Some[int64](100), DisklessLeaderEpoch: tierstate.Some[int32](1)})
	sealed = sealed.WithConsolidating(true)
	// A restart after the seal: the replica is outside the ISR.
	apply("seal 100 committed, out of the ISR:", replica.Delta{LeaderID: 1, LeaderEpoch: 1, State: sealed})
	h, _ := r.HandOff(ctx)
	fmt.Println("  after the append:", h.Action)

	apply("admitted to the ISR:", replica.Delta{LeaderID: 1, LeaderEpoch: 1, PartitionEpoch: 2, InIsr: true, State: sealed})

	phase2, _ := sealed.ApplyChange(tierstate.Tags{ClassicPrefixInRemoteStorage: tierstate.Some(true),
		LastClassicLeaderEpoch: tierstate.Some[int32](0), DisklessLeaderEpoch: tierstate.Some[int32](2)})
	apply("phase 2, this broker leads:", replica.Delta{Leader: true, LeaderEpoch: 2, InIsr: true, State: phase2})
	admitted, _, _ := r.AdmitAtSeal(ctx, 3, tierstate.SealAdmission{RecordedEndOffset: 100,
		RecordedBrokerEpoch: tierstate.NoBrokerEpoch,
		Replica:             tierstate.SealReplica{Assigned: true, RegisteredBrokerEpoch: 9}}, isr{})
	fmt.Println("  broker 3 admitted:", admitted)
	// Output:
	// classic, follower of broker 1:
	//   classic fetcher: fetch from broker 1 at 0
	//   create-log no log
	//   become-follower follower of 1 in leader epoch 0
	//   start-classic not consolidating
	// switch armed (seal pending):
	//   classic fetcher: fetch from broker 1 at 100
	//   become-follower follower of 1 in leader epoch 0
	//   start-classic seal pending: replicate the frozen classic prefix
	// seal 100 committed, out of the ISR:
	//   classic fetcher: fetch from broker 1 at 100
	//   become-follower follower of 1 in leader epoch 1
	//   start-classic log end 100 at or past seal 100, not in the ISR: wait for admission
	//   after the append: wait-for-isr
	// admitted to the ISR:
	//   classic fetcher: fetch from broker 1 at 100
	//   become-follower follower of 1 in leader epoch 1
	//   start-classic log end 100 at or past seal 100 in phase-1: consolidation waits for the phase-2 flag
	// phase 2, this broker leads:
	//   consolidation fetcher: copy from 100
	//   check-replica leader epoch 1 -> 2, seal 100, recorded epoch 0: keep
	//   raise-high-watermark leader at log end 100, high watermark 0 below seal 100
	//   become-leader leader epoch 2
	//   start-consolidation leader with log end 100 at or past seal 100
	//   AlterPartition: add broker 3 to the ISR
	//   admit follower 3: recorded end 100 at or past seal 100
	//   broker 3 admitted: true
}
