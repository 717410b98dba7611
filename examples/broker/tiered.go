package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// S3Options points the remote tier at an S3 bucket instead of the
// directory DIR/remote. Credentials come from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), as in examples/multibroker.
type S3Options struct {
	// Endpoint is the server's host:port. Required with Bucket.
	Endpoint string
	// Bucket holds the objects; empty: no S3, the directory store.
	Bucket string
	// Region is the bucket's region. Default $AWS_REGION, then us-east-1.
	Region string
	// Insecure talks plain HTTP. Default false: TLS.
	Insecure bool
}

// tier is the broker's remote tier (KIP-405): an object store (a
// directory, or S3), the remote segment metadata on Pebble, and the
// remote-log manager that copies every partition's rolled segments, runs
// the remote retention, and serves fetches below the local log start.
// Every partition is registered as a leader (one broker leads them all).
//
// Lock order: tier.mu is a leaf, never held across a call into the
// library but remote.Manager.OnLeadershipChange, which takes only
// remote.Manager.mu and starts the partition's task goroutines.
type tier struct {
	logger *slog.Logger
	store  objstore.Store
	meta   *remote.MetadataManager
	mgr    *remote.Manager

	mu struct {
		sync.Mutex
		// registered maps a partition to the log its tasks run on; a
		// partition whose log changed (a log directory went offline and
		// the log was created again) is registered again.
		registered map[remote.TopicIDPartition]*log.UnifiedLog
	}
}

// DefaultRemoteTaskInterval is Kafka's remote.log.manager.task.interval.ms.
const DefaultRemoteTaskInterval = remote.DefaultTaskInterval

// openTier opens the object store (Dir/remote, or S3), the metadata
// (Dir/remote-metadata, on opts.FS) and the remote-log manager, whose
// copy and expiration tasks run every opts.RemoteTaskInterval per
// partition. Library: remote.Open, remote.NewStorageManager,
// remote.NewManager.
func openTier(opts Options, logger *slog.Logger) (_ *tier, err error) {
	t := &tier{logger: logger}
	t.mu.registered = map[remote.TopicIDPartition]*log.UnifiedLog{}
	defer func() {
		if err != nil {
			t.closeStores()
		}
	}()
	if opts.S3.Bucket != "" {
		if opts.S3.Endpoint == "" {
			return nil, errors.New("broker: -s3-bucket without -s3-endpoint")
		}
		st, err := s3.Open(context.Background(), s3.Options{Endpoint: opts.S3.Endpoint, Bucket: opts.S3.Bucket,
			Region: opts.S3.Region, DisableTLS: opts.S3.Insecure})
		if err != nil {
			return nil, fmt.Errorf("broker: open S3 bucket %s at %s: %w", opts.S3.Bucket, opts.S3.Endpoint, err)
		}
		t.store = st
	} else {
		st, err := fs.Open(filepath.Join(opts.Dir, "remote"), fs.Options{})
		if err != nil {
			return nil, fmt.Errorf("broker: open the remote store: %w", err)
		}
		t.store = st
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	if t.meta, err = remote.Open(fsys, filepath.Join(opts.Dir, "remote-metadata"), remote.MetadataOptions{}); err != nil {
		return nil, fmt.Errorf("broker: open the remote metadata: %w", err)
	}
	storage, err := remote.NewStorageManager(t.store, remote.StorageOptions{})
	if err != nil {
		return nil, err
	}
	interval := opts.RemoteTaskInterval
	if interval == 0 {
		interval = DefaultRemoteTaskInterval
	}
	t.mgr, err = remote.NewManager(t.meta, storage, remote.ManagerOptions{
		BrokerID:     nodeID,
		TaskInterval: interval,
		Listener:     t.listener(),
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// listener logs the remote tier's events.
func (t *tier) listener() remote.ManagerListener {
	return remote.ManagerListener{
		CopyEnd: func(c remote.CopyInfo) {
			t.logger.Debug("segment copied to remote storage", "partition", c.Segment.SegmentID.TopicIDPartition.String(),
				"start", c.Segment.StartOffset, "end", c.Segment.EndOffset, "bytes", c.Segment.SizeBytes)
		},
		CopyError: func(c remote.CopyInfo, err error) {
			t.logger.Warn("segment copy failed; the next run retries", "partition", c.Segment.SegmentID.TopicIDPartition.String(),
				"start", c.Segment.StartOffset, "err", err)
		},
		SegmentDeleted: func(m remote.SegmentMetadata, why remote.DeleteReason) {
			t.logger.Debug("remote segment deleted", "partition", m.SegmentID.TopicIDPartition.String(),
				"start", m.StartOffset, "end", m.EndOffset, "reason", why.String())
		},
		Corruption: func(tp remote.TopicIDPartition, err error) {
			t.logger.Error("corrupt data in the remote tier", "partition", tp.String(), "err", err)
		},
	}
}

// register makes the remote-log manager run the copy and expiration
// tasks of tp's log l, as its leader, unless it already does for l.
// Library: remote.Manager.OnLeadershipChange (idempotent for the same
// log and role).
func (t *tier) register(tp remote.TopicIDPartition, l *log.UnifiedLog) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.registered[tp] == l {
		return nil
	}
	if err := t.mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: l}}, nil); err != nil {
		return err
	}
	t.mu.registered[tp] = l
	return nil
}

// read serves a fetch at an offset below the local log start from remote
// storage. Library: remote.Manager.Read: whole batches as copied, each
// CRC-checked; for read_committed the aborted transactions from the
// remote transaction indexes (then the local ones); a partition's seal
// and its lineage are checked there. The context is not the broker's:
// a read in flight at shutdown is answered, as local reads are.
func (t *tier) read(tp remote.TopicIDPartition, offset int64, maxBytes int, isolation log.Isolation, minOneMessage bool) (remote.ReadResult, error) {
	return t.mgr.Read(context.Background(), tp, offset, maxBytes, isolation, minOneMessage)
}

// stopTasks stops every copy and expiration task and waits for the
// running ones, before the logs close. Library: remote.Manager.Close.
func (t *tier) stopTasks() error {
	return t.mgr.Close()
}

// closeStores closes the metadata database and the object store, after
// stopTasks and after the logs closed.
func (t *tier) closeStores() error {
	var errs []error
	if t.meta != nil {
		errs = append(errs, t.meta.Close())
	}
	if t.store != nil {
		errs = append(errs, t.store.Close())
	}
	return errors.Join(errs...)
}

// tierLogOptions are the remote tier's settings of every log.
func tierLogOptions(opts Options) log.Options {
	return log.Options{
		RemoteStorageEnabled: !opts.RemoteDisabled,
		LocalRetentionMs:     opts.LocalRetentionMs,
		LocalRetentionBytes:  opts.LocalRetentionBytes,
	}
}

// registerTiered registers every partition found at start with the remote
// tier, so copying resumes (the first copy run deletes the copies a crash
// left unfinished and finds the highest offset in remote storage again).
func (s *Server) registerTiered() {
	if s.tier == nil {
		return
	}
	for _, p := range s.mgr.Partitions() {
		if p.Future {
			continue
		}
		if _, _, err := s.partitionLog(p.Partition.Topic, p.Partition.Partition); err != nil {
			s.logger.Warn("partition not served", "topic", p.Partition.Topic, "partition", p.Partition.Partition, "err", err)
		}
	}
}

// maybeRegisterTiered registers a partition's log with the remote tier
// the first time a request uses it. A failure leaves the partition
// local-only until a retry succeeds: nothing is copied, so local
// retention deletes nothing, and nothing is read remotely.
func (s *Server) maybeRegisterTiered(name string, tp topic, partition int32, l *log.UnifiedLog) {
	if s.tier == nil {
		return
	}
	id := remote.TopicIDPartition{TopicID: tp.id, Topic: name, Partition: partition}
	if err := s.tier.register(id, l); err != nil {
		s.logger.Warn("remote tier: partition not registered", "partition", id.String(), "err", err)
	}
}

// readRemote serves a fetch of topic name's partition at an offset below
// its local log start (the log answered ErrOffsetMovedToTieredStorage):
// the batches and, for read_committed, the aborted transactions; the
// error is answered with kafkaerr.ErrorCode.
func (s *Server) readRemote(name string, partition int32, offset int64, maxBytes int, isolation log.Isolation, minOneMessage bool) (remote.ReadResult, error) {
	tp, ok := s.topics.get(name)
	if !ok || s.tier == nil {
		return remote.ReadResult{}, log.ErrOffsetMovedToTieredStorage
	}
	id := remote.TopicIDPartition{TopicID: tp.id, Topic: name, Partition: partition}
	return s.tier.read(id, offset, maxBytes, isolation, minOneMessage)
}

// closeStorage closes in dependency order: the remote tasks first (they
// read and update the logs), then the logs (logmanager.Manager.Close
// checkpoints and marks the directory clean), then the remote metadata
// and the object store.
func (s *Server) closeStorage() error {
	var errs []error
	if s.tier != nil {
		errs = append(errs, s.tier.stopTasks())
	}
	// Library: logmanager.Manager.Close closes every log.
	errs = append(errs, s.mgr.Close())
	if s.tier != nil {
		errs = append(errs, s.tier.closeStores())
	}
	return errors.Join(errs...)
}

// closeTier closes the remote tier when Start fails before the log
// manager opened.
func (s *Server) closeTier() {
	if s.tier != nil {
		_ = s.tier.stopTasks()
		_ = s.tier.closeStores()
	}
}

// findRemoteOffset answers ListOffsets for a timestamp (ts >= 0) from the
// remote tier when it holds offsets below the local log start: the first
// record there at or above the log start with a timestamp >= ts. found
// is false when the remote tier has none (or is off, or ts is special):
// the local segments answer.
func (s *Server) findRemoteOffset(l *log.UnifiedLog, name string, partition int32, ts int64) (log.TimestampAndOffset, bool, error) {
	start := l.LogStartOffset()
	if s.tier == nil || ts < 0 || start >= l.LocalLogStartOffset() {
		return log.TimestampAndOffset{}, false, nil
	}
	tp, ok := s.topics.get(name)
	if !ok {
		return log.TimestampAndOffset{}, false, nil
	}
	id := remote.TopicIDPartition{TopicID: tp.id, Topic: name, Partition: partition}
	return s.tier.mgr.FindOffsetByTimestamp(context.Background(), id, ts, start)
}
