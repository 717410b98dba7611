package log

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/countfs"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// The benchmarks compare the log against a raw-file baseline in the same
// run: a plain write (and fdatasync) of the same bytes, a plain pread of
// them. Run: go test -run XXX -bench . -benchtime=2s ./log
//
// Files go to a temporary directory on the real file system (vfs.Default).
// Both sides rotate their file every rotateBytes so that long runs do not
// fill the disk; the rotation cost is inside both measurements.

const rotateBytes = 256 << 20

// benchValue is a record value of n bytes (a fixed, non-zero pattern).
func benchValue(n int) []byte {
	value := make([]byte, n)
	for i := range value {
		value[i] = byte(i * 7)
	}
	return value
}

// benchBatch builds one client batch of n records of recordBytes each.
func benchBatch(b *testing.B, n, recordBytes int) []byte {
	b.Helper()
	value := benchValue(recordBytes)
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	for i := 0; i < n; i++ {
		bl.Add(1_700_000_000_000, nil, value)
	}
	buf, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

func benchLog(b *testing.B, dir string, o Options) *UnifiedLog {
	b.Helper()
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = rotateBytes
	}
	o.RetentionBytes = rotateBytes
	// The batches carry a fixed 2023 timestamp: without this, time
	// retention would delete (and roll) on every rotation check, and the
	// benchmark would measure retention instead of appends.
	o.RetentionMs = RetentionInfinite
	l, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []struct {
		name    string
		records int
	}{{"16KiB", 16}, {"1MiB", 1024}} {
		for _, sync := range []bool{false, true} {
			name := fmt.Sprintf("batch-bytes=%s/records=1KiB/sync=%t", size.name, sync)
			batch := benchBatch(b, size.records, 1024-21) // ~1 KiB per encoded record
			b.Run(name+"/impl=tierlog", func(b *testing.B) { benchAppendLog(b, batch, sync, 0) })
			b.Run(name+"/impl=raw-file", func(b *testing.B) { benchAppendRaw(b, batch, sync, 0) })
			if !sync {
				// The cost of the background flush (an fdatasync every
				// RecoveryPointIntervalBytes, beside the appends).
				b.Run(name+"/impl=tierlog/points=off", func(b *testing.B) {
					benchAppendLogOpts(b, batch, Options{SegmentPreallocateBytes: 0, RecoveryPointIntervalBytes: -1})
				})
				b.Run(name+"/impl=tierlog/prealloc=4MiB", func(b *testing.B) { benchAppendLog(b, batch, sync, 4<<20) })
				// The raw file doing the recovery point's durability work:
				// an fdatasync started in the background every 16 MiB
				// (at most one at a time), as the log's background flush
				// does. The plain raw row leaves every byte in the page
				// cache until after the run.
				b.Run(name+"/impl=raw-file/points=default", func(b *testing.B) {
					benchAppendRawPoints(b, batch, DefaultRecoveryPointIntervalBytes)
				})
				// The batch built by record.Builder inside the timed
				// region: copied out by AppendTo and checksummed again by
				// the log's validation, or finished in place by the log
				// (one copy of each value, one CRC pass); the raw file
				// writes what Finish returns.
				for _, mode := range []string{"append-to", "finish"} {
					b.Run(name+"/impl=tierlog/builder="+mode, func(b *testing.B) { benchAppendBuilder(b, size.records, mode) })
				}
				b.Run(name+"/impl=raw-file/builder=finish", func(b *testing.B) { benchAppendRawBuilder(b, size.records) })
			}
			if sync {
				// Preallocation against its absence on both sides: the
				// log without it, the raw file with the log's steps.
				b.Run(name+"/impl=tierlog/prealloc=off", func(b *testing.B) { benchAppendLog(b, batch, sync, -1) })
				b.Run(name+"/impl=raw-file/prealloc=4MiB", func(b *testing.B) { benchAppendRaw(b, batch, sync, 4<<20) })
			}
			// The same bytes from an idempotent producer and inside one
			// (never committed) transaction. All three producer cases
			// rewrite the base sequence and the CRC before each append,
			// so they compare with each other, not with impl=tierlog.
			for _, mode := range []string{"plain", "idempotent", "transactional"} {
				pb := benchProducerBatch(b, size.records, 1024-21, mode)
				b.Run(name+"/impl=tierlog/producer="+mode, func(b *testing.B) { benchAppendProducer(b, pb, sync, mode != "plain") })
			}
		}
	}
}

// benchAppendLog appends batch over and over; prealloc is
// Options.SegmentPreallocateBytes.
func benchAppendLog(b *testing.B, batch []byte, sync bool, prealloc int64) {
	o := Options{SegmentPreallocateBytes: prealloc}
	if sync {
		o.FlushMessages = 1 // fsync before each append returns
	}
	benchAppendLogOpts(b, batch, o)
}

// benchAppendLogOpts is benchAppendLog with the log's options.
func benchAppendLogOpts(b *testing.B, batch []byte, o Options) {
	l := benchLog(b, b.TempDir(), o)
	defer l.Close()
	records := int64(0)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		info, err := l.AppendAsLeader(batch, 0, OriginClient)
		if err != nil {
			b.Fatal(err)
		}
		records += info.Records
		if (info.LastOffset+1)%8192 == 0 { // now and then: keep the disk bounded
			l.UpdateHighWatermark(l.LogEndOffset())
			if _, err := l.DeleteOldSegments(); err != nil {
				b.Fatal(err)
			}
		}
		// AppendAsLeader stamped the base offset in place; a client sends 0.
		mustBatch(b, batch).SetBaseOffset(0)
	}
	b.StopTimer()
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// benchAppendBuilder builds a batch of n records with record.Builder and
// appends it, every iteration: with mode "append-to" through AppendTo
// into a reused buffer and AppendAsLeader, with "finish" through
// AppendBuilderAsLeader.
func benchAppendBuilder(b *testing.B, n int, mode string) {
	l := benchLog(b, b.TempDir(), Options{})
	defer l.Close()
	value := benchValue(1024 - 21)
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bl.Reset(record.DefaultBuilderOptions())
		for range n {
			bl.Add(1_700_000_000_000, nil, value)
		}
		var info AppendInfo
		var err error
		if mode == "finish" {
			info, err = l.AppendBuilderAsLeader(bl, 0, OriginClient)
		} else {
			if buf, err = bl.AppendTo(buf[:0]); err != nil {
				b.Fatal(err)
			}
			info, err = l.AppendAsLeader(buf, 0, OriginClient)
		}
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.SetBytes(int64(info.Bytes))
		}
		if (info.LastOffset+1)%8192 == 0 {
			l.UpdateHighWatermark(l.LogEndOffset())
			if _, err := l.DeleteOldSegments(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchAppendRawBuilder is the baseline of benchAppendBuilder: the batch
// built and finished by the Builder, then written to a file.
func benchAppendRawBuilder(b *testing.B, n int) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	value := benchValue(1024 - 21)
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	written := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bl.Reset(record.DefaultBuilderOptions())
		for range n {
			bl.Add(1_700_000_000_000, nil, value)
		}
		batch, err := bl.Finish()
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.SetBytes(int64(len(batch)))
		}
		if _, err := f.WriteAt(batch, written); err != nil {
			b.Fatal(err)
		}
		if written += int64(len(batch)); written >= rotateBytes {
			written = 0 // overwrite: the page cache keeps what it had
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchProducerBatch is benchBatch with a producer identity: none
// (plain), an idempotent producer, or a transactional one.
func benchProducerBatch(b *testing.B, n, recordBytes int, mode string) []byte {
	b.Helper()
	value := benchValue(recordBytes)
	opts := record.DefaultBuilderOptions()
	if mode != "plain" {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 42, 0, 0
		opts.Transactional = mode == "transactional"
	}
	bl := record.NewBuilder(opts)
	for i := 0; i < n; i++ {
		bl.Add(1_700_000_000_000, nil, value)
	}
	buf, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

// benchAppendProducer appends batch over and over, advancing its base
// sequence (when sequenced) and recomputing its CRC before each append,
// as a producer sends a new batch each time.
func benchAppendProducer(b *testing.B, batch []byte, sync, sequenced bool) {
	o := Options{}
	if sync {
		o.FlushMessages = 1
	}
	l := benchLog(b, b.TempDir(), o)
	defer l.Close()
	bt := mustBatch(b, batch)
	span := bt.LastOffsetDelta() + 1
	seq := int32(0)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bt.SetBaseOffset(0)
		if sequenced {
			binary.BigEndian.PutUint32(batch[53:], uint32(seq)) // BaseSequence, inside the CRC
			seq += span
			if seq < 0 {
				seq = 0 // wraps at MaxInt32 (DefaultRecordBatch.incrementSequence); unreachable in a benchmark
			}
		}
		binary.BigEndian.PutUint32(batch[17:], bt.ComputeCRC())
		info, err := l.AppendAsLeader(batch, 0, OriginClient)
		if err != nil {
			b.Fatal(err)
		}
		if (info.LastOffset+1)%8192 == 0 {
			l.UpdateHighWatermark(l.LogEndOffset())
			if _, err := l.DeleteOldSegments(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func mustBatch(b *testing.B, buf []byte) record.Batch {
	bt, err := record.ReadBatch(buf)
	if err != nil {
		b.Fatal(err)
	}
	return bt
}

// benchAppendRaw is the baseline: write(2) of the same bytes to a file
// (and fdatasync when sync), rotating the file like the log's segments.
// With prealloc > 0 zeros are written ahead of the data in steps of
// prealloc bytes, as the log's SegmentPreallocateBytes does.
func benchAppendRaw(b *testing.B, batch []byte, sync bool, prealloc int64) {
	dir := b.TempDir()
	n := 0
	open := func() *os.File {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("raw-%d", n)))
		if err != nil {
			b.Fatal(err)
		}
		n++
		return f
	}
	f := open()
	written := 0
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	reserved, zeros := int64(0), make([]byte, max(prealloc, 0))
	for i := 0; i < b.N; i++ {
		if prealloc > 0 && int64(written+len(batch)) > reserved {
			end := int64(written + len(batch))
			if _, err := f.WriteAt(zeros, end); err != nil {
				b.Fatal(err)
			}
			reserved = end + prealloc
		}
		if _, err := f.WriteAt(batch, int64(written)); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := fdatasync(f); err != nil {
				b.Fatal(err)
			}
		}
		written += len(batch)
		if written >= rotateBytes {
			name := f.Name()
			_ = f.Close()
			_ = os.Remove(name)
			f, written, reserved = open(), 0, 0
		}
	}
	b.StopTimer()
	_ = f.Close()
}

// benchAppendRawPoints is benchAppendRaw without fsyncs on the append
// path but with one started on its own goroutine whenever interval bytes
// were written since the last one began and none is running: the
// baseline that writes the data back to disk during the run, as the
// log's recovery point must.
func benchAppendRawPoints(b *testing.B, batch []byte, interval int64) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	var running sync.WaitGroup
	busy := make(chan struct{}, 1)
	var written, since int64
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.WriteAt(batch, written); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
		if since += int64(len(batch)); since >= interval {
			select {
			case busy <- struct{}{}:
				since = 0
				running.Add(1)
				go func() {
					defer running.Done()
					if err := fdatasync(f); err != nil {
						b.Error(err)
					}
					<-busy
				}()
			default: // one is running: the next append tries again
			}
		}
		if written >= rotateBytes {
			running.Wait() // the file is cut under no fsync
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			written = 0
		}
	}
	b.StopTimer()
	running.Wait()
	_ = f.Close()
}

// fillLog appends totalBytes of 16 KiB batches and returns the log's
// directory and the log (flushed, high watermark at the end).
func fillLog(b *testing.B, totalBytes int) (string, *UnifiedLog) {
	return fillLogFS(b, nil, totalBytes)
}

// fillLogFS is fillLog on fs (nil: vfs.Default).
func fillLogFS(b *testing.B, fs vfs.FS, totalBytes int) (string, *UnifiedLog) {
	return fillLogOpts(b, Options{FS: fs}, totalBytes)
}

// fillLogOpts is fillLog with options o.
func fillLogOpts(b *testing.B, o Options, totalBytes int) (string, *UnifiedLog) {
	dir := b.TempDir()
	o.RetentionBytes = RetentionInfinite
	l := benchLog(b, dir, o)
	batch := benchBatch(b, 16, 1024-21)
	for written := 0; written < totalBytes; written += len(batch) {
		if _, err := l.AppendAsLeader(batch, 0, OriginClient); err != nil {
			b.Fatal(err)
		}
		mustBatch(b, batch).SetBaseOffset(0)
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	return dir, l
}

func BenchmarkRead(b *testing.B) {
	const total = 64 << 20
	const fetchBytes = 1 << 20
	for _, impl := range []struct {
		name string
		opts Options
	}{{"tierlog", Options{}}, {"tierlog-pread", Options{DisableMmapReads: true}}} {
		b.Run("sequential/fetch-bytes=1MiB/impl="+impl.name, func(b *testing.B) {
			benchSequential(b, total, fetchBytes, impl.opts)
		})
	}
	b.Run("sequential/fetch-bytes=1MiB/impl=raw-pread", func(b *testing.B) {
		dir, l := fillLog(b, total)
		_ = l.Close()
		f, err := os.Open(filepath.Join(dir, "00000000000000000000.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		buf := make([]byte, fetchBytes)
		pos := int64(0)
		b.SetBytes(fetchBytes)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.ReadAt(buf, pos); err != nil {
				b.Fatal(err)
			}
			pos += fetchBytes
			if pos+fetchBytes > st.Size() {
				pos = 0
			}
		}
	})
	b.Run("tail-while-appending/batch-bytes=16KiB/impl=tierlog", func(b *testing.B) {
		l := benchLog(b, b.TempDir(), Options{})
		defer l.Close()
		batch := benchBatch(b, 16, 1024-21)
		buf := make([]byte, 0, 64<<10)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			info, err := l.AppendAsLeader(batch, 0, OriginClient)
			if err != nil {
				b.Fatal(err)
			}
			mustBatch(b, batch).SetBaseOffset(0)
			got, err := l.Read(buf, info.FirstOffset, len(batch), IsolationLogEnd, true)
			if err != nil || len(got.Records) != len(batch) {
				b.Fatalf("read %d bytes at %d: %v", len(got.Records), info.FirstOffset, err)
			}
			buf = got.Records[:0]
			if (info.LastOffset+1)%8192 == 0 {
				l.UpdateHighWatermark(l.LogEndOffset())
				if _, err := l.DeleteOldSegments(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("tail-while-appending/batch-bytes=16KiB/impl=raw-file", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		batch := benchBatch(b, 16, 1024-21)
		buf := make([]byte, len(batch))
		pos := int64(0)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.WriteAt(batch, pos); err != nil {
				b.Fatal(err)
			}
			if _, err := f.ReadAt(buf, pos); err != nil {
				b.Fatal(err)
			}
			pos += int64(len(batch))
			if pos >= rotateBytes {
				pos = 0
			}
		}
	})
}

// benchSequential reads a log of total bytes from its start in fetches
// of fetchBytes, wrapping around, as a follower or a catching-up consumer
// does.
func benchSequential(b *testing.B, total, fetchBytes int, o Options) {
	_, l := fillLogOpts(b, o, total)
	defer l.Close()
	buf := make([]byte, 0, 2*fetchBytes)
	offset := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		info, err := l.Read(buf, offset, fetchBytes, IsolationHighWatermark, true)
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(info.Records))
		buf = info.Records[:0]
		offset = nextOffsetAfter(b, info.Records, offset)
		if offset >= l.HighWatermark() {
			offset = 0
		}
	}
	b.SetBytes(bytes / int64(b.N))
}

// nextOffsetAfter returns the offset after the last whole batch in data.
func nextOffsetAfter(b *testing.B, data []byte, offset int64) int64 {
	for len(data) > 0 {
		bt, err := record.ReadBatch(data)
		if err != nil {
			break
		}
		offset = bt.NextOffset()
		data = data[bt.Size():]
	}
	return offset
}

// BenchmarkOffsetLookup reads the batch holding a random offset of a
// warm 64 MiB log of 16 KiB batches (Read with maxBytes 1 and
// minOneMessage, Kafka's answer to a point fetch), against a pread of the
// same batch at a position computed from the fixed batch size (the
// machine's limit: no lookup at all), in the same run. ReadSlice is the
// positioning alone (a broker sending with sendfile). impl=tierlog runs
// on a counting FS, which turns the mappings off (the one-pread path);
// impl=tierlog-mmap reopens the same log on vfs.Default, where reads copy
// from the segment's mapping and ReadSlice returns the mapped bytes.
// Reports the p50 and p99 latency of single lookups, the preads of the
// segment file per lookup (counting FS only) and the read system calls of
// the process per lookup (/proc/self/io, where readable).
func BenchmarkOffsetLookup(b *testing.B) {
	fs := countfs.Wrap(vfs.Default)
	dir, l := fillLogFS(b, fs, 64<<20)
	defer func() { _ = l.Close() }()
	hw := l.HighWatermark()
	buf := make([]byte, 0, 64<<10)
	warm := func(l *UnifiedLog) {
		// Warm the indexes, the page cache and the mapping.
		for o := int64(0); o < hw; o += 16 {
			if _, err := l.Read(buf, o, 1, IsolationHighWatermark, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	warm(l)
	batch := benchBatch(b, 16, 1024-21)
	perBatch := int64(mustBatch(b, batch).LastOffset() + 1)
	measure := func(b *testing.B, lookup func(o int64) error) {
		rng := rand.New(rand.NewPCG(1, 2))
		lat := make([]time.Duration, 0, b.N)
		preads, syscr := fs.ReadAts.Load(), readSyscalls()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			o := rng.Int64N(hw)
			start := time.Now()
			err := lookup(o)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatalf("lookup %d: %v", o, err)
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(fs.ReadAts.Load()-preads)/float64(b.N), "preads/op")
		if syscr >= 0 {
			b.ReportMetric(float64(readSyscalls()-syscr)/float64(b.N), "syscr/op")
		}
	}
	read := func(l *UnifiedLog) func(o int64) error {
		return func(o int64) error {
			info, err := l.Read(buf, o, 1, IsolationHighWatermark, true)
			if err == nil && len(info.Records) != len(batch) {
				err = fmt.Errorf("%d bytes, want %d", len(info.Records), len(batch))
			}
			return err
		}
	}
	slice := func(l *UnifiedLog, mapped bool) func(o int64) error {
		return func(o int64) error {
			sl, err := l.ReadSlice(o, 1, IsolationHighWatermark, true)
			if err == nil && (sl.Size != int64(len(batch)) || (sl.Data != nil) != mapped) {
				err = fmt.Errorf("%d bytes (mapped %t), want %d", sl.Size, sl.Data != nil, len(batch))
			}
			sl.Release()
			return err
		}
	}
	b.Run("impl=tierlog/read", func(b *testing.B) { measure(b, read(l)) })
	b.Run("impl=tierlog/slice", func(b *testing.B) { measure(b, slice(l, false)) })
	b.Run("impl=raw-pread", func(b *testing.B) {
		f, err := fs.Open(filepath.Join(dir, "00000000000000000000.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		raw := make([]byte, len(batch))
		measure(b, func(o int64) error {
			_, err := f.ReadAt(raw, o/perBatch*int64(len(batch)))
			return err
		})
	})
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	ml := benchLog(b, dir, Options{RetentionBytes: RetentionInfinite})
	l = ml
	ml.UpdateHighWatermark(ml.LogEndOffset())
	warm(ml)
	warm(ml) // chunks read twice are queued for the background warmer
	segment.WaitWarmer()
	b.Run("impl=tierlog-mmap/read", func(b *testing.B) { measure(b, read(ml)) })
	b.Run("impl=tierlog-mmap/slice", func(b *testing.B) { measure(b, slice(ml, true)) })
}

// readSyscalls returns the read system calls the process made so far
// (syscr of /proc/self/io), or -1 where that is not readable.
func readSyscalls() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n - 1 // this read of the file itself
			}
		}
	}
	return -1
}

// BenchmarkOpenAfterCrash times Open of a crash image: a log filled with
// 16 KiB batches of 1 KiB records and no flush policy, copied while open
// (the files as the kernel holds them, as after kill -9), in one segment
// (the default 1 GiB segment size; 255 and 1023 MiB leave 15 MiB after
// the last point of the default 16 MiB interval, the worst case at rest). points=off is the recovery without
// segment recovery points (RecoveryPointIntervalBytes -1: the whole
// segment since its start is re-read and CRC-checked); points=default
// resumes at the last point the background flush wrote. Each iteration
// recovers the same image again (recovery is idempotent and leaves the
// checkpoints as they were), releasing the log without a clean close.
// The compare command's "open after crash" row measures the same case
// against other logs.
func BenchmarkOpenAfterCrash(b *testing.B) {
	for _, mib := range []int64{255, 1023} {
		for _, pts := range []struct {
			name string
			iv   int64
		}{{"off", -1}, {"default", 0}} {
			b.Run(fmt.Sprintf("%dMiB/points=%s", mib, pts.name), func(b *testing.B) {
				root := b.TempDir()
				live, image := filepath.Join(root, "live"), filepath.Join(root, "image")
				o := Options{FS: vfs.Default, RecoveryPointIntervalBytes: pts.iv, RetentionMs: RetentionInfinite}
				l, err := Open(live, o)
				if err != nil {
					b.Fatal(err)
				}
				batch := benchBatch(b, 16, 1024)
				for written := int64(0); written < mib<<20; written += int64(len(batch)) {
					binary.BigEndian.PutUint64(batch, 0) // the leader stamped the last append's offset
					if _, err := l.AppendAsLeader(batch, 0, OriginClient); err != nil {
						b.Fatal(err)
					}
				}
				l.background.Wait() // the image below is taken at rest
				if err := copyDirForBench(live, image); err != nil {
					b.Fatal(err)
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				o.FS = vfs.Default
				var skipped int64
				b.ResetTimer()
				for b.Loop() {
					l, err := Open(image, o)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					skipped = l.Metrics().RecoverySkippedBytes
					l.closeSegments()
					b.StartTimer()
				}
				b.ReportMetric(float64(skipped)/(1<<20), "MiB-skipped")
			})
		}
	}
}

// copyDirForBench copies the regular files of src into a new directory
// dst.
func copyDirForBench(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
