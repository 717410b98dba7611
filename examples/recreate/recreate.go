package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

const (
	seal          = 100
	recordedEpoch = 2 // A's epoch at seal - 1
	bLeaderEpoch  = 5 // the delta that makes B leader in phase 2
)

func recreate(ctx context.Context, c *demo.Cluster, store string) (outcome, error) {
	tp := demo.Partition
	var o outcome
	c.Printf("tierlog recreate example (the first case of https://github.com/aiven/inkless/pull/857): partition %s, remote tier on a %s", tp, store)
	c.Legend(demo.NotePartitionName, demo.NoteHalfOpen, demo.NoteClosed, demo.NoteEpochAt, demo.NoteOffsets,
		demo.NoteMovedToTiered,
		demo.Note{Form: "A, B, C", Meaning: "three brokers with a replica of the partition"},
		demo.Note{Form: "phase-2 seal=S recorded-epoch=R diskless-epoch=D", Meaning: "the switch state: classic records end " +
			"at the seal S, R is the leader epoch of the record at S-1, diskless records from S on carry epoch D; " +
			"consolidating: brokers also append the diskless records to their local logs"},
		demo.Note{Form: "check: recreate: C (detail)", Meaning: "the replica check failed condition C " +
			"(epoch-at-seal: the replica's epoch at S-1 is not R)"},
		demo.Note{Form: "fetchers-stopped=... future-deleted=...", Meaning: "the recreate's steps: fetchers stopped, " +
			"remote tasks cancelled, current and future logs deleted (true: done, or nothing to do)"},
		demo.Note{Form: "target E@O in segment [a, b]", Meaning: "the rebuild reads the remote segment holding O = S-1, in epoch E"})
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

	// Epoch 0: A leads and writes [0, 80); B and C replicate.
	committed, err := demo.Produce(a, 0, 80, "A", c.NowMs)
	if err != nil {
		return o, err
	}
	a.UpdateHighWatermark(a.LogEndOffset())
	for _, f := range []*log.UnifiedLog{b, cLog} {
		if err := (&demo.Fetcher{Cluster: c, Leader: demo.Endpoint{Log: a, Epoch: 0}, Follower: f}).CatchUp(ctx); err != nil {
			return o, err
		}
	}
	// Epoch 1: B leads and writes [80, 100); nobody fetches it; B goes
	// offline.
	if _, err := demo.Produce(b, 1, 20, "B", c.NowMs); err != nil {
		return o, err
	}
	// Epoch 2: A leads and writes its own [80, 100); C replicates.
	more, err := demo.Produce(a, recordedEpoch, 20, "A", c.NowMs)
	if err != nil {
		return o, err
	}
	for k, v := range more {
		committed[k] = v
	}
	if err := (&demo.Fetcher{Cluster: c, Leader: demo.Endpoint{Log: a, Epoch: recordedEpoch}, Follower: cLog}).CatchUp(ctx); err != nil {
		return o, err
	}
	a.UpdateHighWatermark(a.LogEndOffset())
	c.Printf("1. A and C hold [0, 100) in epochs %s; B (offline) holds [0, 100) in epochs %s",
		epochcache.FormatEntries(a.EpochEntries()), epochcache.FormatEntries(b.EpochEntries()))

	// The switch: seal at 100, A uploads the classic prefix, phase 2 with
	// lastClassicLeaderEpoch = 2.
	st, err := tierstate.State{}.ArmSwitch()
	if err == nil {
		st, err = st.CommitSeal(seal, nil)
	}
	if err != nil {
		return o, err
	}
	if err := a.Roll(); err != nil {
		return o, err
	}
	aMgr, err := c.NewManager(1)
	if err != nil {
		return o, err
	}
	defer aMgr.Close()
	if err := aMgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: a}}, nil); err != nil {
		return o, err
	}
	copyRun, err := aMgr.RunCopy(ctx, tp)
	if err != nil {
		return o, err
	}
	segs := copyRun.Copied
	for _, s := range segs {
		c.Printf("2. A sealed at %d and uploaded [%d, %d] epochs %s", seal, s.StartOffset, s.EndOffset, epochcache.FormatEntries(s.SegmentLeaderEpochs))
	}
	st, err = st.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: recordedEpoch, Seal: seal, LastClassicLeaderEpoch: recordedEpoch},
		tierstate.Leadership{Leader: 1, LeaderEpoch: recordedEpoch})
	if err != nil {
		return o, err
	}
	st = st.WithConsolidating(true)
	c.Printf("   switch state: %s", st)
	// Diskless records from the seal on, consolidated into A's log in the
	// diskless epoch; A's tiered prefix leaves its disk.
	diskless, err := demo.Produce(a, st.DisklessLeaderEpoch(), 20, "diskless", c.NowMs)
	if err != nil {
		return o, err
	}
	for k, v := range diskless {
		committed[k] = v
	}
	a.UpdateHighWatermark(a.LogEndOffset())
	c.NowMs += 10
	if _, err := a.DeleteOldSegments(); err != nil {
		return o, err
	}
	c.Printf("   A consolidated diskless records [%d, %d) in epoch %d; its local log starts at %d",
		seal, a.LogEndOffset(), st.DisklessLeaderEpoch(), a.LocalLogStartOffset())

	// 3. B comes back; the delta makes it leader in epoch 5.
	bMgr, err := c.NewManager(2)
	if err != nil {
		return o, err
	}
	defer bMgr.Close()
	if err := bMgr.OnLeadershipChange(nil, []remote.Partition{{TopicIDPartition: tp, Log: b}}); err != nil {
		return o, err
	}
	o.beforeEpochs = epochcache.FormatEntries(b.EpochEntries())
	c.Printf("3. B is back. Before: log [%d, %d), epochs %s, value at 80 %q",
		b.LogStartOffset(), b.LogEndOffset(), o.beforeEpochs, readValue(b, 80))
	// The broker's replica driver applies the delta: the check, the
	// recreate, the new empty log and the leadership change.
	driver, err := replica.New(replica.Options{Partition: tp, Log: b, Logs: logManager{c}, Classic: classicFetcher{},
		Consolidation: fetchers{c}, Remote: bMgr, OnEvent: func(e replica.Event) {
			c.Printf("   %s", e)
			for _, f := range e.Check.Failures {
				o.failures = append(o.failures, f.String())
			}
			if e.Action.Kind == replica.CheckReplica {
				c.Printf("   recreate: %s", e.Recreate)
			}
		}})
	if err != nil {
		return o, err
	}
	c.Printf("   delta: B leads epoch %d", bLeaderEpoch)
	plan, err := driver.Apply(ctx, replica.Delta{Leader: true, LeaderEpoch: bLeaderEpoch, InIsr: true, State: st})
	if err != nil {
		return o, err
	}
	if !plan.Has(replica.CheckReplica) || len(o.failures) == 0 {
		return o, fmt.Errorf("B was not recreated:\n%s", plan)
	}

	// 4. The leadership change created an empty log; the consolidation
	// fetch sends it to remote storage; the phase-2 rebuild restores the
	// committed prefix's state at the seal.
	b = driver.Log().(*log.UnifiedLog)
	defer b.Close()
	source := demo.Endpoint{Log: a, Epoch: st.DisklessLeaderEpoch()}
	m, err := c.NewMachine(source)
	if err != nil {
		return o, err
	}
	c.Printf("4. B's new log is empty; consolidation fetch at 0:")
	f := demo.Fetcher{Cluster: c, Leader: source, Follower: b, Machine: m, State: st}
	if err := f.CatchUp(ctx); err != nil {
		return o, err
	}
	if len(f.Rebuilds) != 1 {
		return o, fmt.Errorf("expected one rebuild, got %d", len(f.Rebuilds))
	}
	o.rebuiltAt = f.Rebuilds[0].NextOffset
	o.afterEpochs = epochcache.FormatEntries(b.EpochEntries())
	o.logStart, o.localLogStart = b.LogStartOffset(), b.LocalLogStartOffset()

	// 5. B serves A's records: [0, 100) from remote storage, then the
	// diskless records from its log.
	got, fromRemote, err := demo.ReadAll(ctx, b, bMgr)
	if err != nil {
		return o, err
	}
	for k, v := range committed {
		if !bytes.Equal(got[k], v) {
			return o, fmt.Errorf("B serves %q at %d, the partition committed %q", got[k], k, v)
		}
	}
	if len(got) != len(committed) {
		return o, fmt.Errorf("B serves %d records, the partition committed %d", len(got), len(committed))
	}
	o.value80, o.value99 = string(got[80]), string(got[99])
	c.Printf("5. After: log start %d, local log start %d, log end %d, epochs %s (rebuilt at %d with the epochs below the seal)",
		o.logStart, o.localLogStart, b.LogEndOffset(), o.afterEpochs, o.rebuiltAt)
	c.Printf("   B serves the partition's %d committed records (%d from remote storage): value at 80 %q, at 99 %q",
		len(got), fromRemote, o.value80, o.value99)
	return o, nil
}

// logManager stands in for the broker's log manager: B's log directory.
type logManager struct{ c *demo.Cluster }

func (m logManager) CreateLog(context.Context, remote.TopicIDPartition) (replica.Log, error) {
	return m.c.OpenLog("broker-B")
}

func (logManager) DeleteLog(_ context.Context, _ remote.TopicIDPartition, l replica.Log) error {
	return l.Delete()
}

func (logManager) DeleteFutureLog(context.Context, remote.TopicIDPartition) error { return nil }

// classicFetcher and fetchers stand in for the broker's fetcher
// managers; step 4 runs the consolidation fetch by hand (demo.Fetcher).
type classicFetcher struct{}

func (classicFetcher) AddPartition(context.Context, remote.TopicIDPartition, int32, int64) error {
	return nil
}

func (classicFetcher) RemovePartition(context.Context, remote.TopicIDPartition) error { return nil }

type fetchers struct{ c *demo.Cluster }

func (fetchers) AddPartition(context.Context, replica.ConsolidationStart) error { return nil }

func (fetchers) RemovePartition(context.Context, remote.TopicIDPartition) error { return nil }

// readValue returns the value of the record at offset in l's local log.
func readValue(l *log.UnifiedLog, offset int64) string {
	fd, err := l.Read(nil, offset, 1, log.IsolationLogEnd, true)
	if err != nil || len(fd.Records) == 0 {
		return fmt.Sprintf("(none: %v)", err)
	}
	v, err := demo.ValueAt(fd.Records, offset)
	if err != nil {
		return err.Error()
	}
	return string(v)
}
