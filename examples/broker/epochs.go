package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
)

// noLeaderEpoch is the CurrentLeaderEpoch of a request that does not
// know the leader's epoch (Kafka: RecordBatch.NO_PARTITION_LEADER_EPOCH).
const noLeaderEpoch = -1

// currentLeaderEpochError is Kafka's Partition.validateCurrentLeaderEpoch:
// the error code of a request that names current as the partition's
// leader epoch when the leader's is leader, 0 when it may be served.
//
//	current == -1 (unknown to the client)   0: not checked
//	current <  leader                        FENCED_LEADER_EPOCH (the client's metadata is old)
//	current >  leader                        UNKNOWN_LEADER_EPOCH (this broker's is old)
//	current == leader                        0
func currentLeaderEpochError(current, leader int32) int16 {
	switch {
	case current == noLeaderEpoch:
		return 0
	case current < leader:
		return kerr.FencedLeaderEpoch.Code
	case current > leader:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// offsetForLeaderEpoch answers, for each partition, the end offset of
// the requested leader epoch (KIP-101, KIP-320: consumers ask it after a
// leader change, with the epoch of the last record they consumed, to
// detect a truncated log), as Kafka's Partition.lastOffsetForLeaderEpoch:
// UNKNOWN_TOPIC_OR_PARTITION, then the CurrentLeaderEpoch check
// (currentLeaderEpochError against this broker's leaderEpoch, the epoch
// Metadata announces and every batch is appended in), then the answer,
// (-1, -1) with no error when the log knows no epoch at or below the
// requested one, or when it is above the latest. Library:
// log.UnifiedLog.EndOffsetForEpoch (the leader-epoch cache's
// endOffsetFor: the largest epoch <= the requested one and its exclusive
// end offset, the log end offset for the latest epoch).
func (s *Server) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			p.LeaderEpoch, p.EndOffset = -1, -1
			l, ok, err := s.partitionLog(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				p.ErrorCode = kafkaerr.ErrorCode(err)
			case !ok:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if p.ErrorCode = currentLeaderEpochError(rp.CurrentLeaderEpoch, leaderEpoch); p.ErrorCode == 0 {
					if ans := l.EndOffsetForEpoch(rp.LeaderEpoch); !ans.Undefined() {
						p.LeaderEpoch, p.EndOffset = ans.Epoch, ans.EndOffset
					}
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// assumeLeadership records in l's leader-epoch cache that this broker's
// leaderEpoch starts at the log end offset, unless the cache already
// holds it: what Kafka's Partition.makeLeader does when a broker becomes
// a partition's leader (UnifiedLog.maybeAssignEpochStartOffset). Without
// it a log with no batch yet has an empty cache, and OffsetForLeaderEpoch
// of the leader's own epoch, which Metadata announces, would answer
// (-1, -1) where Kafka answers (epoch, log end offset). Library:
// log.UnifiedLog.AssignEpochStartOffset (it writes the epoch
// checkpoint).
func assumeLeadership(l *log.UnifiedLog) error {
	if e, ok := l.LatestEpoch(); ok && e >= leaderEpoch {
		return nil
	}
	return l.AssignEpochStartOffset(leaderEpoch, l.LogEndOffset())
}
