package segment

import (
	"math"

	"github.com/tierlog/tierlog/log/record"
)

// Defaults for Options (Kafka's).
const (
	// DefaultIndexIntervalBytes is Kafka's index.interval.bytes default.
	DefaultIndexIntervalBytes = 4096
	// DefaultMaxIndexBytes is Kafka's segment.index.bytes default.
	DefaultMaxIndexBytes = 10 << 20
)

// Options configures a segment. The zero value is the default; Create and
// Open copy it, fill defaults and validate it.
type Options struct {
	// IndexIntervalBytes is the number of .log bytes appended between
	// two offset-index entries: a batch is indexed when more than this
	// many bytes were appended since the last entry. 1 indexes every
	// batch but the first. Default 4096 (0 means default). Kafka:
	// index.interval.bytes.
	IndexIntervalBytes int
	// MaxIndexBytes is the capacity of each index file in bytes: the
	// offset index holds MaxIndexBytes/8 entries, the time index
	// MaxIndexBytes/12. Minimum 12 (one time-index entry). Default 10
	// MiB (0 means default). Kafka: segment.index.bytes.
	MaxIndexBytes int
	// MaxBatchBytes is the largest batch size, header included, that
	// Recover accepts; a batch declaring more is corruption, not a torn
	// tail. Default record.MaxBatchSize (0 means default). Kafka:
	// max.message.bytes plus the log overhead.
	MaxBatchBytes int
	// RollJitterMs is subtracted from the time limit of ShouldRoll so
	// that segments of many partitions do not roll at once. Default 0.
	// Kafka: derived from segment.jitter.ms.
	RollJitterMs int64
	// PreallocateBytes is the largest step in which Append writes zeros
	// past the end of the .log ahead of its data (reserveLog), so that an
	// fdatasync per append writes data only. Steps start at 64 KiB and
	// double with the segment's size. The zero tail is cut at
	// OnBecomeInactive and Close (a truncate, where the file supports it;
	// a file without Truncate is not preallocated); after a crash,
	// Recover and VerifyTail treat it as space, not damage. Default 0:
	// off (the log turns it on with an fsync policy); negative: off.
	// Kafka: file.preallocate (which sizes the file to segment.bytes).
	PreallocateBytes int64
	// AllocateOnly makes reserveLog ask the file system for the blocks
	// (vfs.File.Preallocate: fallocate(2) with FALLOC_FL_KEEP_SIZE on
	// Linux) instead of writing zeros. The file's size does not change,
	// so there is no zero tail and the .log stays Kafka's format byte for
	// byte; an append into the reserved blocks skips the file system's
	// block reservation of a delayed-allocation write. The fsync of such a
	// write still converts extents and records the new size, so this pays
	// without an fsync per append and the zeros pay with one. Default
	// false.
	AllocateOnly bool
	// MapReads makes reads copy from a read-only shared memory mapping of
	// the .log instead of issuing a pread, and lets Mapped return slices
	// of it (mmap.go has the lifetime). Set it only for files of the
	// operating system's file system (vfs.Default): a wrapper that
	// forwards Fd would be bypassed by every read. A file without a
	// descriptor, or a failed mmap, reads with pread. Default false.
	MapReads bool
}

// withDefaults returns a copy of o with defaults filled in, or an error
// wrapping ErrInvalidArgument.
func (o Options) withDefaults() (Options, error) {
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxIndexBytes == 0 {
		o.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if o.MaxBatchBytes == 0 || o.MaxBatchBytes > record.MaxBatchSize {
		o.MaxBatchBytes = record.MaxBatchSize
	}
	switch {
	case o.IndexIntervalBytes < 0:
		return o, invalidArgf("IndexIntervalBytes %d is negative", o.IndexIntervalBytes)
	case o.MaxIndexBytes < timeEntrySize || o.MaxIndexBytes > math.MaxInt32:
		return o, invalidArgf("MaxIndexBytes %d outside [%d, %d]", o.MaxIndexBytes, timeEntrySize, math.MaxInt32)
	case o.MaxBatchBytes < record.HeaderSize:
		return o, invalidArgf("MaxBatchBytes %d below the batch header size %d", o.MaxBatchBytes, record.HeaderSize)
	case o.RollJitterMs < 0:
		return o, invalidArgf("RollJitterMs %d is negative", o.RollJitterMs)
	}
	return o, nil
}
