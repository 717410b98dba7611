package tierstate_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// appendInEpochs appends one single-record batch per offset of each
// [epoch, count) run, as a leader in that epoch would.
func appendInEpochs(l *log.UnifiedLog, runs ...[2]int32) {
	for _, r := range runs {
		for range r[1] {
			b := record.NewBuilder(record.DefaultBuilderOptions())
			b.Add(1_700_000_000_000, nil, []byte("v"))
			batch, _ := b.Build()
			_, _ = l.AppendAsLeader(batch, r[0], log.OriginClient)
		}
	}
}

// exampleFetchers and exampleTasks stand in for the broker's fetcher manager and the
// remote log manager: there is nothing to stop in this example.
type exampleFetchers struct{}

func (exampleFetchers) StopFetchers(context.Context, remote.TopicIDPartition) error { return nil }

type exampleTasks struct{}

func (exampleTasks) StopPartitions(context.Context, []remote.StopPartition) error { return nil }

// The phase-2 replica check (https://github.com/aiven/inkless/pull/857) on
// three replicas of a partition sealed at 10, whose record at 9 is in the
// recorded epoch 2. The first holds the committed prefix and is kept. The
// second led epoch 3 and wrote 8 and 9 there, records the partition never
// committed: its epoch at 9 is 3, so it is recreated. The third has a
// classic tail past the seal in epoch 3 (not the diskless epoch 5):
// recreated too. CheckAndRecreate stops the fetchers, checks, and deletes
// the failing log.
func ExampleCheckReplica() {
	fs := vfs.NewMem()
	open := func(dir string, runs ...[2]int32) *log.UnifiedLog {
		_ = fs.MkdirAll(dir, 0o755)
		l, _ := log.Open(dir, log.Options{FS: fs, RemoteStorageEnabled: true})
		appendInEpochs(l, runs...)
		return l
	}

	// Phase 2: seal 10, recorded epoch R = 2, flag committed in epoch 4.
	s, _ := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	s, _ = s.CommitSeal(10, nil)
	s, _ = s.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: 10, LastClassicLeaderEpoch: 2},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
	fmt.Println(s)

	committed := open("a/orders-0", [2]int32{1, 6}, [2]int32{2, 4})                // [0, 6) in 1, [6, 10) in 2
	diverged := open("b/orders-0", [2]int32{1, 6}, [2]int32{2, 2}, [2]int32{3, 2}) // [8, 10) in 3
	tail := open("c/orders-0", [2]int32{1, 6}, [2]int32{2, 4}, [2]int32{3, 2})     // [10, 12) in 3
	for _, l := range []*log.UnifiedLog{committed, diverged, tail} {
		defer l.Close()
	}

	// A nil *log.UnifiedLog is no future log.
	var noFuture *log.UnifiedLog
	fmt.Println("committed:", tierstate.CheckReplica(s, committed, noFuture))
	fmt.Println("diverged:", tierstate.CheckReplica(s, diverged, nil))
	fmt.Println("tail:", tierstate.CheckReplica(s, tail, nil))

	tp := remote.TopicIDPartition{Topic: "orders", Partition: 0}
	d, res := tierstate.CheckAndRecreate(context.Background(), s, diverged, nil, tierstate.RecreateDeps{
		Partition: tp, Fetchers: exampleFetchers{}, RemoteTasks: exampleTasks{}, DeleteCurrentLog: diverged.Delete})
	fmt.Println("check and recreate:", d.Recreate, res)
	// Output:
	// phase-2 seal=10 recorded-epoch=2 diskless-epoch=5 consolidating
	// committed: keep
	// diverged: recreate: epoch-at-seal (epoch at 9 is 3, recorded epoch 2)
	// tail: recreate: suffix-past-seal (log end 12 past the seal 10: record at 10 in epoch 3, not the diskless epoch 5)
	// check and recreate: true recreated: fetchers-stopped=true tasks-cancelled=true current-deleted=true future-deleted=true
}
