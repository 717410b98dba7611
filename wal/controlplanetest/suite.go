// Package controlplanetest is the conformance suite every wal.ControlPlane
// runs: the embedded one (wal/pebblecp) and any other. It pins down the
// contract of wal.ControlPlane (offset assignment, idempotent-producer
// dedupe, batch bindings, find budgets, list offsets, delete records, the
// switch's initialisation, prune, file lifecycle and orphan reservations)
// so that the planes answer alike. PreBindingCommit and CheckPreBinding
// check a plane's upgrade from rows stored before batch bindings.
//
// Use it from a control plane's test:
//
//	func TestConformance(t *testing.T) {
//		controlplanetest.Run(t, func(t *testing.T, now func() time.Time) wal.ControlPlane {
//			return openForTest(t, now) // empty, isolated, on the given clock
//		}, controlplanetest.Options{Seed: testseed.Seed(t, 1)})
//	}
//
// The suite drives time through the clock it hands to open (commit times,
// deletion marks and reservations are read from it), so no test sleeps.
package controlplanetest

import (
	"context"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// Opener returns an empty control plane no other subtest shares, reading
// time from now. The suite closes it.
type Opener func(t *testing.T, now func() time.Time) wal.ControlPlane

// Options configures Run.
type Options struct {
	// Seed seeds the randomised subtests. Take it from the caller's
	// test seed helper so that a failure can be rerun.
	Seed uint64
	// PropertySteps is the number of operations of the property test.
	// Default 400.
	PropertySteps int
}

// Run runs the suite as subtests.
func Run(t *testing.T, open Opener, opts Options) {
	if opts.PropertySteps <= 0 {
		opts.PropertySteps = 400
	}
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		// CommitFile.
		{"CommitEmpty", testCommitEmpty},
		{"CommitUnknownPartitions", testCommitUnknownPartitions},
		{"CommitContinuesAtHighWatermark", testCommitContinues},
		{"CommitSizeZeroFailsWholeCommit", testCommitSizeZero},
		{"CommitInvalidRequests", testCommitInvalid},
		{"CommitRetrySameKey", testCommitRetry},
		{"CommitRetryOtherBinding", testCommitRetryOtherBinding},
		{"CommitOffsetOverflow", testCommitOffsetOverflow},
		{"CommitZeroTopicID", testCommitZeroTopicID},
		{"CommitAllPartitionsInListOrder", testCommitListOrder},
		{"CommitConcurrent", testCommitConcurrent},
		// CommitFiles.
		{"CommitFilesListOrder", testCommitFilesListOrder},
		{"CommitFilesItemFailsAlone", testCommitFilesItemFailsAlone},
		{"CommitFilesConcurrent", testCommitFilesConcurrent},
		{"CommitFilesClosed", testCommitFilesClosed},
		// FindBatches.
		{"FindContainingBatchWhole", testFindContaining},
		{"FindReturnsBinding", testFindBinding},
		{"FindAtAndAboveHighWatermark", testFindHighWatermark},
		{"FindAfterDeleteRecords", testFindAfterDeleteRecords},
		{"FindRequestBudget", testFindRequestBudget},
		{"FindPartitionBudget", testFindPartitionBudget},
		{"FindUnknownInOrder", testFindUnknown},
		{"FindFairnessByCallerRotation", testFindFairness},
		// Partitions and topics.
		{"CreatePartitions", testCreatePartitions},
		{"DeleteTopics", testDeleteTopics},
		// DeleteRecords.
		{"DeleteRecordsInsideBatch", testDeleteRecordsInside},
		{"DeleteRecordsAcrossFiles", testDeleteRecordsAcrossFiles},
		{"DeleteRecordsBounds", testDeleteRecordsBounds},
		{"DeleteRecordsSharedFile", testDeleteRecordsSharedFile},
		// ListOffsets and the cross-tier start.
		{"ListOffsetsEmpty", testListOffsetsEmpty},
		{"ListOffsetsTimestamps", testListOffsetsTimestamps},
		{"CrossTierLogStart", testCrossTierLogStart},
		// Idempotent producers.
		{"ProducerSequences", testProducerSequences},
		{"ProducerWindowOfFive", testProducerWindow},
		{"ProducerFirstBatchNotZero", testProducerFirstNotZero},
		{"ProducerOutOfOrderSameAndAcrossCalls", testProducerOutOfOrder},
		{"ProducerFencedEpoch", testProducerFencedEpoch},
		{"ProducerEpochBumpWithState", testProducerEpochBump},
		{"ProducerSequenceWrap", testProducerWrap},
		{"ProducerDuplicateInSameObject", testProducerDuplicateSameObject},
		{"ProducerNonIdempotentNoState", testProducerNonIdempotent},
		// The switch.
		{"InitNewPartition", testInitNew},
		{"InitAlreadyInitialised", testInitAlready},
		{"InitPlaceholderOverwritten", testInitPlaceholder},
		{"InitWithProducerStates", testInitProducerStates},
		{"InitInvalid", testInitInvalid},
		{"RepairDisklessLog", testRepair},
		// Prune.
		{"PruneBasics", testPruneBasics},
		{"PruneKeepsDeleteRecordsStart", testPruneKeepsStart},
		{"PruneSequentialRequests", testPruneSequential},
		{"PruneCapAtRemoteStorage", testPruneCap},
		// Retention of partitions that are not consolidated.
		{"RetentionBySize", testRetentionBySize},
		{"RetentionBySizeLimits", testRetentionBySizeLimits},
		{"RetentionKeepsDeleteRecordsStart", testRetentionKeepsDeleteRecordsStart},
		{"RetentionByTime", testRetentionByTime},
		{"RetentionLogAppendTime", testRetentionLogAppendTime},
		// Runs: contiguous batches of one partition in one object.
		{"RunsAnswerBatchByBatch", testRunsAnswerBatchByBatch},
		{"RunsRemovalInsideRun", testRunsRemovalInsideRun},
		// Files and orphans.
		{"FilesToDeleteGracePeriod", testFilesToDelete},
		{"IsSafeToDeleteObject", testIsSafe},
		{"ReservationsAndOrphans", testReservations},
		{"LateCommitAfterOrphanReaped", testLateCommitAfterReaped},
		{"Closed", testClosed},
		// Property.
		{"PropertyOffsetsAreCumulativeCounts", func(e *env) { testProperty(e, opts) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(time.UnixMilli(1_767_225_600_000)) // 2026-01-01
			cp := open(t, clock.Now)
			e := &env{t: t, cp: cp, clock: clock, ctx: context.Background()}
			t.Cleanup(func() { _ = cp.Close() })
			e.create(topic1, "topic-1", 2)
			e.create(topic2, "topic-2", 1)
			tc.fn(e)
		})
	}
}

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var (
	topic1 = wal.TopicID{0x11, 1}
	topic2 = wal.TopicID{0x22, 2}
	t1p0   = wal.TopicIDPartition{TopicID: topic1, Partition: 0}
	t1p1   = wal.TopicIDPartition{TopicID: topic1, Partition: 1}
	t2p0   = wal.TopicIDPartition{TopicID: topic2, Partition: 0}
	// Missing: a partition index and a topic that do not exist.
	t1p9     = wal.TopicIDPartition{TopicID: topic1, Partition: 9}
	noTopic  = wal.TopicIDPartition{TopicID: wal.TopicID{0x99}, Partition: 0}
	brokerID = int32(11)
)

type env struct {
	t     *testing.T
	cp    wal.ControlPlane
	clock *Clock
	ctx   context.Context
	keys  int
}

func (e *env) nowMs() int64 { return e.clock.Now().UnixMilli() }

func (e *env) create(id wal.TopicID, name string, n int32) {
	e.t.Helper()
	require.NoError(e.t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: id, Topic: name, NumPartitions: n}}))
}

// batch returns a non-idempotent batch of n records and n bytes.
func batch(tp wal.TopicIDPartition, n int64) wal.CommitBatch {
	return wal.CommitBatch{Partition: tp, Size: n, BaseOffset: 0, LastOffset: n - 1, RecordCount: int32(n),
		MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// idem returns an idempotent batch of n records from sequence seq.
func idem(tp wal.TopicIDPartition, n int64, pid int64, epoch int16, seq int32) wal.CommitBatch {
	b := batch(tp, n)
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
	return b
}

// request lays the batches out back to back in a fresh object. A batch
// without a CRC gets one and a leader epoch of its own, so that no two
// batches of the suite share a binding: a plane that drops a binding, or
// returns another batch's, fails the comparisons of BatchInfo.
func (e *env) request(batches ...wal.CommitBatch) wal.CommitFileRequest {
	e.keys++
	req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("wal/obj-%03d", e.keys), BrokerID: brokerID, BrokerEpoch: 1}
	for i, b := range batches {
		if b.CRC == 0 {
			b.CRC = crc32.ChecksumIEEE(fmt.Appendf(nil, "%s/%d", req.ObjectKey, i))
			b.PartitionLeaderEpoch = int32(e.keys + i)
		}
		b.ByteOffset = req.ObjectSize
		req.ObjectSize += b.Size
		req.Batches = append(req.Batches, b)
	}
	return req
}

func (e *env) commitReq(req wal.CommitFileRequest) wal.CommitFileResult {
	e.t.Helper()
	res, err := e.cp.CommitFile(e.ctx, req)
	require.NoError(e.t, err)
	require.Len(e.t, res.Batches, len(req.Batches))
	return res
}

func (e *env) commit(batches ...wal.CommitBatch) (wal.CommitFileRequest, wal.CommitFileResult) {
	e.t.Helper()
	req := e.request(batches...)
	return req, e.commitReq(req)
}

func (e *env) info(tp wal.TopicIDPartition) wal.LogInfo {
	e.t.Helper()
	info, err := e.cp.LogInfo(e.ctx, tp)
	require.NoError(e.t, err)
	return info
}

// requireLog checks Inkless's LogInfo tuple (logStart, HW, disklessStart,
// byteSize).
func (e *env) requireLog(tp wal.TopicIDPartition, w, hw, s, size int64) {
	e.t.Helper()
	info := e.info(tp)
	require.Equal(e.t, [4]int64{w, hw, s, size},
		[4]int64{info.LogStartOffset, info.HighWatermark, info.DisklessStartOffset, info.ByteSize}, "%s", tp)
}

func (e *env) find1(tp wal.TopicIDPartition, offset int64) wal.FindBatchesResult {
	e.t.Helper()
	res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{
		Partitions: []wal.FindPartition{{Partition: tp, Offset: offset, MaxPartitionBytes: 1 << 30}}, MaxBytes: 1 << 30})
	require.NoError(e.t, err)
	require.Len(e.t, res, 1)
	return res[0]
}

// ranges formats batches as "[base,last]@key+byteOffset".
func ranges(bs []wal.BatchInfo) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("[%d,%d]", b.BaseOffset, b.LastOffset))
	}
	return strings.Join(parts, " ")
}

func (e *env) requireAccepted(r wal.BatchResult, base int64) {
	e.t.Helper()
	require.NoError(e.t, r.Err)
	require.Equal(e.t, base, r.BaseOffset)
}

func (e *env) requireRejected(r wal.BatchResult, reason error) {
	e.t.Helper()
	require.ErrorIs(e.t, r.Err, reason)
	var be *wal.BatchRejectedError
	require.ErrorAs(e.t, r.Err, &be)
}

// marked returns the keys FilesToDelete lists as of one second from now.
func (e *env) marked() []string {
	e.t.Helper()
	files, err := e.cp.FilesToDelete(e.ctx, e.clock.Now().Add(time.Second), 0)
	require.NoError(e.t, err)
	keys := []string{}
	for _, f := range files {
		keys = append(keys, f.ObjectKey)
	}
	sort.Strings(keys)
	return keys
}

// Dump renders everything a control plane answers about parts (rows,
// batches from W, producer states) and the objects awaiting deletion, as
// canonical text: two planes in the same state dump the same text. Crash
// tests compare a reopened plane's dump with the dumps after each
// acknowledged call.
func Dump(ctx context.Context, cp wal.ControlPlane, parts []wal.TopicIDPartition, now time.Time) (string, error) {
	var b strings.Builder
	for _, tp := range parts {
		info, err := cp.LogInfo(ctx, tp)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", tp, err)
			continue
		}
		fmt.Fprintf(&b, "%s: w=%d hw=%d s=%d x=%d bytes=%d\n", tp, info.LogStartOffset, info.HighWatermark,
			info.DisklessStartOffset, info.CrossTierLogStartOffset, info.ByteSize)
		res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{Partitions: []wal.FindPartition{
			{Partition: tp, Offset: info.LogStartOffset, MaxPartitionBytes: 1 << 40}}, MaxBytes: 1 << 40})
		if err != nil {
			return "", err
		}
		for _, bi := range res[0].Batches {
			fmt.Fprintf(&b, "  [%d,%d] %s@%d+%d t=%d %+v\n", bi.BaseOffset, bi.LastOffset, bi.ObjectKey, bi.ByteOffset, bi.Size,
				bi.LogAppendTime, bi.Binding)
		}
		states, err := cp.ProducerStates(ctx, tp)
		if err != nil {
			return "", err
		}
		for _, st := range states {
			fmt.Fprintf(&b, "  producer %d@%d %v\n", st.ProducerID, st.ProducerEpoch, st.Batches)
		}
	}
	files, err := cp.FilesToDelete(ctx, now.Add(time.Hour), 0)
	if err != nil {
		return "", err
	}
	keys := make([]string, 0, len(files))
	for _, f := range files {
		keys = append(keys, fmt.Sprintf("%s@%d", f.ObjectKey, f.MarkedAt.UnixMilli()))
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "to delete: %v\n", keys)
	return b.String(), nil
}
