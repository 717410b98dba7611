package remote

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"

	"github.com/tierlog/tierlog/epochcache"
)

// UUID is a 128-bit identifier: a topic id or a remote segment id. Its
// text form is Kafka's Uuid.toString: URL-safe base64 without padding
// (22 characters). Kafka: org.apache.kafka.common.Uuid.
type UUID [16]byte

// NewUUID returns a random UUID from crypto/rand. Like Kafka's
// Uuid.randomUuid it never returns the zero UUID, Kafka's reserved metadata
// topic id (...0001), or one whose text form starts with '-' (which command
// line tools would read as a flag).
func NewUUID() UUID {
	for {
		var u UUID
		_, _ = rand.Read(u[:]) // never fails (crypto/rand documents it)
		var reserved UUID
		reserved[15] = 1
		if u == (UUID{}) || u == reserved || u.String()[0] == '-' {
			continue
		}
		return u
	}
}

// String formats u as Kafka does: URL-safe base64, no padding.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses the String form of a UUID.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(u) {
		return u, fmt.Errorf("%w: remote: bad uuid %q", ErrInvalidArgument, s)
	}
	copy(u[:], b)
	return u, nil
}

// MaxTopicNameLen is the longest topic name Kafka allows
// (Topic.MAX_NAME_LENGTH).
const MaxTopicNameLen = 249

// TopicIDPartition names one partition of one topic incarnation: the topic
// id tells a recreated topic apart from the old one with the same name.
// Kafka: TopicIdPartition. Two values are the same partition iff all three
// fields are equal.
type TopicIDPartition struct {
	TopicID   UUID
	Topic     string
	Partition int32
}

// String formats tp as Kafka does: "<topic id>:<topic>-<partition>".
func (tp TopicIDPartition) String() string {
	return tp.TopicID.String() + ":" + tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// validate checks what the key layout needs: a topic name of 1 to
// MaxTopicNameLen bytes and a non-negative partition.
func (tp TopicIDPartition) validate() error {
	if p := tp.problem(); p != "" {
		return fmt.Errorf("%w: remote: partition %s: %s", ErrInvalidArgument, tp, p)
	}
	return nil
}

func (tp TopicIDPartition) problem() string {
	if len(tp.Topic) == 0 || len(tp.Topic) > MaxTopicNameLen {
		return fmt.Sprintf("topic name of %d bytes (want 1 to %d)", len(tp.Topic), MaxTopicNameLen)
	}
	if tp.Partition < 0 {
		return "negative partition"
	}
	return ""
}

// SegmentID identifies one copy attempt of one local segment: every attempt
// gets a fresh random ID, so a retried upload never overwrites
// another attempt's objects or metadata. Kafka: RemoteLogSegmentId.
type SegmentID struct {
	TopicIDPartition TopicIDPartition
	ID               UUID
}

// NewSegmentID returns a SegmentID with a fresh random ID.
func NewSegmentID(tp TopicIDPartition) SegmentID {
	return SegmentID{TopicIDPartition: tp, ID: NewUUID()}
}

// String formats id as "<topic id>:<topic>-<partition>/<id>".
func (id SegmentID) String() string {
	return id.TopicIDPartition.String() + "/" + id.ID.String()
}

// SegmentState is the lifecycle state of a remote segment. The values are
// Kafka's RemoteLogSegmentState ids, which is also how they are stored.
type SegmentState uint8

const (
	// CopySegmentStarted: the copy began; the data may be partial. Listed,
	// never returned by SegmentFor.
	CopySegmentStarted SegmentState = 0
	// CopySegmentFinished: the data is complete and readable.
	CopySegmentFinished SegmentState = 1
	// DeleteSegmentStarted: a deletion began; no longer readable, still
	// listed so a crashed deletion is retried.
	DeleteSegmentStarted SegmentState = 2
	// DeleteSegmentFinished: the data is gone; the manager forgets the
	// segment.
	DeleteSegmentFinished SegmentState = 3

	// NoSegmentState stands for "(none)" in the transition table of
	// IsValidTransition: the state of
	// a segment the manager does not know. It is never stored.
	NoSegmentState SegmentState = 0xff
)

// String returns Kafka's name of the state.
func (s SegmentState) String() string {
	switch s {
	case CopySegmentStarted:
		return "COPY_SEGMENT_STARTED"
	case CopySegmentFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteSegmentStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteSegmentFinished:
		return "DELETE_SEGMENT_FINISHED"
	case NoSegmentState:
		return "(none)"
	}
	return "SegmentState(" + strconv.Itoa(int(s)) + ")"
}

func (s SegmentState) valid() bool { return s <= DeleteSegmentFinished }

// IsValidTransition reports whether Kafka's rules allow a segment to move
// from state from (NoSegmentState for an unknown segment) to state to.
// Kafka: RemoteLogSegmentState.isValidTransition.
//
//	(none)                 -> COPY_SEGMENT_STARTED
//	COPY_SEGMENT_STARTED   -> COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED
//	COPY_SEGMENT_FINISHED  -> DELETE_SEGMENT_STARTED
//	DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED
//	any state              -> the same state (an idempotent retry)
func IsValidTransition(from, to SegmentState) bool {
	if !to.valid() {
		return false
	}
	switch {
	case from == NoSegmentState:
		return to == CopySegmentStarted
	case from == to:
		return true
	case from == CopySegmentStarted:
		return to == CopySegmentFinished || to == DeleteSegmentStarted
	case from == CopySegmentFinished:
		return to == DeleteSegmentStarted
	case from == DeleteSegmentStarted:
		return to == DeleteSegmentFinished
	}
	return false
}

// MaxCustomMetadataBytes bounds SegmentMetadata.CustomMetadata. Kafka's
// remote.log.metadata.custom.metadata.max.bytes (default 128) is enforced
// by the copy task; this is the hard limit of the stored format.
const MaxCustomMetadataBytes = 1 << 20

// SegmentMetadata describes one remote segment (one copy attempt). Offsets
// are inclusive at both ends, as in Kafka. Kafka: RemoteLogSegmentMetadata.
//
// Values returned by a MetadataManager share SegmentLeaderEpochs and
// CustomMetadata with the manager: treat both slices as read-only.
type SegmentMetadata struct {
	SegmentID SegmentID
	// StartOffset is the first offset of the segment (inclusive, >= 0).
	StartOffset int64
	// EndOffset is the last offset of the segment (inclusive,
	// >= StartOffset): the next local segment's base offset minus one.
	EndOffset int64
	// SegmentLeaderEpochs maps each leader epoch with records in the
	// segment to its first offset inside the segment, sorted by epoch and
	// offset. Every entry lies in [StartOffset, EndOffset]; the first
	// starts at StartOffset, or above it when DeleteRecords moved the log
	// start inside the segment before it was copied (the records below
	// have no epoch in the cache any more, and no reader asks for them).
	// The copy task builds it with epochcache EntriesInRange(segment base,
	// next segment base).
	SegmentLeaderEpochs []epochcache.Entry
	// SizeBytes is the size of the segment's data in bytes.
	SizeBytes int64
	// MaxTimestampMs is the largest record timestamp in the segment
	// (time retention compares it).
	MaxTimestampMs int64
	// BrokerID is the broker that produced this event.
	BrokerID int32
	// EventTimestampMs is when this state was reached.
	EventTimestampMs int64
	// State is the lifecycle state (see IsValidTransition).
	State SegmentState
	// TxnIndexEmpty is true when the segment has no aborted transactions
	// (no transaction index was uploaded).
	TxnIndexEmpty bool
	// CustomMetadata is optional data the storage manager returned from
	// the copy; nil when there is none. At most MaxCustomMetadataBytes.
	CustomMetadata []byte
}

// Validate checks the rules of Kafka's RemoteLogSegmentMetadata and what
// the stored format needs. It returns a *SegmentMetadataError naming the
// first broken rule.
func (m *SegmentMetadata) Validate() error {
	bad := func(format string, args ...any) error {
		return &SegmentMetadataError{SegmentID: m.SegmentID, Reason: fmt.Sprintf(format, args...)}
	}
	if p := m.SegmentID.TopicIDPartition.problem(); p != "" {
		return bad("%s", p)
	}
	switch {
	case m.StartOffset < 0:
		return bad("start offset %d < 0", m.StartOffset)
	case m.EndOffset < m.StartOffset:
		return bad("end offset %d < start offset %d", m.EndOffset, m.StartOffset)
	case m.SizeBytes < 0:
		return bad("size %d < 0", m.SizeBytes)
	case !m.State.valid():
		return bad("unknown state %d", m.State)
	case len(m.CustomMetadata) > MaxCustomMetadataBytes:
		return bad("custom metadata of %d bytes > %d", len(m.CustomMetadata), MaxCustomMetadataBytes)
	case len(m.SegmentLeaderEpochs) == 0:
		return bad("no segment leader epochs")
	case m.SegmentLeaderEpochs[0].StartOffset < m.StartOffset:
		// Above it is allowed, as in Kafka: DeleteRecords inside a
		// segment truncates the epoch cache from the start at the new
		// log start, and the segment's records below it have no epoch
		// any more (and are never read).
		return bad("first leader epoch %s starts below the segment start %d",
			m.SegmentLeaderEpochs[0], m.StartOffset)
	}
	for i, e := range m.SegmentLeaderEpochs {
		if e.Epoch < 0 {
			return bad("negative leader epoch in %s", e)
		}
		if e.StartOffset > m.EndOffset {
			return bad("leader epoch %s starts after the segment end %d", e, m.EndOffset)
		}
		if i > 0 {
			prev := m.SegmentLeaderEpochs[i-1]
			if e.Epoch <= prev.Epoch || e.StartOffset <= prev.StartOffset {
				return bad("leader epochs not strictly increasing: %s then %s", prev, e)
			}
		}
	}
	return nil
}

// HeldStartOffset is the first offset the segment holds a record of its
// leader epochs at: its first epoch entry's start, above StartOffset when
// DeleteRecords moved the log start inside the segment before it was
// copied (the records below have no epoch and are never served; the
// segment's files and offset index still begin at StartOffset).
func (m *SegmentMetadata) HeldStartOffset() int64 {
	if len(m.SegmentLeaderEpochs) > 0 {
		return max(m.StartOffset, m.SegmentLeaderEpochs[0].StartOffset)
	}
	return m.StartOffset
}

// epochRange returns the offsets [start, end] (both inclusive) epoch covers
// inside the segment: from its entry to the next entry's start minus one,
// or to EndOffset for the last entry. ok is false if the segment has no
// entry for epoch. Kafka: RemoteLogMetadataCache.highestOffsetForEpoch
// (the per-segment one).
func (m *SegmentMetadata) epochRange(epoch int32) (start, end int64, ok bool) {
	epochs := m.SegmentLeaderEpochs
	i, found := slices.BinarySearchFunc(epochs, epoch, func(e epochcache.Entry, t int32) int {
		return cmp.Compare(e.Epoch, t)
	})
	if !found {
		return 0, 0, false
	}
	end = m.EndOffset
	if i+1 < len(epochs) {
		end = epochs[i+1].StartOffset - 1
	}
	return epochs[i].StartOffset, end, true
}

// sameCopy reports whether a and b describe the same copy attempt: equal in
// every field a retried AddSegment may not change (all but BrokerID,
// EventTimestampMs and CustomMetadata).
func sameCopy(a, b *SegmentMetadata) bool {
	return a.SegmentID == b.SegmentID && a.StartOffset == b.StartOffset &&
		a.EndOffset == b.EndOffset && a.SizeBytes == b.SizeBytes &&
		a.MaxTimestampMs == b.MaxTimestampMs && a.TxnIndexEmpty == b.TxnIndexEmpty &&
		slices.Equal(a.SegmentLeaderEpochs, b.SegmentLeaderEpochs)
}

// equalMetadata reports whether a and b are identical, field by field.
func equalMetadata(a, b *SegmentMetadata) bool {
	return sameCopy(a, b) && a.BrokerID == b.BrokerID && a.EventTimestampMs == b.EventTimestampMs &&
		a.State == b.State && (a.CustomMetadata == nil) == (b.CustomMetadata == nil) &&
		bytes.Equal(a.CustomMetadata, b.CustomMetadata)
}

// SegmentMetadataUpdate moves a segment to a new state. Kafka:
// RemoteLogSegmentMetadataUpdate.
type SegmentMetadataUpdate struct {
	SegmentID SegmentID
	// State is the target state; never CopySegmentStarted (use AddSegment).
	State            SegmentState
	EventTimestampMs int64
	BrokerID         int32
	// CustomMetadata replaces the segment's custom metadata when non-nil;
	// nil keeps it (see docs/deviations.md).
	CustomMetadata []byte
}

// PartitionDeleteState is the state of a partition's deletion. The values
// are Kafka's RemotePartitionDeleteState ids.
type PartitionDeleteState uint8

const (
	// DeletePartitionMarked: the partition is marked for deletion.
	DeletePartitionMarked PartitionDeleteState = 0
	// DeletePartitionStarted: its remote segments are being deleted.
	DeletePartitionStarted PartitionDeleteState = 1
	// DeletePartitionFinished: all are deleted; the manager forgets the
	// partition and all its metadata.
	DeletePartitionFinished PartitionDeleteState = 2

	// NoPartitionDeleteState stands for a partition not being deleted.
	NoPartitionDeleteState PartitionDeleteState = 0xff
)

// String returns Kafka's name of the state.
func (s PartitionDeleteState) String() string {
	switch s {
	case DeletePartitionMarked:
		return "DELETE_PARTITION_MARKED"
	case DeletePartitionStarted:
		return "DELETE_PARTITION_STARTED"
	case DeletePartitionFinished:
		return "DELETE_PARTITION_FINISHED"
	case NoPartitionDeleteState:
		return "(none)"
	}
	return "PartitionDeleteState(" + strconv.Itoa(int(s)) + ")"
}

// IsValidPartitionDeleteTransition reports whether a partition may move
// from one delete state to another: (none) -> MARKED -> STARTED -> FINISHED,
// and any state to itself. Kafka: RemotePartitionDeleteState.isValidTransition.
func IsValidPartitionDeleteTransition(from, to PartitionDeleteState) bool {
	if to > DeletePartitionFinished {
		return false
	}
	switch {
	case from == NoPartitionDeleteState:
		return to == DeletePartitionMarked
	case from == to:
		return true
	case from == DeletePartitionMarked:
		return to == DeletePartitionStarted
	case from == DeletePartitionStarted:
		return to == DeletePartitionFinished
	}
	return false
}

// PartitionDeleteMetadata records a step of a partition's deletion. Kafka:
// RemotePartitionDeleteMetadata.
type PartitionDeleteMetadata struct {
	TopicIDPartition TopicIDPartition
	State            PartitionDeleteState
	EventTimestampMs int64
	BrokerID         int32
}
