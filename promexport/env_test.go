package promexport_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/tierstate"
)

var testTP = remote.TopicIDPartition{TopicID: remote.UUID{7}, Topic: "orders", Partition: 3}

// env is a broker's worth of sources built with the public APIs: one log
// on a memory FS, a remote manager on the memory object store, a rebuild
// machine whose source is never reachable.
type env struct {
	log  *log.UnifiedLog
	meta *remote.MetadataManager
	mgr  *remote.Manager
	mach *tierstate.Machine
	wal  *walEnv
}

const nowMs = 1_700_000_000_000

func now() time.Time { return time.UnixMilli(nowMs) }

func newEnv() (*env, error) {
	fs := vfs.NewMem()
	e := &env{}
	var err error
	if e.log, err = log.Open("orders-3", log.Options{FS: fs, RemoteStorageEnabled: true, Now: now}); err != nil {
		return nil, err
	}
	if e.meta, err = remote.Open(fs, "remote-metadata", remote.MetadataOptions{}); err != nil {
		return nil, err
	}
	storage, err := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	if err != nil {
		return nil, err
	}
	if e.mgr, err = remote.NewManager(e.meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1, Now: now}); err != nil {
		return nil, err
	}
	if e.mach, err = tierstate.NewMachine(tierstate.MachineOptions{Leader: unreachable{}, Metadata: e.meta, Data: storage}); err != nil {
		return nil, err
	}
	e.wal, err = newWALEnv()
	return e, err
}

// produce appends segments of n one-record batches in epoch 0, rolling
// after each, and marks them replicated.
func (e *env) produce(segments, n int) error {
	for range segments {
		for range n {
			b := record.NewBuilder(record.DefaultBuilderOptions())
			b.Add(nowMs-60_000, []byte("k"), fmt.Appendf(nil, "v%d", e.log.LogEndOffset()))
			batch, err := b.Build()
			if err != nil {
				return err
			}
			if _, err := e.log.AppendAsLeader(batch, 0, log.OriginClient); err != nil {
				return err
			}
		}
		if err := e.log.Roll(); err != nil {
			return err
		}
	}
	e.log.UpdateHighWatermark(e.log.LogEndOffset())
	return nil
}

// copyAndRebuild uploads the rolled segments as the partition's leader
// and runs one rebuild, which fails (the source is unreachable).
func (e *env) copyAndRebuild() error {
	if err := e.mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: testTP, Log: e.log}}, nil); err != nil {
		return err
	}
	if _, err := e.mgr.RunCopy(context.Background(), testTP); err != nil {
		return err
	}
	follower, err := log.Open("follower", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true, Now: now})
	if err != nil {
		return err
	}
	defer follower.Close()
	_, err = e.mach.Rebuild(context.Background(), tierstate.RebuildRequest{Partition: testTP, Log: follower})
	if tierstate.RebuildAction(err) != tierstate.ActionRetry {
		return fmt.Errorf("rebuild: want a retriable error, got %v", err)
	}
	return nil
}

func (e *env) close() error {
	return errors.Join(e.mgr.Close(), e.meta.Close(), e.log.Close(), e.wal.close())
}

var errUnreachable = errors.New("leader unreachable")

type unreachable struct{}

func (unreachable) FetchEarliestLocalOffset(context.Context, remote.TopicIDPartition, int32) (tierstate.OffsetAndEpoch, error) {
	return tierstate.OffsetAndEpoch{}, errUnreachable
}

func (unreachable) FetchEpochEndOffset(context.Context, remote.TopicIDPartition, int32, int32) (tierstate.EpochEndOffset, error) {
	return tierstate.EpochEndOffset{}, errUnreachable
}
