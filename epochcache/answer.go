package epochcache

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// OffsetAndEpoch is an offset and the leader epoch of the record there
// (Kafka: OffsetAndEpoch), or an answer to ListOffsets. Epoch is
// record.UndefinedEpoch when unknown; Offset is record.UndefinedOffset when
// there is no answer. Printed as epoch@offset. It lives here, the lowest
// package that speaks of epochs, so log and tierstate share one type.
type OffsetAndEpoch struct {
	Offset int64
	Epoch  int32
}

func (o OffsetAndEpoch) String() string { return fmt.Sprintf("%d@%d", o.Epoch, o.Offset) }

// EpochEndOffset is one OffsetsForLeaderEpoch answer: the largest epoch <=
// the requested one that the answering log knows, and that epoch's
// exclusive end offset; both record.UndefinedEpoch and
// record.UndefinedOffset when it has none (Kafka:
// UNDEFINED_EPOCH_OFFSET). Printed as (epoch, end).
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// UndefinedEpochEndOffset is the answer "no such epoch".
var UndefinedEpochEndOffset = EpochEndOffset{Epoch: base.UndefinedEpoch, EndOffset: base.UndefinedOffset}

// Undefined reports whether the answer is "no such epoch" (an undefined
// end offset; Kafka's followers test the same field).
func (e EpochEndOffset) Undefined() bool { return e.EndOffset == base.UndefinedOffset }

func (e EpochEndOffset) String() string { return fmt.Sprintf("(%d, %d)", e.Epoch, e.EndOffset) }
