package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
)

// listOffsets answers earliest (-2), latest (-1), MAX_TIMESTAMP (-3),
// earliest-local (-4, v8, KIP-405: the local log start offset, above the
// log start once the remote tier holds the oldest segments), latest-tiered
// (-5, v9, KIP-1005: the highest offset in remote storage) and
// timestamps. Library: log.UnifiedLog.FetchOffsetByTimestamp finds the
// offset and its leader epoch (and the record's timestamp); the broker
// then applies the consumer's isolation as Kafka's
// Partition.fetchOffsetForTimestamp does: latest is the high watermark
// (read_uncommitted) or the last stable offset (read_committed), not the
// log end, and an answer at or above that bound is no answer (-1).
func (s *Server) listOffsets(r *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.Timestamp, p.Offset, p.LeaderEpoch = log.NoTimestamp, -1, -1
			l, ok, err := s.partitionLog(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				p.ErrorCode = kafkaerr.ErrorCode(err)
			case !ok:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case currentLeaderEpochError(rp.CurrentLeaderEpoch, leaderEpoch) != 0:
				// Kafka's Partition.validateCurrentLeaderEpoch, as OffsetForLeaderEpoch.
				p.ErrorCode = currentLeaderEpochError(rp.CurrentLeaderEpoch, leaderEpoch)
			default:
				var err error
				p.Timestamp, p.Offset, p.LeaderEpoch, err = s.listOffset(l, rt.Topic, rp.Partition, rp.Timestamp, r.IsolationLevel)
				p.ErrorCode = s.errorCode(l, err)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// listOffset answers one partition. A timestamp is looked up in the
// remote tier first when it holds offsets below the local log start
// (Library: remote.Manager.FindOffsetByTimestamp), then in the local
// segments, as Kafka's UnifiedLog.fetchOffsetByTimestamp does.
func (s *Server) listOffset(l *log.UnifiedLog, name string, partition int32, ts int64, isolationLevel int8) (int64, int64, int32, error) {
	o := l.Offsets()
	bound := o.HighWatermark
	if isolationLevel == 1 {
		bound = o.LastStableOffset
	}
	if ts == log.ListLatest {
		epoch := int32(-1)
		if e, ok := l.LatestEpoch(); ok {
			epoch = e
		}
		return log.NoTimestamp, bound, epoch, nil
	}
	r, found, err := s.findRemoteOffset(l, name, partition, ts)
	if err == nil && !found {
		r, found, err = l.FetchOffsetByTimestamp(ts)
	}
	switch {
	case err != nil:
		return log.NoTimestamp, -1, -1, err
	case !found || (!unbounded(ts) && r.Offset >= bound):
		return log.NoTimestamp, -1, -1, nil
	}
	return r.Timestamp, r.Offset, r.Epoch, nil
}

// unbounded reports whether the answer to special timestamp ts stands
// whatever the isolation bound, as Kafka's Partition.fetchOffsetForTimestamp
// answers earliest, earliest-local and latest-tiered: they name where a
// tier starts or ends, not a record to read.
func unbounded(ts int64) bool {
	return ts == log.ListEarliest || ts == log.ListEarliestLocal || ts == log.ListLatestTiered
}
