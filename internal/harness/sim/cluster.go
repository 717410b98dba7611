package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// Partition is the one partition the simulation replicates, as a new
// cluster creates it. RecreateTopic deletes the topic and creates it
// again under the same name with a new topic id (Cluster.Partition).
var Partition = demo.Partition

// ErrNotApplicable is returned by an action whose precondition does not
// hold (no leader to produce to, a broker already down, a switch step
// the state does not allow). The random scheduler skips such actions; a
// scripted run treats them as a mistake in its script.
var ErrNotApplicable = errors.New("sim: action not applicable")

func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotApplicable, fmt.Sprintf(format, args...))
}

// Options configure a Cluster.
type Options struct {
	// Seed seeds the crash images and the object-store faults (the random
	// scheduler has its own source, seeded from the same number).
	Seed uint64
	// Brokers is the number of brokers, ids 1 to Brokers. Default 3.
	Brokers int
	// SegmentBytes is every log's segment size. Default 2 KiB (a few
	// dozen records), so that segments roll, tier and expire often.
	SegmentBytes int64
	// DisableEligibleLeaderReplicas turns KIP-966 off in the controller
	// model. By default it is on, as in Kafka from 4.1, where
	// eligible.leader.replicas.version is on at its default level
	// (github.com/aiven/inkless/pull/871): the ISR may become empty,
	// replicas that leave an ISR below MinInsyncReplicas become eligible
	// leaders (ELR), and a partition whose ISR and ELR are empty elects
	// its last known leader when it returns, even in phase 1. Off (Kafka
	// before 4.1, or the feature left at level 0): the last ISR member
	// stays in the ISR and leads again when it returns. Kafka:
	// eligible.leader.replicas.version.
	DisableEligibleLeaderReplicas bool
	// MinInsyncReplicas bounds the ISR below which leaving replicas join
	// the ELR. Default 1. Kafka: min.insync.replicas.
	MinInsyncReplicas int
	// UncleanLeaderElection lets the controller elect a running replica
	// outside the ISR (and ELR) when none inside can lead, except in
	// phase 1 of the switch, which blocks it
	// (github.com/aiven/inkless/pull/855). Default false. Kafka:
	// unclean.leader.election.enable.
	UncleanLeaderElection bool
	// Trace, if set, receives every trace line as it is written.
	Trace func(line string)
}

// Cluster is N brokers hosting one partition, a controller, the shared
// remote tier and the WAL, all in one process and driven one action at
// a time. Every action is a method; invariants are checked by Check.
type Cluster struct {
	opts Options
	ctx  context.Context
	rng  *rand.Rand // crash images only
	// nowMs is the cluster's clock: every component reads it, and each
	// step moves it forward (Tick).
	nowMs int64
	step  int

	store *faultStore
	// unserved is a record a new leader's remote storage holds in its
	// lineage but does not serve (acceptUnservedPrefix), reported by the
	// next Check.
	unserved *Violation
	// walFaults are the hostile answers of the WAL's read path
	// (walfaults.go): the writer and reader use store and cp through
	// them.
	walFaults *walFaults
	metaFS    vfs.FS
	meta      *remote.MetadataManager
	storage   *remote.StorageManager
	// copies is storage as the brokers' remote managers copy through it
	// (lateputs.go); orphansChecked is the store's count of remote
	// object changes the last checkOrphans saw.
	copies         copyStorage
	orphansChecked uint64
	cpFS           vfs.FS
	cp             *pebblecp.ControlPlane
	// walCP is cp as the brokers' WAL clients reach it, with the
	// injected control-plane faults (faults.go).
	walCP  *faultCP
	writer *wal.Writer
	reader *wal.Reader

	// flushUnlimited is the log's flush setting (SetFlush): false is
	// flush.messages=1, true Kafka's default (no flush per message).
	flushUnlimited bool

	// tp is the partition's identity: Partition, with a new topic id
	// after each RecreateTopic (recreate.go). topics are the topic ids
	// the partition had before, oldest first (the orphan check knows
	// their remote segments).
	tp     remote.TopicIDPartition
	topics []remote.TopicIDPartition

	ctrl    controller
	brokers []*Broker
	model   model
	prod    producerState // the idempotent producers (producer.go)
	trace   trace
	rec     recorder // the steps taken, as script actions (shrink.go)
	// swarm is a random run's swarm configuration (nil: none); only the
	// scheduler reads it (swarm.go).
	swarm *Swarm
	// cut is the broker a network partition cuts off from the others (0:
	// none; faults.go).
	cut int32
}

// startMs is the simulated clock's origin (a fixed instant, so that
// record timestamps are the same on every run).
const startMs = 1_700_000_000_000

// New builds a cluster: the brokers with empty disks, the shared remote
// metadata and object store, the WAL control plane, writer and reader,
// and the controller's first partition record (leader 1, epoch 0, every
// broker in the ISR), applied to every broker.
func New(opts Options) (*Cluster, error) {
	if opts.Brokers == 0 {
		opts.Brokers = 3
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = 2 << 10
	}
	c := &Cluster{opts: opts, ctx: context.Background(), nowMs: startMs,
		rng: rand.New(rand.NewPCG(opts.Seed, 0x63726173680a))} // "crash"
	c.trace.sink = opts.Trace
	c.tp = Partition
	c.model.init()
	if err := c.openShared(); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	for id := 1; id <= opts.Brokers; id++ {
		b := &Broker{c: c, ID: int32(id), fs: vfs.NewCrashableMem()}
		c.brokers = append(c.brokers, b)
		if err := b.start(); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	c.ctrl.init(opts)
	if err := c.publish("initial record"); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Cluster) now() time.Time { return time.UnixMilli(c.nowMs) }

// Partition is the partition's identity now: Partition until a
// RecreateTopic gives it a new topic id.
func (c *Cluster) Partition() remote.TopicIDPartition { return c.tp }

// walTP is the partition's identity in the WAL.
func (c *Cluster) walTP() wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: wal.TopicID(c.tp.TopicID), Partition: c.tp.Partition}
}

// openShared opens what every broker shares: the object store, the
// remote segment metadata (standing in for __remote_log_metadata) and
// the WAL's control plane (standing in for the shared PostgreSQL one).
// Neither crashes in the simulation.
func (c *Cluster) openShared() error {
	c.store = newFaultStore(c.opts.Seed)
	c.walFaults = newWALFaults(c.opts.Seed)
	walStore := walStore{c.store, c.walFaults}
	c.metaFS = vfs.NewMem()
	meta, err := remote.Open(c.metaFS, "remote-metadata", remote.MetadataOptions{})
	if err != nil {
		return err
	}
	c.meta = meta
	// A copy's uploads one after another: which one a store fault hits
	// is then the same in every run of a seed (faultStore).
	if c.storage, err = remote.NewStorageManager(c.store, remote.StorageOptions{ChunkSize: 4 << 10,
		SequentialUploads: true}); err != nil {
		return err
	}
	c.store.keys = c.storage
	concurrent, err := remote.NewStorageManager(c.store, remote.StorageOptions{ChunkSize: 4 << 10,
		ManifestCacheEntries: -1})
	if err != nil {
		return err
	}
	c.copies = copyStorage{StorageManager: c.storage, concurrent: concurrent, store: c.store}
	c.cpFS = vfs.NewMem()
	c.walCP = &faultCP{}
	if c.cp, err = pebblecp.Open(c.cpFS, "control-plane", pebblecp.Options{StepFault: c.walCP.stepFault}); err != nil {
		return err
	}
	c.walCP.ControlPlane = c.cp
	// One object per Produce call (MaxBytes 1 rotates at once), one try
	// per upload and a clock whose timers never fire: the writer's
	// goroutines then run one object at a time, in call order, and
	// Produce returns only when its object is answered.
	if c.writer, err = wal.NewWriter(wal.WriterOptions{Store: walStore, ControlPlane: c.walCP, MaxBytes: 1,
		UploadAttempts: 1, Clock: stoppedClock{c}}); err != nil {
		return err
	}
	c.reader, err = wal.NewReader(wal.ReaderOptions{Store: walStore, ControlPlane: walPlane{c.walCP, c.walFaults}, ReadConcurrency: 1})
	return err
}

// Close releases everything. The cluster is unusable afterwards.
func (c *Cluster) Close() error {
	var errs []error
	for _, b := range c.brokers {
		b.cut = nil // no crash point cuts the cluster's own close
		errs = append(errs, b.stop())
	}
	if c.writer != nil {
		errs = append(errs, c.writer.Close())
	}
	if c.cp != nil {
		errs = append(errs, c.cp.Close())
	}
	if c.meta != nil {
		errs = append(errs, c.meta.Close())
	}
	return errors.Join(errs...)
}

// Broker returns broker id (1-based), nil if there is none.
func (c *Cluster) Broker(id int32) *Broker {
	if id < 1 || int(id) > len(c.brokers) {
		return nil
	}
	return c.brokers[id-1]
}

// Brokers returns every broker, by id.
func (c *Cluster) Brokers() []*Broker { return c.brokers }

// Step is the number of the last action run (0 before the first).
func (c *Cluster) Step() int { return c.step }

// Leader returns the partition's leader (-1 when it has none).
func (c *Cluster) Leader() int32 { return c.ctrl.rec.Leader }

// LeaderEpoch, PartitionEpoch and ISR are the controller's record.
func (c *Cluster) LeaderEpoch() int32    { return c.ctrl.rec.LeaderEpoch }
func (c *Cluster) PartitionEpoch() int32 { return c.ctrl.rec.PartitionEpoch }
func (c *Cluster) ISR() []int32          { return append([]int32(nil), c.ctrl.rec.ISR...) }

// State is the partition's switch state as the controller committed it.
func (c *Cluster) State() tierstate.State { return c.ctrl.rec.State }

// Seal is the committed seal, -1 when none.
func (c *Cluster) Seal() int64 {
	if !c.ctrl.rec.State.SealCommitted() {
		return -1
	}
	return c.ctrl.rec.State.Seal()
}

// WAL returns the WAL's start W and high watermark, ok false while the
// WAL has no row for the partition.
func (c *Cluster) WAL() (start, hw int64, ok bool) {
	info, err := c.cp.LogInfo(c.ctx, c.walTP())
	if err != nil {
		return -1, -1, false
	}
	return info.LogStartOffset, info.HighWatermark, true
}

// HighestRemoteOffset is the end of the gap-free run of finished remote
// segments from the lowest one (-1 when none): the highest offset remote
// storage holds of the partition's records (a segment an unclean
// election discarded the end of counts below the discarded offsets). The
// records DeleteRecords deleted are no gap: remote storage need not hold
// them (a copy after the deletion starts at the log start), nor are the
// records the partition gave up (an unclean election, a lowered seal):
// no tier need hold them, so no copy can fill that hole.
func (c *Cluster) HighestRemoteOffset() int64 {
	segs := c.validSegments()
	h := int64(-1)
	for _, s := range segs {
		if from := max(h+1, c.model.deletedBelow); h >= 0 && s.StartOffset > from && !c.model.given(from, s.StartOffset) {
			break
		}
		h = max(h, s.EndOffset)
	}
	return h
}

// Committed is the end of the records the partition acknowledged: every
// offset below it was committed (classic: below a high watermark all of
// the ISR reached; diskless: below the WAL's high watermark).
func (c *Cluster) Committed() int64 { return c.model.end }

// stoppedClock is the WAL writer's clock: the cluster's time, and timers
// that never fire (the writer rotates by size, never retries an upload,
// and no object times out: a call is answered when the store and the
// control plane answer it).
type stoppedClock struct{ c *Cluster }

func (s stoppedClock) Now() time.Time                          { return s.c.now() }
func (stoppedClock) AfterFunc(time.Duration, func()) wal.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return true }

// stepClock is the consolidation fetcher's clock: the cluster's time,
// with timers that never fire (Fetcher.Step reads only Now).
type stepClock = stoppedClock
