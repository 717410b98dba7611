package walcheck

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/tierlog/tierlog/wal"
)

// ModelPlane is a control plane in memory for the checks: it creates
// partitions, assigns offsets at CommitFile as a real plane does (per
// partition from its high watermark, in request order) and answers
// FindBatches with the budgets of wal.FindBatchesRequest and each
// batch's Binding (wal.CommitBatch.Binding). It runs no producer check
// (the generator sends only valid sequences) and no retention. Methods
// it does not implement panic (the embedded nil interface): the read
// path calls only FindBatches, the consolidation endpoint ListOffsets
// and LogInfo.
//
// Concurrency: safe for concurrent use; mu guards logs.
type ModelPlane struct {
	wal.ControlPlane
	mu   sync.Mutex
	logs map[wal.TopicIDPartition]*modelLog
}

type modelLog struct {
	batches []wal.BatchInfo
	hw      int64
}

// NewModelPlane returns an empty ModelPlane.
func NewModelPlane() *ModelPlane {
	return &ModelPlane{logs: map[wal.TopicIDPartition]*modelLog{}}
}

// CreatePartitions creates the rows that do not exist yet.
func (m *ModelPlane) CreatePartitions(_ context.Context, topics []wal.CreatePartitionsRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range topics {
		for p := range t.NumPartitions {
			tp := wal.TopicIDPartition{TopicID: t.TopicID, Partition: p}
			if m.logs[tp] == nil {
				m.logs[tp] = &modelLog{}
			}
		}
	}
	return nil
}

// CommitFile assigns offsets to every batch of a known partition.
func (m *ModelPlane) CommitFile(_ context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := req.Validate(); err != nil {
		return wal.CommitFileResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	const commitTime = 1_700_000_000_000
	res := wal.CommitFileResult{Batches: make([]wal.BatchResult, len(req.Batches))}
	for i, b := range req.Batches {
		l := m.logs[b.Partition]
		if l == nil {
			res.Batches[i] = wal.BatchResult{BaseOffset: -1, LogStartOffset: -1, Err: &wal.BatchRejectedError{
				Partition: b.Partition, Index: i, Reason: wal.ErrUnknownTopicOrPartition}}
			continue
		}
		info := wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
			BaseOffset: l.hw, LastOffset: l.hw + b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp,
			TimestampType: b.TimestampType, LogAppendTime: commitTime, Binding: b.Binding()}
		l.batches = append(l.batches, info)
		l.hw = info.LastOffset + 1
		res.Batches[i] = wal.BatchResult{BaseOffset: info.BaseOffset, LogAppendTime: commitTime}
	}
	return res, nil
}

// CommitFiles commits the requests one after the other.
func (m *ModelPlane) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	return wal.CommitEach(ctx, m, reqs)
}

// FindBatches answers with the committed batches from each offset,
// within the request's budgets.
func (m *ModelPlane) FindBatches(_ context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]wal.FindBatchesResult, len(req.Partitions))
	var reqBytes int64
	first := true
	for i, p := range req.Partitions {
		l := m.logs[p.Partition]
		if l == nil {
			out[i] = wal.FindBatchesResult{LogStartOffset: -1, HighWatermark: -1,
				Err: &wal.PartitionError{Partition: p.Partition, Err: wal.ErrUnknownTopicOrPartition}}
			continue
		}
		out[i] = wal.FindBatchesResult{LogStartOffset: 0, HighWatermark: l.hw}
		if p.Offset < 0 || p.Offset > l.hw {
			out[i].Err = &wal.PartitionError{Partition: p.Partition, Err: wal.ErrOffsetOutOfRange,
				Detail: fmt.Sprintf("offset %d outside [0, %d]", p.Offset, l.hw)}
			continue
		}
		var partBytes int64
		j := sort.Search(len(l.batches), func(j int) bool { return l.batches[j].LastOffset >= p.Offset })
		for ; j < len(l.batches); j++ {
			if !first && (partBytes >= p.MaxPartitionBytes || reqBytes >= req.MaxBytes ||
				(req.MaxBatchesPerPartition > 0 && len(out[i].Batches) >= req.MaxBatchesPerPartition)) {
				break
			}
			b := l.batches[j]
			out[i].Batches = append(out[i].Batches, b)
			partBytes += b.Size
			reqBytes += b.Size
			first = false
		}
	}
	return out, nil
}

// ListOffsets answers the special timestamps only (latest, earliest and
// earliest local); any other is (-1, -1).
func (m *ModelPlane) ListOffsets(_ context.Context, reqs []wal.ListOffsetsRequest) ([]wal.ListOffsetsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]wal.ListOffsetsResult, len(reqs))
	for i, r := range reqs {
		l := m.logs[r.Partition]
		out[i] = wal.ListOffsetsResult{Offset: -1, Timestamp: -1}
		switch {
		case l == nil:
			out[i].Err = &wal.PartitionError{Partition: r.Partition, Err: wal.ErrUnknownTopicOrPartition}
		case r.Timestamp == wal.LatestTimestamp:
			out[i].Offset = l.hw
		case r.Timestamp == wal.EarliestTimestamp || r.Timestamp == wal.EarliestLocalTimestamp:
			out[i].Offset = 0
		}
	}
	return out, nil
}

// LogInfo returns a partition's row.
func (m *ModelPlane) LogInfo(_ context.Context, tp wal.TopicIDPartition) (wal.LogInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[tp]
	if l == nil {
		return wal.LogInfo{}, &wal.PartitionError{Partition: tp, Err: wal.ErrUnknownTopicOrPartition}
	}
	var size int64
	for _, b := range l.batches {
		size += b.Size
	}
	return wal.LogInfo{HighWatermark: l.hw, DisklessStartOffset: 0, CrossTierLogStartOffset: -1, ByteSize: size}, nil
}

// Close does nothing.
func (m *ModelPlane) Close() error { return nil }
