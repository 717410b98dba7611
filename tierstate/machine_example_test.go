package tierstate_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// exampleData serves one segment's epoch checkpoint; its producer
// snapshot is never asked for here (the segment crosses the seal).
type exampleData struct{ epochs []epochcache.Entry }

func (d exampleData) FetchLeaderEpochs(context.Context, *remote.SegmentMetadata) ([]epochcache.Entry, error) {
	return d.epochs, nil
}

func (d exampleData) FetchIndex(context.Context, *remote.SegmentMetadata, remote.IndexType) ([]byte, error) {
	return nil, remote.ErrIndexNotFound
}

// noSource is a source that is never asked: a phase-2 rebuild ignores it.
type noSource struct{}

func (noSource) FetchEarliestLocalOffset(context.Context, remote.TopicIDPartition, int32) (tierstate.OffsetAndEpoch, error) {
	panic("not asked in phase 2")
}

func (noSource) FetchEpochEndOffset(context.Context, remote.TopicIDPartition, int32, int32) (tierstate.EpochEndOffset, error) {
	panic("not asked in phase 2")
}

// The phase-2 rebuild of the example "Remote segment that crosses the seal"
// in https://github.com/aiven/inkless/pull/857: the segment [50, 119] holds
// 99 in the recorded epoch 2 and discarded epoch-3 records past the
// seal 100. The rebuilt log starts at the seal with the epoch-2 entry only and
// no producer state.
func ExampleMachine_Rebuild() {
	ctx := context.Background()
	fs := vfs.NewMem()
	tp := remote.TopicIDPartition{Topic: "orders", Partition: 0}

	meta, _ := remote.Open(fs, "meta", remote.MetadataOptions{})
	defer meta.Close()
	id := remote.SegmentID{TopicIDPartition: tp, ID: remote.UUID{1}}
	epochs := []epochcache.Entry{{Epoch: 2, StartOffset: 50}, {Epoch: 3, StartOffset: 100}}
	_ = meta.RegisterCopiedSegment(ctx, remote.SegmentMetadata{SegmentID: id, StartOffset: 50, EndOffset: 119,
		SegmentLeaderEpochs: epochs, SizeBytes: 1000, TxnIndexEmpty: true})

	// The partition: phase 2 at seal 100, R = 2, flag committed in epoch 4.
	s, _ := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	s, _ = s.CommitSeal(100, nil)
	s, _ = s.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: 100, LastClassicLeaderEpoch: 2},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 4})

	l, _ := log.Open("orders-0", log.Options{FS: fs, RemoteStorageEnabled: true})
	defer l.Close()
	m, _ := tierstate.NewMachine(tierstate.MachineOptions{Leader: noSource{}, Metadata: meta,
		Data: exampleData{epochs: epochs}})
	res, err := m.Rebuild(ctx, tierstate.RebuildRequest{Partition: tp, Log: l, State: s, LeaderLogStartOffset: 50})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res)
	fmt.Printf("log start %d, local log start %d, log end %d\n", l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset())
	// Output:
	// phase-2 rebuild of AAAAAAAAAAAAAAAAAAAAAA:orders-0: target 2@99 in segment [50, 119]
	// local log at 100 (log start 50), epochs 2@50 (not restored: 3@100), empty producer state
	// log start 50, local log start 100, log end 100
}
