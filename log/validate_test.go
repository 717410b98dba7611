package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// Byte offsets of the v2 header fields the hostile batches below edit.
const (
	hdrAttributes      = 21
	hdrLastOffsetDelta = 23
	hdrMaxTimestamp    = 35
	hdrRecordsCount    = 57
)

const validateNowMs = 1_000_000

// hostileBatch builds one client batch of n records (timestamps ts, 10-byte
// values) with opts, applies damage, and fixes up the length and CRC so
// that only the checks after the CRC can catch the damage.
func hostileBatch(t *testing.T, opts record.BuilderOptions, n int, ts int64, damage func([]byte) []byte) []byte {
	t.Helper()
	b := record.NewBuilder(opts)
	for i := 0; i < n; i++ {
		b.Add(ts, nil, bytes.Repeat([]byte{'v'}, 10))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	if damage != nil {
		buf = damage(buf)
	}
	return fixCRC(buf)
}

// fixCRC rewrites a batch's Length field and CRC after an edit.
func fixCRC(buf []byte) []byte {
	binary.BigEndian.PutUint32(buf[8:], uint32(len(buf)-record.LogOverhead))
	binary.BigEndian.PutUint32(buf[17:], crc32.Checksum(buf[hdrAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return buf
}

func putI32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}

func putI16(off int, v int16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], uint16(v)); return b }
}

// orAttr sets attribute bits.
func orAttr(bits int16) func([]byte) []byte {
	return func(b []byte) []byte {
		a := int16(binary.BigEndian.Uint16(b[hdrAttributes:]))
		binary.BigEndian.PutUint16(b[hdrAttributes:], uint16(a|bits))
		return b
	}
}

// swapFirstOffsetDeltas swaps the offset deltas of the first two records
// of an uncompressed batch whose records have timestamp delta 0 (so each
// record starts: length, attributes, timestamp delta 0, offset delta).
func swapFirstOffsetDeltas(b []byte) []byte {
	first := record.HeaderSize
	len0, n := record.Varint(b[first:])
	second := first + n + int(len0)
	b[first+n+2], b[second+n+2] = b[second+n+2], b[first+n+2]
	return b
}

// compressed returns opts with a codec.
func compressed(c record.Compression) record.BuilderOptions {
	o := record.DefaultBuilderOptions()
	o.Compression = c
	return o
}

func idempotent(pid int64, epoch int16, seq int32) record.BuilderOptions {
	o := record.DefaultBuilderOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, epoch, seq
	return o
}

// TestLeaderAppendValidation sends hostile batches as leader appends. Each
// refused one must come back as an *AppendError with the batch's index
// and base offset, unwrapping to the kind Kafka answers with, and leave
// the log as it was: log end offset 1, one record readable.
func TestLeaderAppendValidation(t *testing.T) {
	def := record.DefaultBuilderOptions()
	zstdBomb := func() []byte {
		// 4 records of 64 KiB of zeros: a few hundred bytes compressed,
		// 256 KiB decompressed, above the 128 KiB limit below.
		b := record.NewBuilder(compressed(record.CompressionZstd))
		for i := 0; i < 4; i++ {
			b.Add(validateNowMs, nil, make([]byte, 64<<10))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		return buf
	}
	for _, tc := range []struct {
		name   string
		origin AppendOrigin
		opts   Options
		batch  func(t *testing.T) []byte
		want   error // nil: accepted
		record int   // RecordError.Record, when want is a record error
	}{
		{name: "count-below-last-offset-delta-plus-one", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 3, validateNowMs, putI32(hdrLastOffsetDelta, 3))
			}},
		{name: "count-above-records-present", want: ErrInvalidRecord, record: 3,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 3, validateNowMs, func(b []byte) []byte {
					putI32(hdrLastOffsetDelta, 3)(b)
					return putI32(hdrRecordsCount, 4)(b)
				})
			}},
		{name: "fewer-records-declared-than-present", want: ErrInvalidRecord, record: 2,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 3, validateNowMs, func(b []byte) []byte {
					putI32(hdrLastOffsetDelta, 1)(b)
					return putI32(hdrRecordsCount, 2)(b)
				})
			}},
		{name: "last-offset-delta-max-int32", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 1, validateNowMs, putI32(hdrLastOffsetDelta, math.MaxInt32))
			}},
		{name: "empty-batch", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 1, validateNowMs, func(b []byte) []byte {
					return putI32(hdrRecordsCount, 0)(b[:record.HeaderSize])
				})
			}},
		{name: "garbage-varints", want: ErrInvalidRecord, record: 0,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 2, validateNowMs, func(b []byte) []byte {
					for i := record.HeaderSize; i < len(b); i++ {
						b[i] = 0xff
					}
					return b
				})
			}},
		{name: "offset-deltas-out-of-order", want: ErrInvalidRecord, record: 0,
			batch: func(t *testing.T) []byte { return hostileBatch(t, def, 2, validateNowMs, swapFirstOffsetDeltas) }},
		{name: "client-log-append-time", want: ErrInvalidTimestamp, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 1, validateNowMs, orAttr(record.AttrTimestampType))
			}},
		{name: "timestamp-after-bound", opts: Options{MessageTimestampAfterMaxMs: 1000}, want: ErrInvalidTimestamp, record: 0,
			batch: func(t *testing.T) []byte { return hostileBatch(t, def, 1, validateNowMs+1001, nil) }},
		{name: "timestamp-before-bound", opts: Options{MessageTimestampBeforeMaxMs: 1000}, want: ErrInvalidTimestamp, record: 0,
			batch: func(t *testing.T) []byte { return hostileBatch(t, def, 1, validateNowMs-1001, nil) }},
		{name: "timestamp-at-bounds", opts: Options{MessageTimestampBeforeMaxMs: 1000, MessageTimestampAfterMaxMs: 1000},
			batch: func(t *testing.T) []byte { return hostileBatch(t, def, 1, validateNowMs+1000, nil) }},
		{name: "producer-id-without-sequence", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte { return hostileBatch(t, idempotent(7, 0, -1), 1, validateNowMs, nil) }},
		{name: "producer-id-with-negative-epoch", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte { return hostileBatch(t, idempotent(7, -3, 0), 1, validateNowMs, nil) }},
		{name: "transactional-without-producer-id", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 1, validateNowMs, orAttr(record.AttrTransactional))
			}},
		{name: "coordinator-control-without-producer-id", origin: OriginCoordinator, want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte { return hostileBatch(t, def, 1, validateNowMs, orAttr(record.AttrControl)) }},
		{name: "coordinator-control-not-a-marker", origin: OriginCoordinator, want: ErrInvalidRecord, record: 0,
			batch: func(t *testing.T) []byte {
				o := idempotent(7, 0, -1)
				o.Control, o.Transactional = true, true
				return hostileBatch(t, o, 1, validateNowMs, nil) // key nil: no control key
			}},
		{name: "coordinator-marker-accepted", origin: OriginCoordinator,
			batch: func(t *testing.T) []byte {
				b, err := record.AppendEndTxnBatch(nil, idempotent(7, 0, -1), validateNowMs, record.ControlAbort, 0)
				require.NoError(t, err)
				return b
			}},
		{name: "delete-horizon", want: ErrInvalidRecord, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, def, 1, validateNowMs, orAttr(record.AttrDeleteHorizon))
			}},
		{name: "gzip-garbage", want: ErrCorruption, record: -1,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, compressed(record.CompressionGzip), 3, validateNowMs, func(b []byte) []byte {
					for i := record.HeaderSize + 10; i < len(b); i++ {
						b[i] ^= 0x5a
					}
					return b
				})
			}},
		{name: "zstd-count-above-records", want: ErrInvalidRecord, record: 3,
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, compressed(record.CompressionZstd), 3, validateNowMs, func(b []byte) []byte {
					putI32(hdrLastOffsetDelta, 3)(b)
					return putI32(hdrRecordsCount, 4)(b)
				})
			}},
		{name: "zstd-bomb", opts: Options{MaxDecompressedBytes: 128 << 10}, want: ErrRecordTooLarge, record: -1,
			batch: func(t *testing.T) []byte { return zstdBomb() }},
		{name: "zstd-within-limit", opts: Options{MaxDecompressedBytes: 512 << 10},
			batch: func(t *testing.T) []byte { return zstdBomb() }},
		{name: "lz4-accepted",
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, compressed(record.CompressionLZ4), 5, validateNowMs, nil)
			}},
		{name: "snappy-accepted",
			batch: func(t *testing.T) []byte {
				return hostileBatch(t, compressed(record.CompressionSnappy), 5, validateNowMs, nil)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem(), tc.opts)
			defer l.Close()
			appendRecords(t, l, 0, 1, validateNowMs)
			buf := tc.batch(t)
			info, err := l.AppendAsLeader(buf, 0, tc.origin)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, int64(1), info.FirstOffset)
				requireReadsBack(t, l, 1, info.LastOffset+1)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var ae *AppendError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, 0, ae.BatchIndex)
			require.Equal(t, int64(0), ae.BaseOffset)
			var re *RecordError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.record, re.Record, "record index; reason %q", re.Reason)
			if tc.want != ErrCorruption {
				require.NotErrorIs(t, err, ErrCorruption, "INVALID_RECORD and CORRUPT_MESSAGE must stay apart")
			}
			require.Equal(t, [2]int64{-1, -1}, [2]int64{info.FirstOffset, info.LastOffset}, "refused append reports no offsets")
			require.Equal(t, int64(1), l.LogEndOffset())
			requireReadsBack(t, l, 0, 1)
		})
	}
}

// requireReadsBack reads the whole log from 0 and checks that exactly
// the records [from, to) of the last appends decode at their offsets with
// a valid CRC, and that nothing else follows.
func requireReadsBack(t *testing.T, l *UnifiedLog, from, to int64) {
	t.Helper()
	info, err := l.Read(nil, from, 8<<20, IsolationLogEnd, true)
	require.NoError(t, err)
	next := from
	var it record.Iter
	s := record.NewScanner(info.Records, record.ScannerOptions{})
	for s.Next() {
		b := s.Batch()
		for it.Reset(b); it.Next(); next++ {
			require.Equal(t, next, it.Record().Offset)
		}
		require.NoError(t, it.Err())
	}
	require.NoError(t, s.Err())
	require.Equal(t, to, next)
	require.Equal(t, to, l.LogEndOffset())
}

// TestLeaderAppendStampsTimestamps: a CreateTime batch whose MaxTimestamp
// disagrees with its records is corrected (as Kafka's LogValidator does,
// in place with a new CRC), and a LogAppendTime log stamps its clock.
func TestLeaderAppendStampsTimestamps(t *testing.T) {
	t.Run("create-time-max-corrected", func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		buf := hostileBatch(t, record.DefaultBuilderOptions(), 2, 5000, func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[hdrMaxTimestamp:], math.MaxInt64)
			return b
		})
		info, err := l.AppendAsLeader(buf, 0, OriginClient)
		require.NoError(t, err)
		require.Equal(t, int64(5000), info.MaxTimestamp)
		b := readFirstBatch(t, l)
		require.Equal(t, int64(5000), b.MaxTimestamp())
		require.Equal(t, record.CreateTime, b.TimestampType())
	})
	t.Run("log-append-time", func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{MessageTimestampType: record.LogAppendTime,
			Now: func() time.Time { return time.UnixMilli(777_000) }})
		defer l.Close()
		info, err := l.AppendAsLeader(hostileBatch(t, record.DefaultBuilderOptions(), 3, 5000, nil), 0, OriginClient)
		require.NoError(t, err)
		require.Equal(t, int64(777_000), info.MaxTimestamp)
		b := readFirstBatch(t, l)
		require.Equal(t, record.LogAppendTime, b.TimestampType())
		var it record.Iter
		for it.Reset(b); it.Next(); {
			require.Equal(t, int64(777_000), it.Record().Timestamp)
		}
		require.NoError(t, it.Err())
	})
}

func readFirstBatch(t *testing.T, l *UnifiedLog) record.Batch {
	t.Helper()
	info, err := l.Read(nil, 0, 1<<20, IsolationLogEnd, true)
	require.NoError(t, err)
	b, err := record.ReadBatch(info.Records)
	require.NoError(t, err)
	require.NoError(t, b.Validate())
	return b
}

// TestFollowerAppendHeaderChecks: a follower does not decode records (nor
// does Kafka's), but batches whose header cannot be true are refused as
// corrupt before anything is written, not accepted or left to fail the
// segment write (which would take the log offline).
func TestFollowerAppendHeaderChecks(t *testing.T) {
	leaderBatch := func(t *testing.T, baseOffset int64, damage func([]byte) []byte) []byte {
		o := record.DefaultBuilderOptions()
		o.BaseOffset, o.PartitionLeaderEpoch = baseOffset, 0
		return hostileBatch(t, o, 3, validateNowMs, damage)
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		// Built at 1 and moved (the base offset is outside the CRC): the
		// builder refuses to build it.
		{"last-offset-overflows", leaderBatch(t, 1, func(b []byte) []byte {
			binary.BigEndian.PutUint64(b, math.MaxInt64)
			return b
		}), ErrCorruption},
		{"count-zero-with-records", leaderBatch(t, 1, putI32(hdrRecordsCount, 0)), ErrCorruption},
		{"count-above-delta", leaderBatch(t, 1, putI32(hdrRecordsCount, 4)), ErrCorruption},
		{"bad-crc", func() []byte {
			b := leaderBatch(t, 1, nil)
			b[len(b)-1] ^= 1
			return b
		}(), ErrCorruption},
		// Records are not decoded: the leader validated them and the CRC
		// covers them. Kafka's follower path does the same.
		{"undecodable-records-accepted", leaderBatch(t, 1, func(b []byte) []byte {
			b[record.HeaderSize] = 0xff
			return b
		}), nil},
		{"producer-epoch-negative-accepted", leaderBatch(t, 1, putI16(51, -2)), nil},
		// [1, 3] then [2, 4]: the last offsets increase, the ranges overlap.
		{"overlapping-batches", append(leaderBatch(t, 1, nil), leaderBatch(t, 2, nil)...), ErrOffsetsOutOfOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem(), Options{})
			defer l.Close()
			appendRecords(t, l, 0, 1, validateNowMs)
			_, err := l.AppendAsFollower(tc.batch, 0)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, int64(4), l.LogEndOffset())
				return
			}
			require.ErrorIs(t, err, tc.want)
			var ae *AppendError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, baseOfBatch(tc.batch, ae.BatchIndex), ae.BaseOffset, "the batch's base offset")
			require.Equal(t, int64(1), l.LogEndOffset())
			requireReadsBack(t, l, 0, 1)
			// The log is not offline: a good append still works.
			_, err = l.AppendAsFollower(leaderBatch(t, 1, nil), 0)
			require.NoError(t, err)
			require.False(t, errors.Is(err, ErrCorruption))
		})
	}
}

// TestLeaderAppendValidationAllocatesNothing: decoding every record of a
// leader append (each codec) allocates nothing once the pooled iterator
// is warm. Without -race and the invariants tag only: under -race
// sync.Pool drops items at random, and assertions box their arguments.
func TestLeaderAppendValidationAllocatesNothing(t *testing.T) {
	if invariants.Enabled {
		t.Skip("allocation counts differ under -race and -tags invariants")
	}
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionGzip,
		record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		l := openTestLog(t, vfs.NewMem(), Options{})
		src := hostileBatch(t, compressed(c), 10, validateNowMs, nil)
		buf := make([]byte, len(src))
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf, src)
			if _, err := l.AppendAsLeader(buf, 0, OriginClient); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "%s", c)
		require.NoError(t, l.Close())
	}
}

// baseOfBatch returns the base offset field of the i-th batch of buf,
// walking the Length fields (the batches need not validate).
func baseOfBatch(buf []byte, i int) int64 {
	for ; i > 0; i-- {
		buf = buf[record.LogOverhead+int(binary.BigEndian.Uint32(buf[8:])):]
	}
	return int64(binary.BigEndian.Uint64(buf))
}
