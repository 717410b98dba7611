package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// fetch reads each partition. Library: log.UnifiedLog.Read returns whole
// batches, as stored, under the isolation bound (the high watermark for
// read_uncommitted, the last stable offset for read_committed, with the
// aborted transactions to skip), never a nil record set; when fewer than
// MinBytes came back, log.UnifiedLog.WaitFor blocks until one partition's
// bound passes its fetch offset, or until MaxWaitMillis (a context
// deadline), and the partitions are read again. The broker's shutdown
// ends the wait too. No fetch sessions (KIP-227): the answer's session id
// 0 tells the client to send full requests.
func (s *Server) fetch(r *kmsg.FetchRequest) *kmsg.FetchResponse {
	isolation := log.IsolationHighWatermark
	if r.IsolationLevel == 1 {
		isolation = log.IsolationCommitted
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Duration(max(r.MaxWaitMillis, 0))*time.Millisecond)
	defer cancel()
	for {
		resp, bytes, waits := s.fetchOnce(r, isolation)
		if bytes >= int(r.MinBytes) || len(waits) == 0 || ctx.Err() != nil {
			return resp
		}
		waitAny(ctx, waits, isolation)
	}
}

// fetchWait is a partition a fetch may wait on: its log and fetch offset.
type fetchWait struct {
	l      *log.UnifiedLog
	offset int64
}

// fetchOnce reads every partition of the request once. It returns the
// response, the bytes it holds, and the partitions to wait on (those read
// without error); none when a partition failed, so the client hears of
// the error at once, as Kafka answers.
func (s *Server) fetchOnce(r *kmsg.FetchRequest, isolation log.Isolation) (*kmsg.FetchResponse, int, []fetchWait) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	budget := int(r.MaxBytes)
	if r.Version < 3 || budget <= 0 {
		budget = 1 << 30
	}
	total, failed := 0, false
	var waits []fetchWait
	for _, rt := range r.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.RecordBatches = []byte{} // never a null record set
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
				maxBytes := min(int(rp.PartitionMaxBytes), budget-total)
				// The first partition with data returns at least one
				// whole batch, even above the limits (Kafka's
				// minOneMessage), so a large batch never stalls a consumer.
				fd, err := l.Read(nil, rp.FetchOffset, max(maxBytes, 0), isolation, total == 0)
				remoteRead := errors.Is(err, log.ErrOffsetMovedToTieredStorage) && s.tier != nil
				if remoteRead {
					// Below the local log start: the remote tier's
					// batches, under the offsets the local read loaded.
					var rr remote.ReadResult
					rr, err = s.readRemote(rt.Topic, rp.Partition, rp.FetchOffset, max(maxBytes, 0), isolation, total == 0)
					fd.Records, fd.AbortedTransactions = log.NonNilRecords(rr.Records), rr.AbortedTransactions
				}
				if remoteRead {
					// The remote tier's errors never take the log
					// directory offline.
					p.ErrorCode = kafkaerr.ErrorCode(err)
				} else {
					p.ErrorCode = s.errorCode(l, err)
				}
				p.HighWatermark = fd.HighWatermark
				p.LastStableOffset = fd.LastStableOffset
				p.LogStartOffset = fd.LogStartOffset
				p.RecordBatches = fd.Records
				for _, a := range fd.AbortedTransactions {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
					p.AbortedTransactions = append(p.AbortedTransactions, at)
				}
				total += len(fd.Records)
				if err == nil && !remoteRead {
					// A remote read has data below the bound: waiting
					// would not bring more.
					waits = append(waits, fetchWait{l, rp.FetchOffset})
				}
			}
			failed = failed || p.ErrorCode != 0
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if failed {
		waits = nil
	}
	return resp, total, waits
}

// waitAny returns when one partition's isolation bound passes its fetch
// offset (or its wait fails: the next read reports why), or when ctx
// ends. Library: log.UnifiedLog.WaitFor, one goroutine per partition; a
// broker with many partitions per fetch would select over
// log.UnifiedLog.Watch channels instead.
func waitAny(ctx context.Context, waits []fetchWait, isolation log.Isolation) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range waits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = w.l.WaitFor(ctx, w.offset, isolation)
			cancel() // data, an error or the deadline: read again
		}()
	}
	wg.Wait()
	cancel()
}
