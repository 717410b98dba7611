package main

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
)

// leaderEpoch is the epoch every batch is appended in: one broker leads
// every partition forever. A replicated broker passes the partition's
// current leader epoch from the controller.
const leaderEpoch = 0

// produce appends each partition's batches. Library:
// log.UnifiedLog.AppendAsLeader validates the batches (CRC, offsets,
// timestamps, decompressing compressed ones), assigns the offsets, and
// checks idempotent producers' sequence numbers against the log's
// producer state (a retried batch is answered with the first copy's
// offsets, AppendInfo.Duplicate); then
// log.UnifiedLog.MaybeIncrementHighWatermark commits the records: with
// one replica the high watermark follows the log end offset. acks=1 and
// acks=-1 are the same here; acks=0 gets no response (handle).
func (s *Server) produce(r *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.BaseOffset, p.LogStartOffset = -1, -1
			p.LogAppendTime = -1 // CreateTime: the producer's timestamps are kept
			if code := s.refuseBatches(r, rt.Topic, rp.Partition, rp.Records); code != 0 {
				p.ErrorCode = code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			l, ok, err := s.partitionLog(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				p.ErrorCode = kafkaerr.ErrorCode(err)
			case !ok:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				p.BaseOffset, p.LogStartOffset, p.ErrorCode = s.appendAndCommit(l, rp.Records)
			}
			if p.ErrorCode != 0 {
				s.logger.Debug("produce refused", "topic", rt.Topic, "partition", rp.Partition, "err", kerr.ErrorForCode(p.ErrorCode))
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// appendAndCommit appends records and moves the high watermark to the log
// end. It returns the base offset and the log start offset, or an error
// code (kafkaerr.Code of the log's typed error).
func (s *Server) appendAndCommit(l *log.UnifiedLog, records []byte) (base, logStart int64, code int16) {
	if s.plain != nil {
		return s.plain.append(l, records) // the compare command's baseline
	}
	info, err := l.AppendAsLeader(records, leaderEpoch, log.OriginClient)
	if err != nil {
		return -1, -1, s.errorCode(l, err)
	}
	// Single node: the append is on every replica, so it is committed. A
	// concurrent append may have moved the log end further; the high
	// watermark never moves back (MaybeIncrement, not Update).
	if _, err := l.MaybeIncrementHighWatermark(l.LogEndOffset()); err != nil {
		return -1, -1, s.errorCode(l, err)
	}
	return info.FirstOffset, l.LogStartOffset(), 0
}

// Batch header fields the broker looks at before the log does (Kafka's
// DefaultRecordBatch layout; the magic byte is at the same place in the
// v0 and v1 message formats).
const (
	lengthOffset     = 8
	magicOffset      = 16
	attributesOffset = 21
	attrTransaction  = 0x10
)

// refuseBatches returns the error code for batches this broker does not
// take before they reach the log, 0 otherwise: the v0 and v1 message
// formats (the log reads only magic v2; Kafka 4 refuses them too), and
// transactional batches (no transaction coordinator here). Damaged
// framing is left to the log, which answers it with a typed error.
func (s *Server) refuseBatches(r *kmsg.ProduceRequest, topic string, partition int32, records []byte) int16 {
	if r.TransactionID != nil {
		s.logger.Warn("transactional produce refused: this broker has no transaction coordinator", "topic", topic, "partition", partition, "transactional_id", *r.TransactionID)
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	for b := records; len(b) > attributesOffset+1; {
		if m := int8(b[magicOffset]); m != 2 {
			s.logger.Warn("produce refused: only magic v2 record batches are accepted", "topic", topic, "partition", partition, "magic", m)
			return kerr.UnsupportedVersion.Code
		}
		if binary.BigEndian.Uint16(b[attributesOffset:])&attrTransaction != 0 {
			s.logger.Warn("produce refused: transactional batch, and this broker has no transaction coordinator", "topic", topic, "partition", partition)
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		n := int64(int32(binary.BigEndian.Uint32(b[lengthOffset:])))
		if n <= 0 || n > int64(len(b)-12) {
			break // the log reports the damage
		}
		b = b[12+n:]
	}
	return 0
}
