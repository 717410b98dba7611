package log

import (
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log/record"
)

// Retention sentinel values, as Kafka's configs use them.
const (
	// RetentionInfinite disables a retention limit. Kafka: -1.
	RetentionInfinite int64 = -1
	// LocalRetentionDefault makes a local retention setting follow the
	// corresponding total retention setting. Kafka: -2.
	LocalRetentionDefault int64 = -2
	// RetentionNone asks for a limit of zero in a retention field
	// (RetentionMs, RetentionBytes, LocalRetentionMs, LocalRetentionBytes):
	// Kafka's 0, keep nothing but the active segment. A literal 0 in
	// these fields means the default, as for every Options field, so the
	// zero limit needs a name of its own; Open stores it as 0.
	RetentionNone int64 = math.MinInt64
)

// Options configures a UnifiedLog. Zero means default for every field;
// Open copies the struct, fills the defaults and validates it. Each field
// names the Kafka topic config it mirrors.
type Options struct {
	// SegmentBytes is the size at which the active segment is rolled.
	// Default 1 GiB. Kafka: segment.bytes.
	SegmentBytes int64
	// SegmentMs is the age, measured by record timestamps, at which the
	// active segment is rolled. Default 7 days. Kafka: segment.ms.
	SegmentMs int64
	// SegmentIndexBytes is the capacity of each segment's offset and time
	// index. Default 10 MiB. Kafka: segment.index.bytes.
	SegmentIndexBytes int
	// IndexIntervalBytes is how many bytes of batches separate two offset
	// index entries. Default 4096. Kafka: index.interval.bytes.
	IndexIntervalBytes int
	// SegmentPreallocateBytes is the largest step in which the active
	// segment's file is extended with zeros ahead of its appends (steps
	// double from 64 KiB with the segment's size), so that an fsync per
	// append writes data only, without allocating blocks or growing the
	// file. The zero tail is cut when the segment rolls or closes;
	// recovery treats it as free space, never as records or damage.
	// It pays only with frequent fsyncs and costs a second write of every
	// byte to the page cache, so the default is 4 MiB when FlushMessages
	// is set. Without FlushMessages, on vfs.Default, the default (0)
	// reserves the blocks in the same steps with fallocate, keeping the
	// file's size (no zero tail; appends skip the file system's block
	// reservation); negative turns both off. Used only on files that can
	// be truncated (vfs.Default's). Kafka: file.preallocate.
	SegmentPreallocateBytes int64
	// MaxMessageBytes is the largest batch a leader append accepts.
	// Default 1 MiB + 12 (1048588). Kafka: max.message.bytes.
	MaxMessageBytes int
	// MaxDecompressedBytes caps the decompressed size of one compressed
	// batch a leader append validates; a batch expanding beyond it is
	// refused with ErrRecordTooLarge (a zip bomb never reaches memory).
	// Default record.DefaultMaxDecompressedBytes (64 MiB). Kafka has no
	// such limit.
	MaxDecompressedBytes int
	// MessageTimestampType says which time a leader append keeps:
	// record.CreateTime (the default) keeps the producer's timestamps,
	// record.LogAppendTime stamps every batch with the broker's clock.
	// Kafka: message.timestamp.type.
	MessageTimestampType record.TimestampType
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs bound how
	// far a CreateTime record timestamp may lie before or after the
	// broker's clock; a record outside is refused with
	// ErrInvalidTimestamp. Default 0 = no bound (Kafka 3.x's
	// Long.MAX_VALUE; Kafka 4.0 defaults the after bound to one hour).
	// Kafka: message.timestamp.before.max.ms, message.timestamp.after.max.ms.
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64

	// RetentionMs is how long records are kept, by their timestamps.
	// Default 7 days; RetentionInfinite keeps them forever, RetentionNone
	// nothing. Kafka: retention.ms.
	RetentionMs int64
	// RetentionBytes is the size the whole log (local plus remote) may
	// reach. Default RetentionInfinite. Kafka: retention.bytes. Zero is
	// the default; RetentionNone asks for a 0-byte limit.
	RetentionBytes int64
	// LocalRetentionMs is how long records stay on local disk when remote
	// storage is enabled. Default LocalRetentionDefault (= RetentionMs);
	// RetentionNone for zero. Kafka: local.retention.ms.
	LocalRetentionMs int64
	// LocalRetentionBytes is the local size limit when remote storage is
	// enabled. Default LocalRetentionDefault (= RetentionBytes);
	// RetentionNone for zero. Kafka: local.retention.bytes.
	LocalRetentionBytes int64
	// RemoteStorageEnabled tiers the log: segments are deleted locally
	// only once uploaded, and offsets below the local log start are
	// served remotely. Kafka: remote.storage.enable.
	RemoteStorageEnabled bool
	// RemoteLogCopyDisabled stops uploads; local retention then follows
	// the total retention settings. Kafka: remote.log.copy.disable.
	RemoteLogCopyDisabled bool

	// FlushMessages fsyncs the log after this many appended records.
	// Default 0 = never by count (Kafka's default, Long.MAX_VALUE, relies
	// on replication). 1 fsyncs every append before it returns. Kafka:
	// flush.messages.
	FlushMessages int64
	// FlushMs fsyncs the log when the oldest unflushed append is this old,
	// checked on each append and by MaybeFlush. Default 0 = never by
	// time. Kafka: flush.ms.
	FlushMs int64
	// RecoveryPointIntervalBytes bounds what a recovery after a crash
	// re-reads: when this many bytes of the active segment lie between
	// its last segment recovery point and the log end, the next flush
	// also makes the log end a segment recovery point (the segment's
	// index files, its transaction index and a producer snapshot there,
	// then the offsets checkpoint; docs/log.md), so recovery starts at
	// that position instead of the segment's start. Without a flush
	// policy (FlushMessages and FlushMs 0), an append that leaves this
	// many bytes unflushed also starts a flush in the background (one at
	// a time; the append does not wait), so the bound holds there too.
	// Default 16 MiB; negative turns both off (recovery then
	// reads every segment from the one holding the recovery point, and
	// the recovery point moves only with the flush policy).
	RecoveryPointIntervalBytes int64

	// ProducerIDExpirationMs is how long a producer may stay idle (no
	// batch, no marker) before RemoveExpiredProducers drops its state,
	// unless it has an open transaction. Default 1 day. Kafka:
	// producer.id.expiration.ms.
	ProducerIDExpirationMs int64

	// DisableMmapReads turns off reads through read-only memory mappings
	// of the segment files. With vfs.Default as FS (and only then: the
	// other file systems have no descriptors, or wrap the real one to
	// count or inject faults), each segment's .log is mapped on its
	// first read; reads of ranges read before (warmed in the background)
	// copy from the mapping instead of issuing a pread, so a repeated
	// point read makes no system call, while the first reads of a range
	// (a consumer at the tail, a first pass) pread and never fault; and
	// ReadSlice returns the bytes (FileSlice.Data). A mapping lives until the last reader
	// of its segment is done (docs/log.md). The cost of leaving it on:
	// a read of a page the disk cannot return is a fault, turned into an
	// I/O error for Read but not for a caller reading FileSlice.Data.
	// Default false (mapped). tierlog's own; Kafka maps its index files,
	// not its segments.
	DisableMmapReads bool

	// VerifyReads makes Read and ReadSlice check every whole batch they
	// return as recovery does (record.Batch.Validate: framing, magic,
	// the CRC-32C, header fields), through the mapping or pread alike.
	// At the first batch that fails, a read returns the batches before
	// it (counted in Metrics.ReadsCutAtDamage), or, when it is the first
	// batch, a *CorruptionError naming the segment, the batch's position
	// and the offset read (counted in Metrics.DamagedReads). Without it a
	// read checks batch headers only, and a batch whose bytes changed
	// under its CRC is served as it is: the consumer's CRC check finds it.
	// It costs a CRC-32C pass over the bytes returned, and for ReadSlice
	// without a mapping a pread of them. Default false, as in Kafka, whose
	// broker leaves the CRC to consumers (check.crcs).
	VerifyReads bool

	// ManagedCleanShutdown hands the clean-shutdown marker to the caller,
	// a log manager keeping one marker per log directory as Kafka does
	// (logmanager): Close makes durable everything the marker vouches
	// for, as always, but writes no marker of its own (one fsync less),
	// and Open trusts the segments after a clean shutdown when
	// CleanShutdown is set (or the log's own marker exists, which it then
	// removes) and removes no marker of the caller's (one fsync less).
	// The caller writes its marker only once every such log's Close
	// returned nil, and removes it durably before any of them is written
	// again. Default false: the log keeps its own marker.
	ManagedCleanShutdown bool
	// CleanShutdown, with ManagedCleanShutdown: the caller's marker
	// vouches that the log was closed cleanly.
	CleanShutdown bool

	// FS is where the log's files live. Default vfs.Default.
	FS vfs.FS
	// Logger receives the log's events. Default zap.NewNop().
	Logger *zap.Logger
	// Now returns the current time; tests inject a fake clock. Default
	// time.Now.
	Now func() time.Time
	// Listener receives notifications of roll, deletion, recovery and
	// corruption. Optional: nil callbacks are skipped.
	Listener Listener

	// mapReads is set by withDefaults: segments read through mappings.
	mapReads bool
	// osFS is set by withDefaults: the FS as given is vfs.Default, whose
	// files' descriptors the segments may use directly.
	osFS bool
}

// Defaults, as Kafka's.
const (
	DefaultSegmentBytes       int64 = 1 << 30
	DefaultSegmentMs          int64 = 7 * 24 * 60 * 60 * 1000
	DefaultSegmentIndexBytes        = 10 << 20
	DefaultIndexIntervalBytes       = 4096
	DefaultMaxMessageBytes          = 1<<20 + 12
	DefaultRetentionMs        int64 = 7 * 24 * 60 * 60 * 1000
	// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms.
	DefaultProducerIDExpirationMs int64 = 24 * 60 * 60 * 1000
	// DefaultRecoveryPointIntervalBytes is RecoveryPointIntervalBytes's
	// default (tierlog's own: Kafka recovers whole segments). A crash
	// leaves at most about twice it to re-read (the interval, plus what
	// the appends wrote while the last background flush ran), which the
	// CRC pass over the mapping reads at about 6 GB/s on a 2-vCPU
	// machine; writeback costs the same bytes at any interval.
	DefaultRecoveryPointIntervalBytes int64 = 16 << 20
)

// withDefaults returns a copy of o with defaults filled in, or an error
// naming the first invalid field.
func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentMs == 0 {
		o.SegmentMs = DefaultSegmentMs
	}
	if o.SegmentIndexBytes == 0 {
		o.SegmentIndexBytes = DefaultSegmentIndexBytes
	}
	if o.RecoveryPointIntervalBytes == 0 {
		o.RecoveryPointIntervalBytes = DefaultRecoveryPointIntervalBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.RetentionMs == 0 {
		o.RetentionMs = DefaultRetentionMs
	}
	if o.RetentionBytes == 0 {
		o.RetentionBytes = RetentionInfinite
	}
	if o.LocalRetentionMs == 0 {
		o.LocalRetentionMs = LocalRetentionDefault
	}
	if o.LocalRetentionBytes == 0 {
		o.LocalRetentionBytes = LocalRetentionDefault
	}
	for _, v := range []*int64{&o.RetentionMs, &o.RetentionBytes, &o.LocalRetentionMs, &o.LocalRetentionBytes} {
		if *v == RetentionNone {
			*v = 0 // after the defaults: a stored 0 is a real zero limit
		}
	}
	if o.ProducerIDExpirationMs == 0 {
		o.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	// Decided on the FS as given: the classifying wrapper below forwards
	// the descriptors of vfs.Default's files.
	o.osFS = o.FS == vfs.Default
	o.mapReads = o.osFS && !o.DisableMmapReads
	// Classify every file system error at the one place all I/O passes
	// (errors_io.go).
	o.FS = classifyingFS(o.FS)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.SegmentBytes < 0 || o.SegmentBytes > 1<<31-1:
		return o, fmt.Errorf("log: SegmentBytes %d outside (0, MaxInt32]: %w", o.SegmentBytes, ErrInvalidArgument)
	case o.SegmentMs < 0:
		return o, fmt.Errorf("log: SegmentMs %d is negative: %w", o.SegmentMs, ErrInvalidArgument)
	case o.SegmentIndexBytes < 24:
		return o, fmt.Errorf("log: SegmentIndexBytes %d below two index entries: %w", o.SegmentIndexBytes, ErrInvalidArgument)
	case o.IndexIntervalBytes < 0:
		return o, fmt.Errorf("log: IndexIntervalBytes %d is negative: %w", o.IndexIntervalBytes, ErrInvalidArgument)
	case o.MaxMessageBytes < 0:
		return o, fmt.Errorf("log: MaxMessageBytes %d is negative: %w", o.MaxMessageBytes, ErrInvalidArgument)
	case o.MaxDecompressedBytes < 0:
		return o, fmt.Errorf("log: MaxDecompressedBytes %d is negative: %w", o.MaxDecompressedBytes, ErrInvalidArgument)
	case o.MessageTimestampType != record.CreateTime && o.MessageTimestampType != record.LogAppendTime:
		return o, fmt.Errorf("log: MessageTimestampType %d unknown: %w", o.MessageTimestampType, ErrInvalidArgument)
	case o.MessageTimestampBeforeMaxMs < 0 || o.MessageTimestampAfterMaxMs < 0:
		return o, fmt.Errorf("log: negative message timestamp bound: %w", ErrInvalidArgument)
	case o.RetentionMs < RetentionInfinite, o.RetentionBytes < RetentionInfinite:
		return o, fmt.Errorf("log: retention below -1: %w", ErrInvalidArgument)
	case o.LocalRetentionMs < LocalRetentionDefault, o.LocalRetentionBytes < LocalRetentionDefault:
		return o, fmt.Errorf("log: local retention below -2: %w", ErrInvalidArgument)
	case o.ProducerIDExpirationMs < 0:
		return o, fmt.Errorf("log: ProducerIDExpirationMs %d is negative: %w", o.ProducerIDExpirationMs, ErrInvalidArgument)
	case o.FlushMessages < 0 || o.FlushMs < 0:
		return o, fmt.Errorf("log: negative flush setting: %w", ErrInvalidArgument)
	}
	return o, nil
}

// copyEnabled reports whether segments are being uploaded: remote storage
// on and copy not disabled. Local retention applies only then.
func (o *Options) copyEnabled() bool {
	return o.RemoteStorageEnabled && !o.RemoteLogCopyDisabled
}

// localRetentionMs resolves the retention time used for local deletion
// (LogConfig): local.retention.ms (with -2 meaning retention.ms) when
// copying, retention.ms otherwise.
func (o *Options) localRetentionMs() int64 {
	if o.copyEnabled() && o.LocalRetentionMs != LocalRetentionDefault {
		return o.LocalRetentionMs
	}
	return o.RetentionMs
}

// localRetentionBytes resolves the size limit used for local deletion.
func (o *Options) localRetentionBytes() int64 {
	if o.copyEnabled() && o.LocalRetentionBytes != LocalRetentionDefault {
		return o.LocalRetentionBytes
	}
	return o.RetentionBytes
}

func (o *Options) nowMs() int64 { return o.Now().UnixMilli() }
