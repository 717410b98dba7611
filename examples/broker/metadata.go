package main

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/logmanager"
)

// nodeID is this broker's id: the only broker, leader of every partition.
const nodeID = 0

// metadata answers with this broker as the only one and the leader of
// every partition, auto-creating the topics asked for (Kafka:
// auto.create.topics.enable, on by default; from v4 only when the client
// allows it). Library: logmanager.Manager.GetOrCreate, through
// topics.create.
func (s *Server) metadata(r *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	host, port := s.hostPort()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = nodeID, host, port
	resp.Brokers = append(resp.Brokers, b)
	clusterID := "tierlog-example"
	resp.ClusterID = &clusterID
	resp.ControllerID = nodeID

	var names []string
	if r.Topics == nil { // null: every topic
		names = s.topics.names()
	}
	autoCreate := r.Version < 4 || r.AllowAutoTopicCreation
	for _, rt := range r.Topics {
		if rt.Topic != nil {
			names = append(names, *rt.Topic)
		}
	}
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = kmsg.StringPtr(name)
		tp, ok := s.topics.get(name)
		if !ok && autoCreate {
			var err error
			tp, _, err = s.topics.create(name, 0)
			if err != nil {
				s.logger.Warn("auto-create failed", "topic", name, "err", err)
				t.ErrorCode = createErrorCode(err)
				resp.Topics = append(resp.Topics, t)
				continue
			}
			ok = true
		}
		if !ok {
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID = tp.id
		for i := range tp.partitions {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition = i
			p.Leader = nodeID
			p.LeaderEpoch = 0 // one leader forever: every batch is appended in epoch 0
			p.Replicas = []int32{nodeID}
			p.ISR = []int32{nodeID}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// createErrorCode is the answer to a failed topic creation: a bad name is
// INVALID_TOPIC_EXCEPTION, the rest as kafkaerr maps them.
func createErrorCode(err error) int16 {
	if errors.Is(err, logmanager.ErrInvalidArgument) {
		return kerr.InvalidTopicException.Code
	}
	return kafkaerr.ErrorCode(err)
}

// createTopics creates topics with a partition count (or the default).
// Replica assignments and configs are refused: there is one broker and no
// per-topic configuration here. Library: logmanager.Manager.GetOrCreate,
// through topics.create.
func (s *Server) createTopics(r *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		switch {
		case len(rt.ReplicaAssignment) > 0 || len(rt.Configs) > 0 || rt.ReplicationFactor > 1:
			t.ErrorCode = kerr.InvalidRequest.Code
			t.ErrorMessage = kmsg.StringPtr("this broker takes a partition count only: no replica assignment, no configs, replication factor 1")
		case r.ValidateOnly:
			if _, ok := s.topics.get(rt.Topic); ok {
				t.ErrorCode = kerr.TopicAlreadyExists.Code
			}
		default:
			tp, existed, err := s.topics.create(rt.Topic, rt.NumPartitions)
			switch {
			case err != nil:
				t.ErrorCode = createErrorCode(err)
				t.ErrorMessage = kmsg.StringPtr(err.Error())
			case existed:
				t.ErrorCode = kerr.TopicAlreadyExists.Code
			default:
				t.TopicID = tp.id
				t.NumPartitions = tp.partitions
				t.ReplicationFactor = 1
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
