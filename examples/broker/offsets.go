package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxOffsetMetadataBytes bounds a committed offset's metadata. Kafka:
// offset.metadata.max.bytes, default 4096 (Kafka counts UTF-16 units,
// this broker bytes).
const maxOffsetMetadataBytes = 4096

// commitRefusal is the error code of a commit to a group that no member
// ever joins (this broker serves no JoinGroup), 0 to accept it: Kafka's
// OffsetMetadataManager.validateOffsetCommit and
// ClassicGroup.validateOffsetCommit for a group with no members.
//
//	generation < 0 (a simple consumer or an admin tool)    accepted; a missing group is created
//	no such group, OffsetCommit v9+                        GROUP_ID_NOT_FOUND
//	no such group, before v9                               ILLEGAL_GENERATION
//	the group exists (holds offsets) and has no members    UNKNOWN_MEMBER_ID
func commitRefusal(groupExists bool, generation int32, version int16) int16 {
	switch {
	case generation < 0:
		return 0
	case !groupExists && version >= 9:
		return kerr.GroupIDNotFound.Code
	case !groupExists:
		return kerr.IllegalGeneration.Code
	}
	return kerr.UnknownMemberID.Code
}

// offsetCommit stores the committed offsets of a simple consumer group
// (generation -1: the consumers assign partitions themselves). Each
// partition is answered UNKNOWN_TOPIC_OR_PARTITION when it does not
// exist (Kafka's KafkaApis checks this before the coordinator), then the
// group's refusal (commitRefusal), then OFFSET_METADATA_TOO_LARGE; the
// rest are written together, durably, before the answer (offsets.commit),
// or all answered NOT_COORDINATOR when the write fails, as Kafka answers
// a failed append to __consumer_offsets (the client finds the
// coordinator again and retries). The retention time of v2-v4 is
// ignored: committed offsets never expire here. Library: none.
func (s *Server) offsetCommit(r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	g := s.offsets.group(r.Group)
	refusal := commitRefusal(g != nil, r.Generation, r.Version)
	if refusal == 0 && g == nil {
		g = s.offsets.getOrCreate(r.Group)
	}
	updates := map[topicPartition]committedOffset{}
	var written [][2]int // indexes in resp.Topics and its Partitions
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		tp, topicExists := s.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !topicExists || rp.Partition < 0 || rp.Partition >= tp.partitions:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case refusal != 0:
				p.ErrorCode = refusal
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadataBytes:
				p.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				c := committedOffset{offset: rp.Offset, leaderEpoch: -1}
				if r.Version >= 6 && rp.LeaderEpoch >= 0 {
					c.leaderEpoch = rp.LeaderEpoch
				}
				if rp.Metadata != nil {
					c.metadata = *rp.Metadata
				}
				updates[topicPartition{rt.Topic, rp.Partition}] = c
				written = append(written, [2]int{len(resp.Topics), len(t.Partitions)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if refusal != 0 {
		s.logger.Debug("offset commit refused: this broker runs no group membership", "group", r.Group, "generation", r.Generation, "member", r.MemberID, "err", kerr.ErrorForCode(refusal))
	}
	if err := s.offsets.commit(g, updates); err != nil {
		s.logger.Error("offset commit failed", "group", r.Group, "err", err)
		for _, w := range written {
			resp.Topics[w[0]].Partitions[w[1]].ErrorCode = kerr.NotCoordinator.Code
		}
	}
	return resp
}

// askedTopic is one topic of an OffsetFetch, in either request shape.
type askedTopic struct {
	topic      string
	partitions []int32
}

// answeredTopic is one topic of an OffsetFetch answer.
type answeredTopic struct {
	topic      string
	partitions []answeredPartition
}

// answeredPartition is one partition's committed offset.
type answeredPartition struct {
	partition int32
	committedOffset
}

// committedOffsets answers one group of an OffsetFetch: the asked
// partitions, or with all every partition the group committed (sorted).
// A partition with no commit, of a group that does not exist or of a
// topic that does not exist, is offset -1, leader epoch -1, metadata "",
// without an error: Kafka's OffsetMetadataManager.fetchOffsets does not
// check the topics. No transactional commits exist here, so
// RequireStable never answers UNSTABLE_OFFSET_COMMIT.
func (s *Server) committedOffsets(group string, all bool, asked []askedTopic) []answeredTopic {
	g := s.offsets.group(group)
	var out []answeredTopic
	if all {
		if g == nil {
			return nil
		}
		tps, m := g.all()
		for _, tp := range tps {
			if n := len(out); n == 0 || out[n-1].topic != tp.topic {
				out = append(out, answeredTopic{topic: tp.topic})
			}
			t := &out[len(out)-1]
			t.partitions = append(t.partitions, answeredPartition{tp.partition, m[tp]})
		}
		return out
	}
	for _, at := range asked {
		t := answeredTopic{topic: at.topic, partitions: make([]answeredPartition, 0, len(at.partitions))}
		for _, p := range at.partitions {
			a := answeredPartition{p, committedOffset{offset: -1, leaderEpoch: -1}}
			if g != nil {
				if c, ok := g.get(topicPartition{at.topic, p}); ok {
					a.committedOffset = c
				}
			}
			t.partitions = append(t.partitions, a)
		}
		out = append(out, t)
	}
	return out
}

// offsetFetch answers the committed offsets of one group (v1-v7) or of
// several (v8+, KIP-709). A null topic list (v2+) asks for every
// committed partition of the group. Library: none.
func (s *Server) offsetFetch(r *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range r.Groups {
			asked := make([]askedTopic, 0, len(rg.Topics))
			for _, rt := range rg.Topics {
				asked = append(asked, askedTopic{rt.Topic, rt.Partitions})
			}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			for _, at := range s.committedOffsets(rg.Group, rg.Topics == nil, asked) {
				t := kmsg.NewOffsetFetchResponseGroupTopic()
				t.Topic = at.topic
				for _, a := range at.partitions {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch = a.partition, a.offset, a.leaderEpoch
					p.Metadata = kmsg.StringPtr(a.metadata)
					t.Partitions = append(t.Partitions, p)
				}
				g.Topics = append(g.Topics, t)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
	asked := make([]askedTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		asked = append(asked, askedTopic{rt.Topic, rt.Partitions})
	}
	for _, at := range s.committedOffsets(r.Group, r.Version >= 2 && r.Topics == nil, asked) {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = at.topic
		for _, a := range at.partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = a.partition, a.offset, a.leaderEpoch
			p.Metadata = kmsg.StringPtr(a.metadata)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
