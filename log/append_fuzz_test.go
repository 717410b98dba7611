package log

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

// FuzzLeaderAppend appends arbitrary bytes as one leader append to an
// empty log. With fix set, the input is made one batch with magic 2 and a
// correct length and CRC, so mutations reach the record validation rather
// than stopping at the CRC. The invariant: a refused append is a typed
// error and leaves the log empty; an accepted one reads back byte for byte
// (offsets and epoch stamped), every record at the offset the append
// reported, and never a panic.
func FuzzLeaderAppend(f *testing.F) {
	for _, seed := range leaderAppendSeeds(f) {
		f.Add(seed, false, false)
		f.Add(seed, true, false)
		f.Add(seed, true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix, coordinator bool) {
		if fix && len(data) >= record.HeaderSize {
			data[16] = record.Magic
			fixCRC(data)
		}
		origin := OriginClient
		if coordinator {
			origin = OriginCoordinator
		}
		l := openTestLog(t, vfs.NewMem(), Options{MaxDecompressedBytes: 1 << 20})
		defer l.Close()
		info, err := l.AppendAsLeader(data, 3, origin)
		if err != nil {
			var ae *AppendError
			require.True(t, errors.As(err, &ae) || errors.Is(err, ErrBatchTooLarge) || isProducerStateError(err),
				"untyped %T: %v", err, err)
			require.True(t, errors.Is(err, ErrCorruption) || errors.Is(err, ErrInvalidRecord) ||
				errors.Is(err, ErrInvalidTimestamp) || errors.Is(err, ErrRecordTooLarge) ||
				errors.Is(err, ErrBatchTooLarge) || isProducerStateError(err), "unexpected kind: %v", err)
			require.Zero(t, l.LogEndOffset())
			return
		}
		if info.Batches == 0 {
			require.Empty(t, data)
			require.Zero(t, l.LogEndOffset())
			return
		}
		require.Equal(t, int64(0), info.FirstOffset)
		require.Equal(t, info.LastOffset+1, l.LogEndOffset())
		require.Equal(t, info.Records, info.LastOffset+1)
		read, err := l.Read(nil, 0, len(data)+1, IsolationLogEnd, true)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, read.Records), "read back differs from the stamped input")
		it := record.NewIter(record.IterOptions{MaxDecompressedBytes: 1 << 20})
		s := record.NewScanner(read.Records, record.ScannerOptions{})
		next := int64(0)
		for s.Next() {
			b := s.Batch()
			require.Equal(t, int32(3), b.PartitionLeaderEpoch())
			require.Equal(t, next, b.BaseOffset())
			for it.Reset(b); it.Next(); next++ {
				require.Equal(t, next, it.Record().Offset)
			}
			require.NoError(t, it.Err())
			require.Equal(t, b.NextOffset(), next, "batch offsets not all records")
		}
		require.NoError(t, s.Err())
		require.Equal(t, l.LogEndOffset(), next)
	})
}

// isProducerStateError reports the producer-state refusals an arbitrary
// idempotent batch can meet.
func isProducerStateError(err error) bool {
	return errors.Is(err, ErrOutOfOrderSequence) || errors.Is(err, ErrInvalidProducerEpoch) ||
		errors.Is(err, ErrInvalidTxnState) || errors.Is(err, ErrTransactionCoordinatorFenced) ||
		errors.Is(err, ErrUnknownProducerID)
}

// leaderAppendSeeds returns valid appends of each codec, an idempotent
// and a transactional batch, a control marker and two batches in a row.
func leaderAppendSeeds(f *testing.F) [][]byte {
	build := func(o record.BuilderOptions, n int) []byte {
		b := record.NewBuilder(o)
		for i := 0; i < n; i++ {
			b.Add(validateNowMs+int64(i), []byte("k"), []byte("value"), record.Header{Key: "h", Value: []byte("v")})
		}
		buf, err := b.Build()
		if err != nil {
			f.Fatal(err)
		}
		return buf
	}
	var seeds [][]byte
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionGzip,
		record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		seeds = append(seeds, build(compressed(c), 3))
	}
	seeds = append(seeds, build(idempotent(9, 0, 0), 2))
	txn := idempotent(9, 0, 0)
	txn.Transactional = true
	seeds = append(seeds, build(txn, 2))
	marker, err := record.AppendEndTxnBatch(nil, idempotent(9, 0, -1), validateNowMs, record.ControlCommit, 0)
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, marker)
	two := build(record.DefaultBuilderOptions(), 1)
	seeds = append(seeds, append(two, build(record.DefaultBuilderOptions(), 2)...))
	return seeds
}
