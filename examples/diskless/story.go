package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

const (
	seal         = 100
	txnProducer  = 7
	bLeaderEpoch = 5 // the delta that makes B leader in phase 2
)

// outcome is what the run verified, for the test.
type outcome struct {
	sealed, walStart                    int64
	recordedEpoch, disklessEpoch        int32
	aEpochs, bBefore, bRebuilt, bEpochs string
	bRebuiltAt, firstPruneW, pruneW     int64
	read                                map[string]int // records read back per tier
	lowered                             int64          // W after pull/855's prune
}

// env is the example's embedded deployment: the demo cluster (remote
// tier) plus the WAL's control plane, writer and reader.
type env struct {
	*demo.Cluster
	cp     *pebblecp.ControlPlane
	writer *wal.Writer
	reader *wal.Reader
	// committed is every record the partition committed, by offset; the
	// read-back must find exactly these.
	committed map[int64][]byte
}

func story(ctx context.Context, c *demo.Cluster, store string) (o outcome, err error) {
	tp := demo.Partition
	c.Printf("tierlog diskless example: partition %s switched from classic to diskless, remote tier on a %s, "+
		"WAL control plane on Pebble", tp, store)
	c.Legend(demo.NotePartitionName, demo.NoteHalfOpen, demo.NoteClosed, demo.NoteEpochAt, demo.NoteOffsets,
		demo.NoteMovedToTiered,
		demo.Note{Form: "A, B, C", Meaning: "three brokers with a replica of the partition"},
		demo.Note{Form: "S, W, HW", Meaning: "the seal (first diskless offset), the WAL's start and its high watermark (exclusive end)"},
		demo.Note{Form: "R, E_d", Meaning: "the recorded epoch (the leader's epoch at S-1) and the diskless leader epoch " +
			"that consolidation stamps on every diskless batch"},
		demo.Note{Form: "h", Meaning: "the leader's highest offset in remote storage (highestOffsetInRemoteStorage)"},
		demo.Note{Form: "produce call N", Meaning: "one wal.Writer.Produce call: one object in the store, offsets from the control plane"},
		demo.Note{Form: "prune at h", Meaning: "PruneDisklessLogs: the WAL drops the batches remote storage holds; W moves"})

	cp, err := pebblecp.Open(c.FS, c.FS.PathJoin(c.Dir, "control-plane"), pebblecp.Options{})
	if err != nil {
		return o, err
	}
	defer cp.Close()
	w, err := wal.NewWriter(wal.WriterOptions{Store: c.Store, ControlPlane: cp, CommitInterval: time.Millisecond})
	if err != nil {
		return o, err
	}
	defer w.Close()
	r, err := wal.NewReader(wal.ReaderOptions{Store: c.Store, ControlPlane: cp})
	if err != nil {
		return o, err
	}
	e := &env{Cluster: c, cp: cp, writer: w, reader: r, committed: map[int64][]byte{}}
	parts := &partitions{m: map[remote.TopicIDPartition]entry{}}

	// 1. Classic: A leads epoch 0, B epoch 1 (unreplicated), A epoch 2.
	a, err := c.OpenLog("broker-A")
	if err != nil {
		return o, err
	}
	defer a.Close()
	b, err := c.OpenLog("broker-B")
	if err != nil {
		return o, err
	}
	cLog, err := c.OpenLog("broker-C")
	if err != nil {
		return o, err
	}
	defer cLog.Close()
	if err := e.produceClassic(a, 0, 80); err != nil {
		return o, err
	}
	a.UpdateHighWatermark(a.LogEndOffset())
	for _, f := range []*log.UnifiedLog{b, cLog} {
		if err := (&demo.Fetcher{Cluster: c, Leader: demo.Endpoint{Log: a, Epoch: 0}, Follower: f}).CatchUp(ctx); err != nil {
			return o, err
		}
	}
	if _, err := demo.Produce(b, 1, 20, "B", c.NowMs); err != nil { // nobody fetches it
		return o, err
	}
	if err := e.produceClassic(a, 2, 18); err != nil {
		return o, err
	}
	txn, err := txnBatch(c.NowMs)
	if err != nil {
		return o, err
	}
	if _, err := a.AppendAsLeader(txn, 2, log.OriginClient); err != nil {
		return o, err
	}
	catchUpC := func() error {
		if err := (&demo.Fetcher{Cluster: c, Leader: demo.Endpoint{Log: a, Epoch: 2}, Follower: cLog}).CatchUp(ctx); err != nil {
			return err
		}
		a.UpdateHighWatermark(cLog.LogEndOffset())
		return nil
	}
	if err := catchUpC(); err != nil {
		return o, err
	}
	c.Printf("1. A and C hold [0, %d) in epochs %s (producer %d's transaction open at 98); B (offline) holds [0, %d) in epochs %s",
		a.LogEndOffset(), epochcache.FormatEntries(a.EpochEntries()), txnProducer, b.LogEndOffset(), epochcache.FormatEntries(b.EpochEntries()))

	// 2. The switch on the leader, driven by A's replica driver: its
	// switch steps (seal, proposal, WAL row, phase-2 request) and its
	// pruner's arming follow the deltas the controller commits.
	ctrl := &controller{c: c, leader: tierstate.Leadership{Leader: 1, LeaderEpoch: 2}}
	aMgr, err := c.NewManager(1)
	if err != nil {
		return o, err
	}
	defer aMgr.Close()
	aPruner, err := consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: cp})
	if err != nil {
		return o, err
	}
	aDrv, err := replica.New(replica.Options{Partition: tp, Log: a, Logs: logManager{c, "broker-A"},
		Classic: noClassicFetcher{}, Consolidation: noFetcher{}, Remote: aMgr, BrokerID: 1, Controller: ctrl,
		ControlPlane: cp, Pruner: aPruner, NowMs: func() int64 { return c.NowMs }})
	if err != nil {
		return o, err
	}
	apply := func(drv *replica.Replica, d replica.Delta) (replica.Plan, error) {
		plan, err := drv.Apply(ctx, d)
		if err == nil {
			err = failedStep(drv)
		}
		return plan, err
	}
	if _, err := apply(aDrv, replica.Delta{Leader: true, LeaderEpoch: 2, InIsr: true}); err != nil {
		return o, err
	}
	if ctrl.state, err = (tierstate.State{}).WithConsolidating(true).ArmSwitch(); err != nil {
		return o, err
	}
	c.Printf("2. the controller arms the switch (seal pending); A seals its log:")
	open := openTxns(a)
	plan, err := apply(aDrv, replica.Delta{Leader: true, LeaderEpoch: 2, PartitionEpoch: 1, InIsr: true, State: ctrl.state})
	if err != nil {
		return o, err
	}
	if !plan.Has(replica.Seal) {
		return o, fmt.Errorf("the arming did not seal:\n%s", plan)
	}
	late, err := txnBatch(c.NowMs)
	if err != nil {
		return o, err
	}
	_, err = aDrv.AppendAsLeader(late, 2, log.OriginClient)
	if !errors.Is(err, consolidate.ErrSealPending) {
		return o, fmt.Errorf("a classic append while sealing: %v", err)
	}
	c.Printf("   classic produce: %v (Kafka: REPLICA_NOT_AVAILABLE, the producer retries)", err)
	for _, t := range open {
		if len(openTxns(a)) == 0 {
			c.Printf("   aborted producer %d's transaction from %d: the ABORT marker at %d", t.ProducerID, t.CurrentTxnFirstOffset, a.LogEndOffset()-1)
		}
	}
	c.Printf("   rolled the active segment: the classic log is [0, %d) in closed segments; HW %d < log end %d: wait for C",
		a.LogEndOffset(), a.HighWatermark(), a.LogEndOffset())
	if err := catchUpC(); err != nil {
		return o, err
	}
	// The high watermark reached the log end: the next step proposes.
	if _, err := aDrv.StepSwitch(ctx); err != nil {
		return o, err
	}
	o.sealed = ctrl.state.Seal()
	if plan, err = apply(aDrv, replica.Delta{Leader: true, LeaderEpoch: 2, PartitionEpoch: 2, InIsr: true, State: ctrl.state}); err != nil {
		return o, err
	}
	if !plan.Has(replica.InitDisklessLog) || !plan.Has(replica.ArmPruner) {
		return o, fmt.Errorf("no InitDisklessLog or pruner arming after the seal commit:\n%s", plan)
	}
	info, err := cp.LogInfo(ctx, walTP(tp))
	if err != nil {
		return o, err
	}
	c.Printf("   InitDisklessLog on the control plane: W = %d, HW = S = %d, %d producer state(s) carried over",
		info.LogStartOffset, info.DisklessStartOffset, len(a.ActiveProducers()))
	_, err = aDrv.AppendAsLeader(late, 2, log.OriginClient)
	if !errors.Is(err, consolidate.ErrClassicLogSealed) {
		return o, fmt.Errorf("a classic append after the seal: %v", err)
	}
	c.Printf("   classic produce: %v", err)
	// Diskless produce waits for the phase-2 flag and its diskless epoch.
	if err := aDrv.DisklessProduceAllowed(); !errors.Is(err, consolidate.ErrAwaitingPhaseTwo) {
		return o, fmt.Errorf("a diskless produce in phase 1: %v", err)
	}
	c.Printf("   diskless produce in phase 1: %v", aDrv.DisklessProduceAllowed())

	copied, err := aMgr.RunCopy(ctx, tp)
	if err != nil {
		return o, err
	}
	for _, s := range copied.Copied {
		c.Printf("   A's remote-log manager copied [%d, %d] epochs %s: h = %d", s.StartOffset, s.EndOffset,
			epochcache.FormatEntries(s.SegmentLeaderEpochs), a.HighestOffsetInRemoteStorage())
	}
	// The copy reached S-1: the next step asks for phase 2.
	if _, err := aDrv.StepSwitch(ctx); err != nil {
		return o, err
	}
	if ctrl.state.Phase() != tierstate.PhaseTwo {
		return o, fmt.Errorf("no phase-2 request at h = %d", a.HighestOffsetInRemoteStorage())
	}
	state := ctrl.state
	o.recordedEpoch, o.disklessEpoch = state.LastClassicLeaderEpoch(), state.DisklessLeaderEpoch()
	// The flag commit bumps the leader epoch; A's check keeps its log.
	if _, err := apply(aDrv, replica.Delta{Leader: true, LeaderEpoch: state.DisklessLeaderEpoch(), InIsr: true, State: state}); err != nil {
		return o, err
	}

	// 3. Produce through the WAL (the gate lets it in phase 2), consolidate
	// into A, first prune.
	if err := aDrv.DisklessProduceAllowed(); err != nil {
		return o, fmt.Errorf("diskless produce in phase 2: %w", err)
	}
	for call := range 3 {
		step := "  "
		if call == 0 {
			step = "3."
		}
		if err := e.produceDiskless(ctx, step, call, 20); err != nil {
			return o, err
		}
	}
	parts.set(tp, state, a)
	ep, err := consolidate.NewEndpoint(consolidate.EndpointOptions{ControlPlane: cp, WAL: r, Remote: c.Meta, Partitions: parts})
	if err != nil {
		return o, err
	}
	if err := e.consolidate(ctx, ep, consolidate.FetcherPartition{Partition: tp, Log: a, State: state,
		CurrentLeaderEpoch: state.DisklessLeaderEpoch()}, "A"); err != nil {
		return o, err
	}
	o.aEpochs = epochcache.FormatEntries(a.EpochEntries())
	c.Printf("   A's log: [%d, %d), epochs %s", a.LogStartOffset(), a.LogEndOffset(), o.aEpochs)
	if o.firstPruneW, err = e.prune(ctx, aPruner, aDrv, "A"); err != nil {
		return o, err
	}

	// 4. pull/857's first example: B is back and leads epoch 5.
	bMgr, err := c.NewManager(2)
	if err != nil {
		return o, err
	}
	defer bMgr.Close()
	if err := bMgr.OnLeadershipChange(nil, []remote.Partition{{TopicIDPartition: tp, Log: b}}); err != nil {
		return o, err
	}
	o.bBefore = epochcache.FormatEntries(b.EpochEntries())
	c.Printf("4. B is back and leads epoch %d: its log [%d, %d), epochs %s", bLeaderEpoch, b.LogStartOffset(), b.LogEndOffset(), o.bBefore)
	// B's replica driver applies the delta: the check, the recreate, the
	// new empty log and the leadership; no pruner arming below the seal.
	bPruner, err := consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: cp})
	if err != nil {
		return o, err
	}
	var recreate replica.Event
	bDrv, err := replica.New(replica.Options{Partition: tp, Log: b, Logs: logManager{c, "broker-B"},
		Classic: noClassicFetcher{}, Consolidation: noFetcher{}, Remote: bMgr, Pruner: bPruner,
		OnEvent: func(ev replica.Event) {
			if ev.Action.Kind == replica.CheckReplica {
				recreate = ev
			}
		}})
	if err != nil {
		return o, err
	}
	if plan, err = apply(bDrv, replica.Delta{Leader: true, LeaderEpoch: bLeaderEpoch, InIsr: true, State: state}); err != nil {
		return o, err
	}
	c.Printf("   replica check: %s", recreate.Check)
	if recreate.Recreate.Outcome != tierstate.Recreated || plan.Has(replica.ArmPruner) {
		return o, fmt.Errorf("B was not recreated, or armed below the seal:\n%s", plan)
	}
	b = bDrv.Log().(*log.UnifiedLog)
	defer b.Close()
	parts.set(tp, state, b)
	ans, err := ep.Fetch(ctx, []consolidate.FetchPartition{{Partition: tp, Offset: b.LogEndOffset()}})
	if err != nil {
		return o, err
	}
	c.Printf("   B's new log is empty; the endpoint answers its consolidation fetch at 0 with %s", ans[0].Code)
	var rebuilds []tierstate.RebuildResult
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: c.Meta, Data: c.Storage,
		Listener: tierstate.MachineListener{RebuildFinished: func(res tierstate.RebuildResult, err error) {
			if err == nil {
				rebuilds = append(rebuilds, res)
			}
		}}})
	if err != nil {
		return o, err
	}
	if err := e.consolidateWith(ctx, ep, m, consolidate.FetcherPartition{Partition: tp, Log: b, State: state,
		CurrentLeaderEpoch: bLeaderEpoch}, "B", func(leo int64) {
		if len(rebuilds) == 1 && o.bRebuiltAt == 0 {
			o.bRebuiltAt, o.bRebuilt = rebuilds[0].NextOffset, epochcache.FormatEntries(b.EpochEntries())
			c.Printf("   %s", strings.ReplaceAll(rebuilds[0].String(), "\n", "; "))
			c.Printf("   B's log now starts at %d (log start %d), epochs %s; consolidation resumes at %d",
				b.LocalLogStartOffset(), b.LogStartOffset(), o.bRebuilt, leo)
		}
	}); err != nil {
		return o, err
	}
	o.bEpochs = epochcache.FormatEntries(b.EpochEntries())
	c.Printf("   B's log: [%d, %d), epochs %s", b.LocalLogStartOffset(), b.LogEndOffset(), o.bEpochs)
	if err := b.Roll(); err != nil {
		return o, err
	}
	if copied, err = bMgr.RunCopy(ctx, tp); err != nil {
		return o, err
	}
	for _, s := range copied.Copied {
		c.Printf("   B's remote-log manager copied [%d, %d] epochs %s: h = %d", s.StartOffset, s.EndOffset,
			epochcache.FormatEntries(s.SegmentLeaderEpochs), b.HighestOffsetInRemoteStorage())
	}
	// B's log reached the seal with the rebuild: the step after the copy
	// arms its pruner.
	if plan, err = bDrv.StepSwitch(ctx); err != nil || !plan.Has(replica.ArmPruner) {
		return o, fmt.Errorf("B's pruner not armed after the rebuild: %v\n%s", err, plan)
	}
	if o.pruneW, err = e.prune(ctx, bPruner, bDrv, "B"); err != nil {
		return o, err
	}
	c.NowMs += 10
	if _, err := b.DeleteOldSegments(); err != nil {
		return o, err
	}

	// 5. Read everything back.
	if err := e.produceDiskless(ctx, "5.", 3, 20); err != nil {
		return o, err
	}
	if o.read, err = e.readBack(ctx, b, bMgr); err != nil {
		return o, err
	}
	info, err = cp.LogInfo(ctx, walTP(tp))
	if err != nil {
		return o, err
	}
	o.walStart = info.LogStartOffset
	c.Printf("   read back through B from 0 to %d: %d records from remote storage, %d from B's log, %d from the WAL (W = %d); "+
		"each is the partition's committed record at its offset, B's epoch-1 records [80, 100) are not among them",
		info.HighWatermark, o.read["remote"], o.read["local"], o.read["wal"], info.LogStartOffset)

	// 6. pull/855's seal-lowering prune on orders-1.
	if o.lowered, err = e.sealLowering(ctx); err != nil {
		return o, err
	}
	return o, nil
}

// produceClassic appends n single-record batches as leader in epoch.
func (e *env) produceClassic(l *log.UnifiedLog, epoch int32, n int) error {
	got, err := demo.Produce(l, epoch, n, "A", e.NowMs)
	for k, v := range got {
		e.committed[k] = v
	}
	return err
}

// txnBatch is producer 7's transactional record, never committed.
func txnBatch(nowMs int64) ([]byte, error) {
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = txnProducer, 0, 0, true
	b := record.NewBuilder(opts)
	b.Add(nowMs, nil, []byte("txn-98"))
	return b.Build()
}

// produceDiskless produces one batch of n records "W<call>-<i>" through
// the WAL.
func (e *env) produceDiskless(ctx context.Context, step string, call, n int) error {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(e.NowMs, nil, fmt.Appendf(nil, "W%d-%d", call, i))
	}
	buf, err := b.Build()
	if err != nil {
		return err
	}
	res, err := e.writer.Produce(ctx, []wal.ProduceRequest{{Partition: walTP(demo.Partition), Batches: buf}})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	base := res[0].Batches[0].BaseOffset
	for i := range n {
		e.committed[base+int64(i)] = fmt.Appendf(nil, "W%d-%d", call, i)
	}
	e.Printf("%s produce call %d: %d records through the WAL at [%d, %d)", step, call, n, base, base+int64(n))
	return nil
}

// consolidate runs a consolidation fetcher for one partition until it is
// caught up with the WAL.
func (e *env) consolidate(ctx context.Context, ep *consolidate.Endpoint, p consolidate.FetcherPartition, who string) error {
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: e.Meta, Data: e.Storage})
	if err != nil {
		return err
	}
	return e.consolidateWith(ctx, ep, m, p, who, nil)
}

func (e *env) consolidateWith(ctx context.Context, ep *consolidate.Endpoint, m *tierstate.Machine,
	p consolidate.FetcherPartition, who string, afterStep func(leo int64)) error {
	f, err := consolidate.NewFetcher(consolidate.FetcherOptions{Endpoint: ep, Machine: m, Clock: stillClock{}})
	if err != nil {
		return err
	}
	if err := f.Add(p); err != nil {
		return err
	}
	from := p.Log.LogEndOffset()
	for range 100 {
		n, err := f.Step(ctx)
		if err != nil {
			return err
		}
		if err := f.Failed(p.Partition); err != nil {
			return err
		}
		if n == 0 {
			fm := f.Metrics()
			e.Printf("   %s's consolidation fetcher: from %d to %d, %d append(s) stamped E_d = %d, %d rebuild(s)",
				who, from, p.Log.LogEndOffset(), fm.Appends, p.State.DisklessLeaderEpoch(), fm.Rebuilds)
			return nil
		}
		if afterStep != nil {
			afterStep(p.Log.LogEndOffset())
		}
	}
	return fmt.Errorf("%s's consolidation did not catch up", who)
}

// prune runs one pruner round for the partition a leader's driver
// hands over (the driver armed the pruner at S-1).
func (e *env) prune(ctx context.Context, p *consolidate.Pruner, drv *replica.Replica, who string) (int64, error) {
	part, ok := drv.PrunePartition()
	if !ok {
		return 0, fmt.Errorf("%s: the driver has no partition to prune", who)
	}
	out, err := p.Run(ctx, []consolidate.PrunePartition{part})
	if err != nil {
		return 0, err
	}
	if out[0].Err != nil {
		return 0, out[0].Err
	}
	if !out[0].Decision.Prune() {
		return 0, fmt.Errorf("%s: no prune: %v", who, out[0].Decision)
	}
	e.Printf("   %s's pruner: prune at h = %d (floor %d, log end %d): W = %d", who,
		out[0].Decision.HighestTieredOffset, consolidate.InitialFloor(part.State.Seal()), part.Log.LogEndOffset(), out[0].LogStartOffset)
	return out[0].LogStartOffset, nil
}

// readBack reads every record from 0 to the WAL's high watermark through
// the tier that holds it: remote storage below B's local log start, B's
// log up to its end, the WAL after it. It checks each against the
// committed records and returns how many each tier served.
func (e *env) readBack(ctx context.Context, l *log.UnifiedLog, mgr *remote.Manager) (map[string]int, error) {
	info, err := e.cp.LogInfo(ctx, walTP(demo.Partition))
	if err != nil {
		return nil, err
	}
	got := map[int64][]byte{}
	counts := map[string]int{}
	for off := int64(0); off < info.HighWatermark; {
		var data []byte
		var tier string
		switch {
		case off < l.LocalLogStartOffset():
			tier = "remote"
			res, err := mgr.Read(ctx, demo.Partition, off, 64<<10, log.IsolationLogEnd, true)
			if err != nil {
				return nil, fmt.Errorf("remote read at %d: %w", off, err)
			}
			data = res.Records
		case off < l.LogEndOffset():
			tier = "local"
			fd, err := l.Read(nil, off, 64<<10, log.IsolationLogEnd, true)
			if err != nil {
				return nil, fmt.Errorf("read at %d: %w", off, err)
			}
			data = fd.Records
		default:
			tier = "wal"
			res, err := e.reader.Fetch(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
				{Partition: walTP(demo.Partition), Offset: off, MaxPartitionBytes: 1 << 20}}})
			if err != nil {
				return nil, err
			}
			if res[0].Err != nil {
				return nil, fmt.Errorf("WAL read at %d: %w", off, res[0].Err)
			}
			data = res[0].Records
		}
		next, err := collect(data, off, got, func() { counts[tier]++ })
		if err != nil {
			return nil, fmt.Errorf("%s read at %d: %w", tier, off, err)
		}
		off = next
	}
	for k, v := range e.committed {
		if !bytes.Equal(got[k], v) {
			return nil, fmt.Errorf("read %q at %d, the partition committed %q", got[k], k, v)
		}
	}
	if len(got) != len(e.committed)+1 { // + the aborted record at 98
		return nil, fmt.Errorf("read %d records, the partition committed %d and one aborted", len(got), len(e.committed))
	}
	if string(got[98]) != "txn-98" {
		return nil, fmt.Errorf("at 98: %q, want the aborted txn-98", got[98])
	}
	return counts, nil
}

// collect adds the data records of batches at or after off to got and
// returns the offset after the last batch. Control batches (the ABORT
// marker) hold no data.
func collect(batches []byte, off int64, got map[int64][]byte, count func()) (int64, error) {
	if len(batches) == 0 {
		return off, fmt.Errorf("no records")
	}
	it := record.NewIter(record.IterOptions{})
	next := off
	for len(batches) > 0 {
		b, err := record.ReadBatch(batches)
		if err != nil {
			return off, err
		}
		if !b.IsControl() {
			for it.Reset(b); it.Next(); {
				if r := it.Record(); r.Offset >= off {
					got[r.Offset] = slices.Clone(r.Value)
					count()
				}
			}
			if err := it.Err(); err != nil {
				return off, err
			}
		}
		next = b.NextOffset()
		batches = batches[b.Size():]
	}
	return next, nil
}

// sealLowering is pull/855's worked example on orders-1: a last-known
// leader lost [600, 1000) of a partition sealed at 1000; remote storage
// holds [0, 599]; the operator starts phase 2 at 600; the prune at 599
// moves W to 600, where remote storage ends, not to the WAL's first batch
// at 1000.
func (e *env) sealLowering(ctx context.Context) (int64, error) {
	tp := demo.Partition
	tp.Partition = 1
	dir := e.FS.PathJoin(e.Dir, "broker-A", "orders-1")
	if err := e.FS.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	l, err := log.Open(dir, log.Options{FS: e.FS, RemoteStorageEnabled: true, SegmentBytes: 16 << 10,
		Now: func() time.Time { return time.UnixMilli(e.NowMs) }})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	for i := range 6 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for j := range 100 {
			b.Add(e.NowMs, nil, fmt.Appendf(nil, "o1-%d", 100*i+j))
		}
		buf, err := b.Build()
		if err != nil {
			return 0, err
		}
		if _, err := l.AppendAsLeader(buf, 0, log.OriginClient); err != nil {
			return 0, err
		}
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		return 0, err
	}
	mgr, err := e.NewManager(1)
	if err != nil {
		return 0, err
	}
	defer mgr.Close()
	if err := mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: l}}, nil); err != nil {
		return 0, err
	}
	copied, err := mgr.RunCopy(ctx, tp)
	if err != nil {
		return 0, err
	}
	if len(copied.Copied) != 1 {
		return 0, fmt.Errorf("orders-1: copied %d segments", len(copied.Copied))
	}
	s, err := (tierstate.State{}).WithConsolidating(true).ArmSwitch()
	if err == nil {
		s, err = s.CommitSeal(1000, nil)
	}
	if err != nil {
		return 0, err
	}
	if _, err := e.cp.InitDisklessLog(ctx, []wal.InitDisklessLogRequest{{Partition: walTP(tp), Topic: tp.Topic,
		LogStartOffset: 0, DisklessStartOffset: 1000}}); err != nil {
		return 0, err
	}
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(e.NowMs, nil, []byte("o1-1000"))
	buf, err := b.Build()
	if err != nil {
		return 0, err
	}
	res, err := e.writer.Produce(ctx, []wal.ProduceRequest{{Partition: walTP(tp), Batches: buf}})
	if err != nil || res[0].Err != nil {
		return 0, errors.Join(err, res[0].Err)
	}
	e.Printf("6. orders-1 (github.com/aiven/inkless/pull/855): sealed at 1000, the WAL's first batch at %d; "+
		"a last-known leader holds only [0, %d), remote storage [%d, %d]: [600, 1000) exists nowhere",
		res[0].Batches[0].BaseOffset, l.LogEndOffset(), copied.Copied[0].StartOffset, copied.Copied[0].EndOffset)
	// R is the epoch of the remote record at the new seal - 1, as
	// kafka-topic-switch.sh start-phase-2 records it from the replicas'
	// descriptions (tierstate.PlanStartPhaseTwo).
	seg := copied.Copied[0]
	r := seg.SegmentLeaderEpochs[len(seg.SegmentLeaderEpochs)-1].Epoch
	if s, err = s.StartPhaseTwo(600, r, 3); err != nil {
		return 0, err
	}
	if _, err := e.cp.RepairDisklessLog(ctx, []wal.RepairDisklessLogRequest{{Partition: walTP(tp), DisklessStartOffset: 600}}); err != nil {
		return 0, err
	}
	e.Printf("   the operator starts phase 2 with the seal lowered to %d (and repairs S in the control plane)", s.Seal())
	p, err := consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: e.cp})
	if err != nil {
		return 0, err
	}
	p.Arm(tp, s.Seal())
	out, err := p.Run(ctx, []consolidate.PrunePartition{{Partition: tp, State: s, Log: l}})
	if err != nil {
		return 0, err
	}
	if out[0].Err != nil || !out[0].Decision.Prune() {
		return 0, fmt.Errorf("orders-1: prune %v: %v", out[0].Decision, out[0].Err)
	}
	e.Printf("   prune at h = %d: W = %d (capped at h + 1; uncapped it would jump to the first batch at 1000, "+
		"and a rebuild would need 999, which nobody has)", out[0].Decision.HighestTieredOffset, out[0].LogStartOffset)
	return out[0].LogStartOffset, nil
}

// controller is the in-process controller: it commits the leader's
// requests with the tierstate rules and narrates them.
type controller struct {
	c      *demo.Cluster
	state  tierstate.State
	leader tierstate.Leadership
}

func (c *controller) ProposeSeal(_ context.Context, _ remote.TopicIDPartition, epoch int32, p consolidate.SealProposal) error {
	s, err := c.state.CommitSealProposal(p)
	if err != nil {
		return err
	}
	c.state = s
	c.c.Printf("   A proposes S = %d in epoch %d with %d producer state(s); the controller commits it: %s", p.Seal, epoch, len(p.Producers), s)
	return nil
}

func (c *controller) SetClassicPrefixInRemoteStorage(_ context.Context, _ remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	s, err := c.state.SetClassicPrefixInRemoteStorage(req, c.leader)
	if err != nil {
		return err
	}
	c.state = s
	c.c.Printf("   h >= S - 1: A sends SetClassicPrefixInRemoteStorage with R = %d; the controller commits phase 2: %s",
		req.LastClassicLeaderEpoch, s)
	return nil
}

// partitions is the broker's view of its partitions for the endpoint.
type partitions struct {
	m map[remote.TopicIDPartition]entry
}

type entry struct {
	s tierstate.State
	l consolidate.LocalLog
}

func (p *partitions) set(tp remote.TopicIDPartition, s tierstate.State, l consolidate.LocalLog) {
	p.m[tp] = entry{s, l}
}

func (p *partitions) Partition(tp remote.TopicIDPartition) (tierstate.State, consolidate.LocalLog, bool) {
	e, ok := p.m[tp]
	return e.s, e.l, ok
}

// stillClock never moves: a caught-up partition waits for ever, which
// ends a fetcher loop.
type stillClock struct{}

func (stillClock) Now() time.Time                                { return time.Unix(0, 0) }
func (stillClock) AfterFunc(d time.Duration, f func()) wal.Timer { return time.AfterFunc(d, f) }

func walTP(tp remote.TopicIDPartition) wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: wal.TopicID(tp.TopicID), Partition: tp.Partition}
}
