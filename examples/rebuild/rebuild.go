package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

func rebuild(ctx context.Context, c *demo.Cluster, store string, perEpoch int) (outcome, error) {
	tp := demo.Partition
	c.Printf("tierlog rebuild example: partition %s, remote tier on a %s", tp, store)
	c.Legend(demo.NotePartitionName, demo.NoteHalfOpen, demo.NoteClosed, demo.NoteEpochAt, demo.NoteOffsets,
		demo.NoteMovedToTiered, demo.NoteOffsetsForLeaderEpoch,
		demo.Note{Form: "leader local log start E@O", Meaning: "the leader's first local offset O and its epoch E"},
		demo.Note{Form: "target E@O in segment [a, b]", Meaning: "the rebuild reads the remote segment holding O, " +
			"the last offset below the leader's local log start, in epoch E"})

	// 1. The leader writes three epochs; the follower replicates.
	leader, err := c.OpenLog("broker-1")
	if err != nil {
		return outcome{}, err
	}
	defer leader.Close()
	follower, err := c.OpenLog("broker-2")
	if err != nil {
		return outcome{}, err
	}
	written := map[int64][]byte{}
	var lastEpoch int32
	for _, epoch := range []int32{0, 1, 3} {
		lastEpoch = epoch
		values, err := demo.Produce(leader, epoch, perEpoch, fmt.Sprintf("epoch%d", epoch), c.NowMs)
		if err != nil {
			return outcome{}, err
		}
		for o, v := range values {
			written[o] = v
		}
		f := demo.Fetcher{Cluster: c, Leader: demo.Endpoint{Log: leader, Epoch: epoch}, Follower: follower}
		if err := f.CatchUp(ctx); err != nil {
			return outcome{}, err
		}
		leader.UpdateHighWatermark(leader.LogEndOffset())
		if err := f.CatchUp(ctx); err != nil { // the follower learns the new high watermark
			return outcome{}, err
		}
	}
	if err := leader.Roll(); err != nil {
		return outcome{}, err
	}
	segs, err := leader.Segments(0)
	if err != nil {
		return outcome{}, err
	}
	c.Printf("1. leader wrote offsets [0, %d) in epochs %s, in %d segments; follower replicated to %d",
		leader.LogEndOffset(), epochcache.FormatEntries(leader.EpochEntries()), len(segs), follower.LogEndOffset())

	// 2. The leader tiers its rolled segments and deletes them locally.
	leaderMgr, err := c.NewManager(1)
	if err != nil {
		return outcome{}, err
	}
	defer leaderMgr.Close()
	if err := leaderMgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: leader}}, nil); err != nil {
		return outcome{}, err
	}
	run, err := leaderMgr.RunCopy(ctx, tp)
	if err != nil {
		return outcome{}, err
	}
	remoteSegs := run.Copied
	c.Printf("2. leader copied %d segments to remote storage (highest remote offset %d):", len(remoteSegs), leader.HighestOffsetInRemoteStorage())
	for _, s := range remoteSegs {
		c.Printf("     [%d, %d] epochs %s, %d bytes", s.StartOffset, s.EndOffset, epochcache.FormatEntries(s.SegmentLeaderEpochs), s.SizeBytes)
	}
	c.NowMs += 10
	deleted, err := leader.DeleteOldSegments()
	if err != nil {
		return outcome{}, err
	}
	c.Printf("   local retention deleted %d of the leader's segments: log start %d, local log start %d, log end %d",
		deleted, leader.LogStartOffset(), leader.LocalLogStartOffset(), leader.LogEndOffset())

	// 3. The follower loses its disk.
	if err := follower.Delete(); err != nil {
		return outcome{}, err
	}
	follower, err = c.OpenLog("broker-2")
	if err != nil {
		return outcome{}, err
	}
	defer follower.Close()
	c.Printf("3. follower lost its log; it starts empty at %d", follower.LogEndOffset())
	more, err := demo.Produce(leader, lastEpoch, perEpoch/2, fmt.Sprintf("epoch%d", lastEpoch), c.NowMs)
	if err != nil {
		return outcome{}, err
	}
	for o, v := range more {
		written[o] = v
	}
	c.Printf("   meanwhile the leader writes [%d, %d) in epoch %d, kept on its disk", leader.LocalLogStartOffset(), leader.LogEndOffset(), lastEpoch)

	// 4. The follower fetches; the leader sends it to tiered storage; the
	// tier state machine rebuilds it; it fetches the rest.
	ep := demo.Endpoint{Log: leader, Epoch: lastEpoch}
	m, err := c.NewMachine(ep)
	if err != nil {
		return outcome{}, err
	}
	f := demo.Fetcher{Cluster: c, Leader: ep, Follower: follower, Machine: m, State: tierstate.State{}}
	c.Printf("4. follower fetches at 0:")
	if err := f.CatchUp(ctx); err != nil {
		return outcome{}, err
	}
	if len(f.Rebuilds) != 1 {
		return outcome{}, fmt.Errorf("expected one rebuild, got %d", len(f.Rebuilds))
	}
	r := f.Rebuilds[0]
	leader.UpdateHighWatermark(leader.LogEndOffset())
	if err := f.CatchUp(ctx); err != nil {
		return outcome{}, err
	}
	c.Printf("   follower caught up: log start %d, local log start %d, log end %d, high watermark %d, epochs %s",
		follower.LogStartOffset(), follower.LocalLogStartOffset(), follower.LogEndOffset(), follower.HighWatermark(),
		epochcache.FormatEntries(follower.EpochEntries()))

	// 5. Read everything back through the follower.
	followerMgr, err := c.NewManager(2)
	if err != nil {
		return outcome{}, err
	}
	defer followerMgr.Close()
	if err := followerMgr.OnLeadershipChange(nil, []remote.Partition{{TopicIDPartition: tp, Log: follower}}); err != nil {
		return outcome{}, err
	}
	got, fromRemote, err := demo.ReadAll(ctx, follower, followerMgr)
	if err != nil {
		return outcome{}, err
	}
	if len(got) != len(written) {
		return outcome{}, fmt.Errorf("read %d records back, wrote %d", len(got), len(written))
	}
	for o, v := range written {
		if !bytes.Equal(got[o], v) {
			return outcome{}, fmt.Errorf("offset %d reads %q, was written %q", o, got[o], v)
		}
	}
	le, fe := epochcache.FormatEntries(leader.EpochEntries()), epochcache.FormatEntries(follower.EpochEntries())
	if le != fe {
		return outcome{}, fmt.Errorf("follower epochs %s, leader's %s", fe, le)
	}
	c.Printf("5. verified all %d records through the follower: %d from remote storage below its local log start %d, %d from its own log; its epochs %s match the leader's",
		len(got), fromRemote, follower.LocalLogStartOffset(), len(got)-fromRemote, fe)
	return outcome{records: len(got), fromRemote: fromRemote, rebuiltAt: r.NextOffset, epochs: fe}, nil
}
