package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCurrentLeaderEpochError is Kafka's Partition.validateCurrentLeaderEpoch
// for a leader in epoch 3.
func TestCurrentLeaderEpochError(t *testing.T) {
	for _, c := range []struct {
		current int32
		want    int16
	}{
		{-1, 0}, // the client does not know: not checked
		{3, 0},
		{2, kerr.FencedLeaderEpoch.Code},
		{0, kerr.FencedLeaderEpoch.Code},
		{4, kerr.UnknownLeaderEpoch.Code},
	} {
		require.Equal(t, c.want, currentLeaderEpochError(c.current, 3), "current %d", c.current)
	}
}

// TestOffsetForLeaderEpoch: the end offset of the broker's epoch is the
// log end offset, also on a partition with no record yet (the broker
// assumed leadership of it in its epoch, as Metadata says); an epoch
// above it is (-1, -1) with no error, as Kafka's leader-epoch cache
// answers; the CurrentLeaderEpoch is checked first; a partition that
// does not exist is UNKNOWN_TOPIC_OR_PARTITION.
func TestOffsetForLeaderEpoch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(ctx, t, cl, testTopic)
	produceAt(ctx, t, cl, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) // 10 records to partition 0
	_, b := rawBroker(ctx, t, s)

	type row struct {
		topic                     string
		partition, current, epoch int32
		wantCode                  int16
		wantEpoch                 int32
		wantEnd                   int64
	}
	rows := []row{
		{testTopic, 0, -1, 0, 0, 0, 10},
		{testTopic, 0, 0, 0, 0, 0, 10},
		{testTopic, 1, 0, 0, 0, 0, 0}, // no record yet
		{testTopic, 0, -1, 1, 0, -1, -1},
		{testTopic, 0, -1, -1, 0, -1, -1},
		{testTopic, 0, 1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{testTopic, 0, -2, 0, kerr.FencedLeaderEpoch.Code, -1, -1},
		{testTopic, testPartitions, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
		{"no-such-topic", 0, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	for _, r := range rows {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = r.topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = r.partition, r.current, r.epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Equal(t, int16(4), resp.Version)
	require.Len(t, resp.Topics, len(rows))
	for i, r := range rows {
		rt := resp.Topics[i]
		require.Equal(t, r.topic, rt.Topic)
		require.Len(t, rt.Partitions, 1)
		p := rt.Partitions[0]
		got := row{rt.Topic, p.Partition, r.current, r.epoch, p.ErrorCode, p.LeaderEpoch, p.EndOffset}
		require.Equal(t, r, got, "row %d", i)
	}
}

// TestKgoValidatesCommittedPosition: a consumer resumes from a committed
// offset and leader epoch (kgo validates the position with
// OffsetForLeaderEpoch before fetching) and reads on from exactly there;
// a position past the end of its epoch, as after a truncation, is
// reported as kgo.ErrDataLoss and reset to the epoch's end offset.
func TestKgoValidatesCommittedPosition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	prod := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(ctx, t, prod, testTopic)
	for i := range 20 {
		produceAt(ctx, t, prod, int64(1000+i))
	}
	require.Equal(t, map[int32]int16{0: 0}, commit(ctx, t, prod, commitRequest("resume", -1, map[int32]committedOffset{0: {offset: 12, leaderEpoch: 0}})))

	// A restarted consumer: its committed position.
	var epochRequests atomic.Int32
	hook := brokerWriteHook(func(key int16) {
		if key == kmsg.OffsetForLeaderEpoch.Int16() {
			epochRequests.Add(1)
		}
	})
	c := fetchCommitted(ctx, t, newClient(t, s), "resume", []int32{0})[0]
	cons := newClient(t, s, kgo.WithHooks(hook), kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		testTopic: {0: kgo.NewOffset().At(c.offset).WithEpoch(c.leaderEpoch)},
	}))
	next := int64(12)
	for next < 20 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, next, r.Offset)
			require.Equal(t, int32(0), r.LeaderEpoch)
			next++
		})
	}
	require.Positive(t, epochRequests.Load(), "kgo validated the position with OffsetForLeaderEpoch")

	// A position beyond the end of epoch 0 (records the log no longer
	// has): data loss, reset to the end of epoch 0.
	lost := newClient(t, s, kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		testTopic: {0: kgo.NewOffset().At(25).WithEpoch(0)},
	}))
	var loss *kgo.ErrDataLoss
	for loss == nil {
		fs := lost.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) {
			require.True(t, errors.As(err, &loss), "%v", err)
		})
		require.Zero(t, fs.NumRecords())
	}
	require.Equal(t, []int64{25, 20}, []int64{loss.ConsumedTo, loss.ResetTo})
	require.Equal(t, int32(0), loss.ResetToEpoch)
	produceAt(ctx, t, prod, 2000)
	for {
		fs := lost.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		require.NoError(t, fs.Err())
		if recs := fs.Records(); len(recs) > 0 {
			require.Equal(t, int64(20), recs[0].Offset)
			break
		}
	}
}

// brokerWriteHook calls f with the key of each request kgo writes.
type brokerWriteHook func(key int16)

func (h brokerWriteHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	h(key)
}

// TestFetchAndListOffsetsCheckCurrentLeaderEpoch: Fetch and ListOffsets
// check the CurrentLeaderEpoch as OffsetForLeaderEpoch does (Kafka's
// Partition.validateCurrentLeaderEpoch): none (-1) or this broker's
// epoch is served, a newer one is UNKNOWN_LEADER_EPOCH, an older one
// FENCED_LEADER_EPOCH, and a fenced request is served no records.
func TestFetchAndListOffsetsCheckCurrentLeaderEpoch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(ctx, t, cl, testTopic)
	produceAt(ctx, t, cl, 1, 2, 3)
	_, b := rawBroker(ctx, t, s)

	for _, r := range []struct {
		current  int32
		wantCode int16
	}{{-1, 0}, {0, 0}, {1, kerr.UnknownLeaderEpoch.Code}, {-2, kerr.FencedLeaderEpoch.Code}} {
		fetch := kmsg.NewPtrFetchRequest()
		fetch.ReplicaID, fetch.MaxBytes, fetch.MaxWaitMillis = -1, 1<<20, 0
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = testTopic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = 0, r.current, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		fr, err := fetch.RequestWith(ctx, b)
		require.NoError(t, err)
		p := fr.Topics[0].Partitions[0]
		require.Equal(t, r.wantCode, p.ErrorCode, "fetch, current epoch %d", r.current)
		require.Equal(t, r.wantCode == 0, len(p.RecordBatches) > 0, "fetch, current epoch %d", r.current)

		list := kmsg.NewPtrListOffsetsRequest()
		list.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = testTopic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = 0, r.current, -1
		lt.Partitions = append(lt.Partitions, lp)
		list.Topics = append(list.Topics, lt)
		lr, err := list.RequestWith(ctx, b)
		require.NoError(t, err)
		require.Equal(t, r.wantCode, lr.Topics[0].Partitions[0].ErrorCode, "list offsets, current epoch %d", r.current)
	}
}
