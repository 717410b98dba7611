package sim

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// logDirs are the log directories on every broker's disk (Kafka:
// log.dirs): the partition's log is in one of them, the future log of a
// log directory move in the other.
var logDirs = []string{"/data-1", "/data-2"}

// Broker is one broker hosting the partition: its own crashable disk
// with its log manager (logmanager.Manager, holding the partition's
// log), the replica driver, a remote-log manager, the consolidation
// fetcher with its endpoint, and a WAL pruner. Its background work
// (fetching, tiering, pruning, the log manager's removal of deleted
// logs) runs only when the scheduler calls the Cluster's action for it.
type Broker struct {
	c  *Cluster
	ID int32
	fs *vfs.MemFS
	up bool
	// logs is the log manager on fs (nil while down); the driver's
	// LogManager and FutureLogManager are replica.ManagedLogs over it.
	logs *logmanager.Manager

	driver   *replica.Replica
	mgr      *remote.Manager
	endpoint *consolidate.Endpoint
	fetcher  *consolidate.Fetcher
	pruner   *consolidate.Pruner
	reporter *consolidate.Reporter
	// classic is the classic fetcher's partition (nil: not fetching).
	classic *classicFetch
	// consolidating: the driver added the partition to the fetcher.
	consolidating bool
	// sw and gate are the leader's switch steps and classic produce gate,
	// for the log and leader epoch they were made for.
	sw      *consolidate.LeaderSwitch
	gate    *consolidate.ClassicGate
	gateFor *log.UnifiedLog
	swEpoch int32
	// epochStart is the log end when the broker became leader in epoch
	// (Kafka's Partition.leaderEpochStartOffsetOpt): a follower joins
	// the ISR only once its log reaches it. A field, not the epoch
	// cache's answer: a promoted future log has no entry for an epoch
	// its leader has not written in yet.
	epochStart struct {
		epoch  int32
		offset int64
	}
	// task is a remote log task's lookup awaiting its install (scripted
	// runs: Cluster.RemoteTaskLookup).
	task *remoteTaskLookup
	// moving: the move fetcher holds the partition (a log directory
	// move: move.go).
	moving bool
	// moveTruncateTo is the offset the classic fetcher truncated the
	// current log to since the move fetcher's last round (-1: none), for
	// the move fetcher to truncate the future log to (Kafka's
	// ReplicaFetcherThread.truncate marks the alter-log-dirs thread with
	// markPartitionsForTruncation). In memory: a crash forgets it.
	moveTruncateTo int64
	// moveResumed: the driver resumed a move at the broker's start; the
	// move fetcher's next round validates the future log's epochs
	// against the current log first (Kafka's alter-log-dirs thread adds
	// the partition in its truncating state), since the marks of the
	// truncations before the restart are gone.
	moveResumed bool
	// cut is a crash armed at a file operation of the disk (crashfs.go),
	// nil or stale (armed on an older disk) when none is.
	cut *cutPoint
	// prodMarks are the producers its log held when it went down, for
	// the check at its restart (producer.go; nil: none to check).
	prodMarks *producerMarks
	// stateFrom is the offset from which the current log's producer
	// state was built: the offset its last full truncation started it
	// at (0 for a new disk). A leader never held the state of a batch
	// ending below it, so it answers that batch's retry as Kafka's does,
	// OUT_OF_ORDER_SEQUENCE_NUMBER when the producer's later batches are
	// known (checked in sendIdempotent). futureStateFrom is the future
	// log's, the current one's after a promotion.
	stateFrom, futureStateFrom int64
}

// classicFetch is where the classic fetcher fetches from.
type classicFetch struct {
	leader int32
}

// Up reports whether the broker is running.
func (b *Broker) Up() bool { return b.up }

// Log is the broker's current log, nil when it has none (or is down).
func (b *Broker) Log() *log.UnifiedLog {
	if !b.up {
		return nil
	}
	l, _ := b.driver.Log().(*log.UnifiedLog)
	return l
}

// Prior is what the driver remembers (offline, fenced, hosted).
func (b *Broker) Prior() replica.Prior {
	if !b.up {
		return replica.Prior{}
	}
	return b.driver.Prior()
}

// Offsets returns the log's log start, local log start, log end and
// high watermark (all -1 without a log).
func (b *Broker) Offsets() (logStart, localStart, leo, hw int64) {
	l := b.Log()
	if l == nil {
		return -1, -1, -1, -1
	}
	o := l.Offsets()
	return o.LogStartOffset, o.LocalLogStartOffset, o.LogEndOffset, o.HighWatermark
}

// Epochs is the log's leader-epoch lineage (nil without a log).
func (b *Broker) Epochs() []epochcache.Entry {
	if l := b.Log(); l != nil {
		return l.EpochEntries()
	}
	return nil
}

// logOptions are the partition log's options (the log manager sets
// its FS and clock: the broker's disk and the cluster's clock).
func (b *Broker) logOptions() log.Options {
	return log.Options{
		RemoteStorageEnabled: true, SegmentBytes: b.c.opts.SegmentBytes, SegmentIndexBytes: 4096,
		// Every append is fsynced (flush.messages=1), or none is
		// (Kafka's default: the log relies on replication, and a crash
		// image may drop what no flush or clean close made durable):
		// SetFlush. The background flush is off, so no goroutine of the
		// log races the scheduler.
		FlushMessages: b.c.flushMessages(), RecoveryPointIntervalBytes: -1,
		LocalRetentionMs: 1,
		// The model's producers retry until answered (no delivery
		// timeout), so their ids must outlive every clock jump: a
		// producer id that expired (producer.id.expiration.ms, a day by
		// default) would take a retry as new and append it again, which
		// Kafka documents and the checker would call a Duplicate. Set
		// above maxClockMs's span.
		ProducerIDExpirationMs: 8 * 24 * 3600 * 1000,
	}
}

// openLogs opens the broker's log manager on its disk (recovering the
// logs a crash left) with no background task: the deleted logs' removal
// runs at the end of every step (Cluster.do), the other tasks never
// (their work is the scheduler's actions: flush.messages=1, retention in
// Expire; Kafka's periodic high-watermark checkpoint is not modelled).
// It returns the partition's current and future logs, nil when absent.
//
// The high watermark lives in the log manager's
// replication-offset-checkpoint, which a clean shutdown (Stop) and the
// periodic checkpoint (CheckpointHighWatermark) write for the partition
// in the simulation's actions: start consumes it, so that a later crash
// loses the high watermark unless a periodic checkpoint wrote it again
// (a checkpointed one over records an election discards would break the
// checker's rule until the replica truncates).
//
// The manager runs serially (logmanager.Options.Serial): its directories,
// logs and fsyncs one at a time, in order, so that a crash cut at the
// N-th file operation (crashfs.go) falls at the same one in every run.
func (b *Broker) openLogs() (cur, fut *log.UnifiedLog, err error) {
	c := b.c
	m, err := logmanager.Open(c.ctx, logmanager.Options{Dirs: logDirs, FS: b.disk(), Log: b.logOptions(),
		NoBackgroundTasks: true, FileDeleteDelay: -1, Now: c.now, Serial: true})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range logDirs {
		path := b.fs.PathJoin(d, logmanager.HighWatermarkCheckpointFile)
		err := b.fs.Remove(path)
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err == nil {
			// The removal is made durable at once: a crash image keeping
			// none of the unsynced data would bring the checkpoint back,
			// and the next start would restore a high watermark the
			// replica's truncations since lowered (over records it then
			// fetched from another epoch, not committed).
			err = syncDir(b.fs, d)
		}
		if err != nil {
			return nil, nil, errors.Join(err, m.Close())
		}
	}
	if err = c.deleteStrayLogs(m); err != nil {
		return nil, nil, errors.Join(err, m.Close())
	}
	if cur, err = m.Get(c.tp); errors.Is(err, logmanager.ErrNotFound) {
		cur, err = nil, nil
	}
	if err == nil {
		if fut, err = m.GetFuture(c.tp); errors.Is(err, logmanager.ErrNotFound) {
			fut, err = nil, nil
		}
	}
	if err != nil {
		return nil, nil, errors.Join(err, m.Close())
	}
	b.logs = m
	return cur, fut, nil
}

// CheckpointHighWatermark runs broker id's periodic high-watermark
// checkpoint (Kafka's replica.high.watermark.checkpoint.interval.ms, 5 s
// by default: logmanager.TaskHighWatermarkCheckpoint writes every
// directory's replication-offset-checkpoint). A crash after it restores
// the high watermarks it wrote (a restart consumes the file: openLogs).
func (c *Cluster) CheckpointHighWatermark(id int32) error {
	return c.do("checkpoint-hw", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		if err := b.logs.RunTask(logmanager.TaskHighWatermarkCheckpoint); err != nil {
			return "", err
		}
		_, _, _, hw := b.Offsets()
		return fmt.Sprintf("hw=%d", hw), nil
	})
}

// SetFlush sets the partition's flush.messages (a topic config change,
// kafka-configs.sh --alter --add-config flush.messages=N): 1 fsyncs
// every append, 0 is Kafka's default, no flush per message (the records
// are durable once a roll, a clean close or a recovery point flushes
// them; until then a crash image may drop them). Each broker's log
// takes it at its next open (a restart).
func (c *Cluster) SetFlush(messages int64) error {
	return c.do("flush", -1, func() (string, error) {
		c.rec.note("messages", messages)
		if messages != 0 && messages != 1 {
			return "", notApplicable("flush.messages %d: the model runs 1 or unlimited (0)", messages)
		}
		c.flushUnlimited = messages == 0
		return fmt.Sprintf("flush.messages=%d", messages), nil
	})
}

// flushMessages is the log's FlushMessages option for SetFlush's
// setting.
func (c *Cluster) flushMessages() int64 {
	if c.flushUnlimited {
		return 0
	}
	return 1
}

// start brings the broker up on its disk: the logs as found (recovered
// by the log manager's Open), a new driver, remote-log manager, fetcher
// and pruner. The controller's record reaches it with the next publish.
func (b *Broker) start() error {
	c := b.c
	l, future, err := b.openLogs()
	if err != nil {
		return err
	}
	// The cross-tier log start X, read from the control plane on every
	// question (the cache's TTL is below one step): the expiration
	// task's retention guard and the endpoint read the same X.
	crossTier, err := consolidate.NewCrossTierCache(consolidate.CrossTierCacheOptions{ControlPlane: c.cp,
		Partitions: partitionSource{b}, TTL: time.Nanosecond, Now: c.now})
	if err != nil {
		return err
	}
	// The leader's remote log start reports reach the control plane
	// through a Reporter, flushed after every step (Cluster.do).
	if b.reporter, err = consolidate.NewReporter(consolidate.ReporterOptions{ControlPlane: c.cp, Cache: crossTier}); err != nil {
		return err
	}
	if b.mgr, err = remote.NewManager(c.meta, c.copies, remote.ManagerOptions{BrokerID: b.ID, TaskInterval: -1,
		Consolidation: crossTier, Now: c.now}); err != nil {
		return err
	}
	if b.endpoint, err = consolidate.NewEndpoint(consolidate.EndpointOptions{ControlPlane: c.walCP, WAL: c.reader,
		Remote: c.meta, Partitions: partitionSource{b}, CrossTier: crossTier, SegmentBytes: c.opts.SegmentBytes}); err != nil {
		return err
	}
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: b.endpoint, Metadata: c.meta, Data: c.storage,
		Listener: b.rebuildListener()})
	if err != nil {
		return err
	}
	if b.fetcher, err = consolidate.NewFetcher(consolidate.FetcherOptions{Endpoint: b.endpoint, Machine: m,
		Backoff: time.Millisecond, IdleInterval: time.Millisecond, Clock: stepClock{c}}); err != nil {
		return err
	}
	if b.pruner, err = consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: c.walCP, RemoteSegments: c.meta}); err != nil {
		return err
	}
	if err := b.newDriver(l); err != nil {
		return err
	}
	if future != nil {
		b.driver.SetFutureLog(future)
	}
	b.moveResumed = future != nil
	b.forgetRole()
	b.moveTruncateTo = -1
	b.task = nil // a remote task's lookup dies with the process
	b.up = true
	return nil
}

// newDriver makes the broker's replica driver for the partition as it
// is now (Cluster.tp), over its current log l (nil: none yet).
func (b *Broker) newDriver(l *log.UnifiedLog) error {
	logs := replica.ManagedLogs(b.logs)
	opts := replica.Options{Partition: b.c.tp, Logs: logs, Classic: classicFetcher{b},
		Consolidation: consolidationFetcher{b, replica.NewConsolidationFetcher(b.fetcher)}, Remote: reportingRemote{b.mgr, b.reporter},
		Move: moveFetcher{b}, FutureLogs: logs, OnEvent: b.onDriverEvent}
	if l != nil {
		opts.Log = l
	}
	d, err := replica.New(opts)
	if err != nil {
		return err
	}
	b.driver = d
	return nil
}

// stop closes the broker cleanly (Cluster.Close).
func (b *Broker) stop() error {
	if !b.up {
		return nil
	}
	b.prodMarks = markProducers(b.Log(), b.fs)
	b.up = false
	// The log manager closes the logs, writes its checkpoints (the high
	// watermark among them) and the directories' clean-shutdown markers.
	err := b.logs.Close()
	b.logs = nil
	return errors.Join(err, b.mgr.Close())
}

// crash takes the broker down: its disk becomes a crash image keeping
// unsyncedPercent of what was not synced (a lost disk: empty). The log
// manager and the open files of the old disk are abandoned, as a killed
// process leaves them.
func (b *Broker) crash(unsyncedPercent int, loseDisk bool) {
	var img *vfs.MemFS
	if loseDisk {
		img = vfs.NewCrashableMem()
	} else {
		img = crashImage(b.fs, unsyncedPercent, rand.New(rand.NewPCG(b.c.rng.Uint64(), b.c.rng.Uint64())))
	}
	b.prodMarks = nil
	if !loseDisk {
		b.prodMarks = markProducers(b.Log(), img)
	}
	_ = b.mgr.Close()
	b.up, b.fs, b.logs, b.moving, b.moveTruncateTo = false, img, nil, false, -1
	b.forgetRole()
}

// partitionSource is the broker's view of the partition for its
// consolidation endpoint: the committed switch state and its log.
type partitionSource struct{ b *Broker }

func (p partitionSource) Partition(tp remote.TopicIDPartition) (tierstate.State, consolidate.LocalLog, bool) {
	if tp != p.b.c.tp || !p.b.up {
		return tierstate.State{}, nil, false
	}
	if l := p.b.Log(); l != nil {
		return p.b.c.ctrl.rec.State, l, true
	}
	return p.b.c.ctrl.rec.State, nil, true
}

// classicFetcher records whether the classic fetcher runs and from whom;
// Cluster.Replicate performs its fetches.
type classicFetcher struct{ b *Broker }

func (f classicFetcher) AddPartition(_ context.Context, _ remote.TopicIDPartition, leader int32, _ int64) error {
	f.b.classic = &classicFetch{leader: leader}
	return nil
}

func (f classicFetcher) RemovePartition(context.Context, remote.TopicIDPartition) error {
	f.b.classic = nil
	return nil
}

// consolidationFetcher is the driver's adapter over consolidate.Fetcher,
// remembering whether the partition is added; Cluster.Consolidate runs
// the fetcher's Step.
type consolidationFetcher struct {
	b     *Broker
	inner replica.ConsolidationFetcher
}

func (f consolidationFetcher) AddPartition(ctx context.Context, s replica.ConsolidationStart) error {
	if err := f.inner.AddPartition(ctx, s); err != nil {
		return err
	}
	f.b.consolidating = true
	return nil
}

func (f consolidationFetcher) RemovePartition(ctx context.Context, tp remote.TopicIDPartition) error {
	f.b.consolidating = false
	return f.inner.RemovePartition(ctx, tp)
}

// reportingRemote is the remote-log manager as the driver sees it: the
// logs it registers are wrapped in consolidate.ReportingLog, so the log
// start reports of the copy and expiration tasks reach the broker's
// cross-tier Reporter.
type reportingRemote struct {
	*remote.Manager
	reporter *consolidate.Reporter
}

func (r reportingRemote) OnLeadershipChange(leaders, followers []remote.Partition) error {
	wrap := func(ps []remote.Partition) []remote.Partition {
		out := make([]remote.Partition, len(ps))
		for i, p := range ps {
			// Only the log is wrapped: the driver's seal (the cap of
			// remote reads) passes through.
			p.Log = consolidate.ReportingLog{PartitionLog: p.Log, Partition: p.TopicIDPartition, Reporter: r.reporter}
			out[i] = p
		}
		return out
	}
	return r.Manager.OnLeadershipChange(wrap(leaders), wrap(followers))
}

// syncDir makes dir's entries durable on fs.
func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// forgetRole drops what the broker kept of its role in the partition
// (its fetchers, the leader's switch steps and gate, the epoch start it
// led from), as a crash, a stop or a lost disk does: a restarted broker
// records them again from the next delta.
func (b *Broker) forgetRole() {
	b.classic, b.consolidating, b.sw, b.gate, b.gateFor = nil, false, nil, nil, nil
	b.epochStart.epoch = -1
}
