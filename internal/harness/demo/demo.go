// Package demo is the small in-process cluster that the example programs
// and their tests run on: brokers are logs in one process, replication is
// a fetch loop that asks the leader's log exactly what a broker's fetch
// path would (tierstate.ValidateFetch), and the remote tier is one object
// store with one metadata store shared by all brokers (standing in for
// Kafka's replicated __remote_log_metadata topic). It is not a broker:
// there is no network, no controller and no ISR bookkeeping, only the
// storage-side decisions tierlog makes.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/truncation"
)

// Partition is the one partition the demos use.
var Partition = remote.TopicIDPartition{
	TopicID: remote.UUID{0x74, 0x69, 0x65, 0x72, 0x6c, 0x6f, 0x67, 0x2d, 0x64, 0x65, 0x6d, 0x6f, 1},
	Topic:   "orders", Partition: 0,
}

// Cluster is the shared remote tier and a directory for the brokers'
// logs.
type Cluster struct {
	// FS holds the logs and the metadata: vfs.Default, or a crashable
	// MemFS in tests.
	FS      vfs.FS
	Dir     string
	Store   objstore.Store
	Meta    *remote.MetadataManager
	Storage *remote.StorageManager
	// Out receives the step-by-step narration.
	Out io.Writer
	// NowMs is the cluster's clock, shared by every log.
	NowMs int64
}

// NewCluster opens the metadata store under dir and a StorageManager over
// store.
func NewCluster(dir string, store objstore.Store, out io.Writer) (*Cluster, error) {
	return NewClusterOn(vfs.Default, dir, store, out)
}

// NewClusterOn is NewCluster on fs.
func NewClusterOn(fs vfs.FS, dir string, store objstore.Store, out io.Writer) (*Cluster, error) {
	meta, err := remote.Open(fs, fs.PathJoin(dir, "remote-metadata"), remote.MetadataOptions{})
	if err != nil {
		return nil, err
	}
	sm, err := remote.NewStorageManager(store, remote.StorageOptions{ChunkSize: 64 << 10})
	if err != nil {
		return nil, errors.Join(err, meta.Close())
	}
	return &Cluster{FS: fs, Dir: dir, Store: store, Meta: meta, Storage: sm, Out: out, NowMs: time.Now().UnixMilli()}, nil
}

// Close closes the metadata store. The logs are the caller's.
func (c *Cluster) Close() error { return c.Meta.Close() }

// Printf narrates one step. The demo partition is written by its name
// (orders-0), not with its base64 topic id: the legend says the id once.
func (c *Cluster) Printf(format string, args ...any) {
	if c.Out != nil {
		line := strings.ReplaceAll(fmt.Sprintf(format, args...), Partition.String(), PartitionName())
		fmt.Fprintln(c.Out, line)
	}
}

// OpenLog opens (or creates) the partition's log of one broker, remote
// storage enabled, with small segments so that a demo rolls often and a
// local retention that deletes whatever is tiered.
func (c *Cluster) OpenLog(broker string) (*log.UnifiedLog, error) {
	dir := c.LogDir(broker)
	if err := c.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return log.Open(dir, log.Options{
		FS:                   c.FS,
		RemoteStorageEnabled: true,
		SegmentBytes:         16 << 10,
		LocalRetentionMs:     1,
		Now:                  func() time.Time { return time.UnixMilli(c.NowMs) },
	})
}

// LogDir is the directory of broker's log of the partition.
func (c *Cluster) LogDir(broker string) string {
	return c.FS.PathJoin(c.Dir, broker, fmt.Sprintf("%s-%d", Partition.Topic, Partition.Partition))
}

// NewManager returns a remote-log manager of one broker, driven by hand.
func (c *Cluster) NewManager(brokerID int32) (*remote.Manager, error) {
	return remote.NewManager(c.Meta, c.Storage, remote.ManagerOptions{
		BrokerID: brokerID, TaskInterval: -1,
		Now: func() time.Time { return time.UnixMilli(c.NowMs) },
	})
}

// Produce appends n records of one batch each as leader in epoch, with
// values "<prefix>-<offset>", and returns their bytes by offset.
func Produce(l *log.UnifiedLog, epoch int32, n int, prefix string, nowMs int64) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	for range n {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		value := fmt.Appendf(nil, "%s-%d", prefix, l.LogEndOffset())
		b.Add(nowMs, []byte(prefix), value)
		batch, err := b.Build()
		if err != nil {
			return nil, err
		}
		info, err := l.AppendAsLeader(batch, epoch, log.OriginClient)
		if err != nil {
			return nil, err
		}
		out[info.FirstOffset] = value
	}
	return out, nil
}

// Endpoint is a leader's log seen as a fetcher's source
// (tierstate.LeaderEndpoint).
type Endpoint struct {
	Log   *log.UnifiedLog
	Epoch int32
}

// FetchEarliestLocalOffset answers ListOffsets(EARLIEST_LOCAL_TIMESTAMP).
func (e Endpoint) FetchEarliestLocalOffset(_ context.Context, _ remote.TopicIDPartition, current int32) (tierstate.OffsetAndEpoch, error) {
	if err := e.fence(current); err != nil {
		return tierstate.OffsetAndEpoch{}, err
	}
	start := e.Log.LocalLogStartOffset()
	epoch, ok := e.Log.EpochForOffset(start)
	if !ok {
		epoch = base.UndefinedEpoch
	}
	return tierstate.OffsetAndEpoch{Offset: start, Epoch: epoch}, nil
}

// FetchEpochEndOffset answers OffsetsForLeaderEpoch.
func (e Endpoint) FetchEpochEndOffset(_ context.Context, _ remote.TopicIDPartition, current, epoch int32) (tierstate.EpochEndOffset, error) {
	if err := e.fence(current); err != nil {
		return tierstate.EpochEndOffset{}, err
	}
	return e.Log.EndOffsetForEpoch(epoch), nil
}

func (e Endpoint) fence(current int32) error {
	if current != base.UndefinedEpoch && current < e.Epoch {
		return fmt.Errorf("%w: fetcher's epoch %d, leader's %d", base.ErrFencedEpoch, current, e.Epoch)
	}
	return nil
}

// Fetcher replicates the partition from a leader's log into a follower's,
// as a broker's replica fetcher does: validate, read, append; truncate on
// divergence; reset on OFFSET_OUT_OF_RANGE; rebuild from remote storage on
// OFFSET_MOVED_TO_TIERED_STORAGE.
type Fetcher struct {
	Cluster  *Cluster
	Leader   Endpoint
	Follower *log.UnifiedLog
	Machine  *tierstate.Machine
	State    tierstate.State
	// Rebuilds records each rebuild the fetcher ran.
	Rebuilds []tierstate.RebuildResult
}

// CatchUp fetches until the follower's log ends where the leader's does.
func (f *Fetcher) CatchUp(ctx context.Context) error {
	c, leader, follower := f.Cluster, f.Leader.Log, f.Follower
	for range 10_000 {
		if err := ctx.Err(); err != nil {
			return err
		}
		last, ok := follower.LatestEpoch()
		if !ok {
			last = base.UndefinedEpoch
		}
		offset := follower.LogEndOffset()
		v := tierstate.ValidateFetch(leader, f.Leader.Epoch, tierstate.FetchRequest{
			Fetcher: tierstate.FetcherFollower, FetchOffset: offset,
			LastFetchedEpoch: last, CurrentLeaderEpoch: f.Leader.Epoch,
		})
		switch v.Outcome {
		case tierstate.FetchRead:
			fd, err := leader.Read(nil, offset, 64<<10, log.IsolationLogEnd, true)
			if err != nil {
				return err
			}
			if len(fd.Records) == 0 {
				follower.UpdateHighWatermark(min(fd.HighWatermark, follower.LogEndOffset()))
				return nil
			}
			if _, err := follower.AppendAsFollower(fd.Records, f.Leader.Epoch); err != nil {
				return err
			}
			follower.UpdateHighWatermark(min(fd.HighWatermark, follower.LogEndOffset()))
		case tierstate.FetchDiverging:
			plan := truncation.PlanDivergence(
				truncation.EpochEndOffset{Epoch: v.DivergingEpoch, EndOffset: v.DivergingEndOffset},
				follower.EndOffsetForEpoch, follower.LogEndOffset(), follower.HighWatermark())
			c.Printf("  fetch at %d in epoch %d: diverging (leader's epoch %d ends at %d): truncate to %d",
				offset, last, v.DivergingEpoch, v.DivergingEndOffset, plan.TruncateTo)
			if _, err := follower.TruncateTo(plan.TruncateTo); err != nil {
				return err
			}
		case tierstate.FetchOffsetOutOfRange:
			plan := truncation.PlanOutOfRangeReset(v.LogEndOffset, v.LogStartOffset, offset)
			c.Printf("  fetch at %d: OFFSET_OUT_OF_RANGE: %s", offset, plan)
			switch plan.Action {
			case truncation.TruncateToLeaderEnd:
				if _, err := follower.TruncateTo(plan.Offset); err != nil {
					return err
				}
			case truncation.StartAtLeaderStart:
				if err := follower.TruncateFullyAndStartAt(plan.Offset, plan.Offset); err != nil {
					return err
				}
			default:
				return fmt.Errorf("demo: out of range at %d with nothing to do: %s", offset, plan)
			}
		case tierstate.FetchOffsetMovedToTieredStorage:
			c.Printf("  fetch at %d: OFFSET_MOVED_TO_TIERED_STORAGE (leader: log start %d, local log start %d, end %d)",
				offset, v.LogStartOffset, v.LocalLogStartOffset, v.LogEndOffset)
			res, err := f.Machine.Rebuild(ctx, tierstate.RebuildRequest{
				Partition: Partition, Log: follower, State: f.State,
				CurrentLeaderEpoch: f.Leader.Epoch, LeaderLogStartOffset: v.LogStartOffset,
			})
			if err != nil {
				return fmt.Errorf("demo: rebuild: %w", err)
			}
			f.Rebuilds = append(f.Rebuilds, res)
			c.Printf("  rebuilt from remote storage: %s", strings.ReplaceAll(res.String(), "\n", "\n    "))
		default:
			return fmt.Errorf("demo: fetch at %d: %s", offset, v)
		}
	}
	return errors.New("demo: the follower did not catch up")
}

// NewMachine returns a tier state machine reading the cluster's remote
// tier, fetching from leader.
func (c *Cluster) NewMachine(leader Endpoint) (*tierstate.Machine, error) {
	return tierstate.NewMachine(tierstate.MachineOptions{Leader: leader, Metadata: c.Meta, Data: c.Storage})
}

// ReadAll reads every record of l from its log start: below the local log
// start through the remote read path of mgr, above it locally. It returns
// the values by offset and how many came from remote storage.
func ReadAll(ctx context.Context, l *log.UnifiedLog, mgr *remote.Manager) (map[int64][]byte, int, error) {
	out := map[int64][]byte{}
	remoteCount := 0
	it := record.NewIter(record.IterOptions{})
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		var data []byte
		if off < l.LocalLogStartOffset() {
			res, err := mgr.Read(ctx, Partition, off, 64<<10, log.IsolationLogEnd, true)
			if err != nil {
				return nil, 0, fmt.Errorf("remote read at %d: %w", off, err)
			}
			data = res.Records
		} else {
			fd, err := l.Read(nil, off, 64<<10, log.IsolationLogEnd, true)
			if err != nil {
				return nil, 0, fmt.Errorf("read at %d: %w", off, err)
			}
			data = fd.Records
		}
		if len(data) == 0 {
			return nil, 0, fmt.Errorf("no records at %d", off)
		}
		next := off
		for len(data) > 0 {
			b, err := record.ReadBatch(data)
			if err != nil {
				return nil, 0, err
			}
			for it.Reset(b); it.Next(); {
				r := it.Record()
				if r.Offset >= off {
					out[r.Offset] = append([]byte(nil), r.Value...)
					if off < l.LocalLogStartOffset() {
						remoteCount++
					}
				}
			}
			if err := it.Err(); err != nil {
				return nil, 0, err
			}
			next = b.NextOffset()
			data = data[b.Size():]
		}
		off = next
	}
	return out, remoteCount, nil
}

// ValueAt returns the value of the record at offset in batches.
func ValueAt(batches []byte, offset int64) ([]byte, error) {
	it := record.NewIter(record.IterOptions{})
	for len(batches) > 0 {
		b, err := record.ReadBatch(batches)
		if err != nil {
			return nil, err
		}
		for it.Reset(b); it.Next(); {
			if r := it.Record(); r.Offset == offset {
				return append([]byte(nil), r.Value...), nil
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		batches = batches[b.Size():]
	}
	return nil, fmt.Errorf("demo: no record at %d", offset)
}
