package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// The tierlog-only remote-tier rows (measuring the remote tier's data
// plane): the copy of one rolled segment into an object store and 16 KiB
// reads at random positions of it, each beside the raw object-store call
// that moves the same bytes, in the same repetition and in round-robin
// order (starting one row later each repetition), as the other workloads.
//
// Every store the run has (the embedded fs store always, S3 when its flags
// are given) is a remoteTarget with its own two tables. The segment is
// built once per run and shared by every target and repetition.

const (
	// remoteReadBytes is the size of one read: a 16 KiB fetch batch.
	remoteReadBytes = 16 << 10

	rowRawPut    = "raw store: objstore.PutLarge of the .log bytes"
	rowCopyPlain = "tierlog CopySegment"
	rowCopyZstd  = "tierlog CopySegment, Compression (zstd per chunk)"

	rowRawGet   = "raw store: ranged Get of the .log bytes"
	rowReadCold = "tierlog FetchSegment, cold (new StorageManager per read, locator in the metadata)"
	// rowReadColdManifest reads with metadata that lacks the locator (as
	// a segment copied in layout version 1 or 2 has): the manifest is
	// read, with the data Get issued beside it.
	rowReadColdManifest = "tierlog FetchSegment, cold, metadata without the locator (manifest GET beside the data's)"
	rowReadWarm         = "tierlog FetchSegment, warm (one StorageManager, manifest cached)"

	// remoteRatioMetric is a copy row's MB/s divided by the raw row's MB/s
	// of the same repetition.
	remoteRatioMetric = "MB/s ÷ raw, same repetition"

	// The keys of the raw rows' objects. Tier keys start with
	// "<topic>-<topic id>/", so these never collide with them.
	rawCopyKey = "raw/copy-segment"
	rawReadKey = "raw/read-segment"
)

var (
	copyRows = []string{rowRawPut, rowCopyPlain, rowCopyZstd}
	readRows = []string{rowRawGet, rowReadCold, rowReadColdManifest, rowReadWarm}

	copyMetrics = []metricSpec{
		{"MB/s", true}, {"CPU s/GB", false}, {"ms/copy", false},
		{"stored ÷ segment bytes", false}, {"objects/copy", false},
	}
	readMetrics = []metricSpec{
		{"p50 µs", false}, {"p99 µs", false}, {"p99.9 µs", false}, {"reads/s", true},
		{"GETs/read", false}, {"KiB fetched/read", false},
	}

	// remoteTP is the partition the benchmark's segment belongs to.
	remoteTP = remote.TopicIDPartition{TopicID: remote.UUID{7, 7, 7}, Topic: "compare", Partition: 0}
)

// s3Flags are the optional S3 flags; credentials come from AWS_* (s3.Options).
type s3Flags struct {
	endpoint, bucket, region string
	// testServer asks for the tests' S3 server (versitygw on 127.0.0.1,
	// internal/harness/s3test) instead of an endpoint; srv is it, once started.
	testServer bool
	srv        *s3test.Server
}

// options returns the S3 store's options for objects under prefix.
func (f s3Flags) options(prefix string) s3.Options {
	o := s3.Options{Endpoint: f.endpoint, Bucket: f.bucket, Region: f.region, KeyPrefix: prefix}
	if f.srv != nil {
		o.Region, o.AccessKeyID, o.SecretAccessKey = s3test.Region, s3test.AccessKeyID, s3test.SecretAccessKey
		o.RootCAs, o.PathSafeKeys, o.CreateBucket = f.srv.RootCAs, true, true
	}
	return o
}

// where says which server the S3 rows ran against.
func (f s3Flags) where() string {
	if f.srv != nil {
		return fmt.Sprintf("the tests' S3 server (versitygw %s, TLS on 127.0.0.1, its posix backend on the same disk) at %s", s3test.Version, f.endpoint)
	}
	return "the server at " + f.endpoint
}

// remoteSegment is the segment every remote row moves: the first segment of
// a tierlog log, rolled and pinned with OpenSegment as the copy task pins
// it, with the metadata and SegmentData the copy task would build.
type remoteSegment struct {
	l       *log.UnifiedLog
	files   *log.SegmentFiles
	meta    remote.SegmentMetadata // SegmentID replaced per copy
	data    remote.SegmentData
	batches int
	scratch []byte // for checking reads against the .log file
}

// newRemoteSegment appends batches of 16 records of about 1 KiB (values of
// JSON events, see jsonValue) to a new log in dir until the next batch
// would pass segBytes, rolls and pins that segment.
func newRemoteSegment(dir string, segBytes int64) (seg *remoteSegment, err error) {
	l, err := log.Open(dir, log.Options{FS: vfs.Default, SegmentBytes: min(segBytes+2<<20, 1<<31-1)})
	if err != nil {
		return nil, err
	}
	seg = &remoteSegment{l: l, scratch: make([]byte, remoteReadBytes)}
	defer func() {
		if err != nil {
			seg.close()
		}
	}()
	rng := rand.New(rand.NewPCG(5, 6))
	value := make([]byte, kafkaValueBytes)
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	var buf []byte
	for written := int64(0); ; {
		bl.Reset(record.DefaultBuilderOptions())
		for i := 0; i < appendCases[0].records; i++ {
			jsonValue(rng, value)
			bl.Add(1_700_000_000_000+int64(seg.batches), nil, value)
		}
		if buf, err = bl.AppendTo(buf[:0]); err != nil {
			return seg, err
		}
		if written+int64(len(buf)) > segBytes && seg.batches > 0 {
			break
		}
		if _, err := l.AppendAsLeader(buf, 0, log.OriginClient); err != nil {
			return seg, err
		}
		written += int64(len(buf))
		seg.batches++
	}
	if err := l.Roll(); err != nil {
		return seg, err
	}
	if err := l.Flush(); err != nil {
		return seg, err
	}
	return seg, seg.pin()
}

// pin opens the first segment and builds its metadata and SegmentData as
// remote.Manager's copy task does.
func (seg *remoteSegment) pin() error {
	infos, err := seg.l.Segments(0)
	if err != nil {
		return err
	}
	if len(infos) == 0 || infos[0].Active {
		return fmt.Errorf("remote segment: the first segment was not rolled")
	}
	c := infos[0]
	if seg.files, err = seg.l.OpenSegment(c.BaseOffset); err != nil {
		return err
	}
	snapshot, err := seg.l.ProducerSnapshot(c.NextOffset)
	if err != nil {
		return fmt.Errorf("producer snapshot at %d: %w", c.NextOffset, err)
	}
	files := seg.files
	seg.meta = remote.SegmentMetadata{
		StartOffset: c.BaseOffset, EndOffset: c.NextOffset - 1,
		SegmentLeaderEpochs: seg.l.EpochEntriesInRange(c.BaseOffset, c.NextOffset),
		SizeBytes:           files.Info.SizeBytes, MaxTimestampMs: files.Info.MaxTimestampMs,
		State: remote.CopySegmentStarted, TxnIndexEmpty: len(files.TxnIndex) == 0,
	}
	seg.data = remote.SegmentData{
		Log: files.Log, LogSize: files.Info.SizeBytes,
		OffsetIndex: files.OffsetIndex, TimeIndex: files.TimeIndex, TxnIndex: files.TxnIndex,
		ProducerSnapshot: snapshot,
		LeaderEpochs:     seg.l.EpochEntriesInRange(-1, c.NextOffset),
	}
	if seg.data.LogSize < remoteReadBytes {
		return fmt.Errorf("remote segment of %d bytes, below one read of %d", seg.data.LogSize, remoteReadBytes)
	}
	return nil
}

// fresh returns the segment's metadata under a new segment id: one copy
// attempt.
func (seg *remoteSegment) fresh() remote.SegmentMetadata {
	m := seg.meta
	m.SegmentID = remote.NewSegmentID(remoteTP)
	return m
}

// check compares b with the .log bytes at pos.
func (seg *remoteSegment) check(b []byte, pos int64) error {
	if _, err := seg.files.Log.ReadAt(seg.scratch[:len(b)], pos); err != nil {
		return err
	}
	if !bytes.Equal(b, seg.scratch[:len(b)]) {
		return fmt.Errorf("read at %d: bytes differ from the segment", pos)
	}
	return nil
}

func (seg *remoteSegment) close() {
	if seg.files != nil {
		_ = seg.files.Close()
	}
	_ = seg.l.Close()
}

// remoteTarget is one object store with the managers and objects its rows
// use.
type remoteTarget struct {
	name       string // "fs" or "S3"
	durability string // what a successful Put guarantees
	store      objstore.Store
	// plain and zstd are the copy rows' managers, kept for the run so that
	// a copy does not pay for a new zstd encoder.
	plain, zstd *remote.StorageManager
	// readMeta is the copy the read rows read, made by plain at setup.
	readMeta remote.SegmentMetadata
	err      error // setup failure: the target's rows are not run
}

// remoteRun is the remote part of a run.
type remoteRun struct {
	cfg     config
	dir     string // the segment's log and the fs store
	seg     *remoteSegment
	segDesc string // seg.describe(), kept after close
	targets []*remoteTarget
	s3Note  string // why there are no S3 rows, or ""
	err     error  // segment setup failure: no remote rows at all
}

// newRemoteRun builds the segment in dir and opens the stores. Failures
// are recorded in the result, never returned: the rest of the run goes on.
func newRemoteRun(dir string, cfg config) *remoteRun {
	r := &remoteRun{cfg: cfg, dir: dir}
	ctx := context.Background()
	if r.seg, r.err = newRemoteSegment(filepath.Join(dir, "log"), cfg.remoteSegmentBytes); r.err != nil {
		r.err = fmt.Errorf("building the segment: %w", r.err)
		r.seg = nil
		return r
	}
	r.segDesc = r.seg.describe()
	fsTarget := &remoteTarget{name: "fs",
		durability: "objstore/fs default (Options.NoSync false): each object is written to a temp file, fsynced, " +
			"renamed and its directory fsynced before Put returns"}
	if st, err := fs.Open(filepath.Join(dir, "store"), fs.Options{}); err != nil {
		fsTarget.err = err
	} else {
		fsTarget.store = st
		fsTarget.err = fsTarget.setup(ctx, r.seg)
	}
	r.targets = append(r.targets, fsTarget)

	if cfg.s3.endpoint == "" {
		r.s3Note = "S3 rows not run: no -s3-endpoint and -s3-bucket given."
		return r
	}
	s3Target := &remoteTarget{name: "S3",
		durability: "S3: the PUT or CompleteMultipartUpload was acknowledged by " + cfg.s3.where()}
	prefix := fmt.Sprintf("tierlog-compare-%d/", time.Now().UnixNano())
	st, err := s3.Open(ctx, cfg.s3.options(prefix))
	if err != nil {
		s3Target.err = err
	} else {
		s3Target.store = st
		s3Target.err = s3Target.setup(ctx, r.seg)
		s3Target.durability += fmt.Sprintf(" (bucket %s, objects under %s, deleted at the end)", cfg.s3.bucket, prefix)
	}
	r.targets = append(r.targets, s3Target)
	return r
}

// setup makes the copy rows' managers, copies the segment once with each
// (the zstd copy is deleted again: it is a warm-up) and stores the raw
// read object. None of it is measured.
func (t *remoteTarget) setup(ctx context.Context, seg *remoteSegment) error {
	var err error
	if t.plain, err = remote.NewStorageManager(t.store, remote.StorageOptions{}); err != nil {
		return err
	}
	if t.zstd, err = remote.NewStorageManager(t.store, remote.StorageOptions{Compression: true}); err != nil {
		return err
	}
	t.readMeta = seg.fresh()
	custom, err := t.plain.CopySegment(ctx, &t.readMeta, seg.data)
	if err != nil {
		return err
	}
	// The locator, as the copy task stores it in the segment's metadata.
	t.readMeta.CustomMetadata = custom
	warm := seg.fresh()
	if _, err := t.zstd.CopySegment(ctx, &warm, seg.data); err != nil {
		return err
	}
	if err := t.zstd.DeleteSegment(ctx, &warm); err != nil {
		return err
	}
	return objstore.PutLarge(ctx, t.store, rawReadKey, seg.data.Log, seg.data.LogSize, objstore.MultipartOptions{})
}

// close deletes what the target stored (the fs store lives under the
// run's temporary directory, removed anyway) and closes the store.
func (t *remoteTarget) close() {
	if t.store == nil {
		return
	}
	ctx := context.Background()
	if t.plain != nil && t.readMeta.SizeBytes > 0 {
		_ = t.plain.DeleteSegment(ctx, &t.readMeta)
	}
	_ = t.store.Delete(ctx, rawReadKey)
	_ = t.store.Delete(ctx, rawCopyKey)
	_ = t.store.Close()
}

// close releases the segment and the stores and removes dir. Called
// before the partitions workload, which measures the heap and descriptors.
func (r *remoteRun) close() {
	for _, t := range r.targets {
		t.close()
	}
	if r.seg != nil {
		r.seg.close()
		r.seg = nil
	}
	_ = os.RemoveAll(r.dir)
}

func (t *remoteTarget) copySection(segBytes int64) string {
	return fmt.Sprintf("remote copy of one %s segment, %s store", mib(segBytes), t.name)
}

func (t *remoteTarget) readSection() string {
	return fmt.Sprintf("remote reads of 16 KiB, cold and warm, %s store", t.name)
}

// runRep runs one repetition of every target's copy rows and read rows.
func (r *remoteRun) runRep(rep int, res *results, stderr io.Writer, since func() float64) {
	if r.err != nil {
		return
	}
	ctx := context.Background()
	for _, t := range r.targets {
		if t.err != nil {
			continue
		}
		sec := t.copySection(r.cfg.remoteSegmentBytes)
		// Several copies per row, the rows interleaved (their order
		// rotating with the copy), so that writeback left by one row
		// or an earlier workload lands on every row alike; the ratio to
		// raw is of the rows' medians in this repetition.
		copied := map[string][]float64{}
		for j := range r.cfg.remoteCopies {
			for k := range copyRows {
				row := copyRows[(k+rep+j)%len(copyRows)]
				fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d remote copy %d/%d, %s store: %s\n", since(), rep+1, r.cfg.reps, j+1, r.cfg.remoteCopies, t.name, row)
				mbs, err := t.copyOnce(ctx, r.seg, row, sec, res)
				if err != nil {
					res.note(sec, row, "error: "+err.Error())
					continue
				}
				copied[row] = append(copied[row], mbs)
			}
		}
		if raw := copied[rowRawPut]; len(raw) > 0 {
			for row, mbs := range copied {
				if row != rowRawPut {
					res.addRow(sec, row, remoteRatioMetric, median(mbs)/median(raw))
				}
			}
		}
		positions := readPositions(uint64(rep)+1, r.cfg.remoteReads, r.seg.data.LogSize)
		for k := range readRows {
			row := readRows[(k+rep)%len(readRows)]
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d remote read, %s store: %s\n", since(), rep+1, r.cfg.reps, t.name, row)
			if err := t.readRow(ctx, r.seg, row, positions, r.cfg.remoteReadsMax, res); err != nil {
				res.note(t.readSection(), row, "error: "+err.Error())
			}
		}
	}
}

// copyOnce runs one copy of row, records its figures and returns its MB/s.
// The raw object is deleted before its Put and each tierlog copy after it,
// both outside the timed region, so every timed copy writes new objects.
func (t *remoteTarget) copyOnce(ctx context.Context, seg *remoteSegment, row, sec string, res *results) (float64, error) {
	size := seg.data.LogSize
	var stored, objects int64
	var elapsed, cpu time.Duration
	switch row {
	case rowRawPut:
		if err := t.store.Delete(ctx, rawCopyKey); err != nil {
			return 0, err
		}
		cpu0, start := cpuTime(), time.Now()
		if err := objstore.PutLarge(ctx, t.store, rawCopyKey, seg.data.Log, size, objstore.MultipartOptions{}); err != nil {
			return 0, err
		}
		elapsed, cpu = time.Since(start), cpuTime()-cpu0
		stored, objects = size, 1
	default:
		sm := t.plain
		if row == rowCopyZstd {
			sm = t.zstd
		}
		m := seg.fresh()
		before := sm.Metrics()
		cpu0, start := cpuTime(), time.Now()
		if _, err := sm.CopySegment(ctx, &m, seg.data); err != nil {
			return 0, err
		}
		elapsed, cpu = time.Since(start), cpuTime()-cpu0
		after := sm.Metrics()
		stored, objects = after.BytesPut-before.BytesPut, after.ObjectsPut-before.ObjectsPut
		if err := sm.DeleteSegment(ctx, &m); err != nil {
			return 0, fmt.Errorf("delete after the copy: %w", err)
		}
	}
	mbs := float64(size) / elapsed.Seconds() / 1e6
	res.addRow(sec, row, "MB/s", mbs)
	res.addRow(sec, row, "CPU s/GB", cpu.Seconds()/(float64(size)/1e9))
	res.addRow(sec, row, "ms/copy", float64(elapsed.Microseconds())/1e3)
	res.addRow(sec, row, "stored ÷ segment bytes", float64(stored)/float64(size))
	res.addRow(sec, row, "objects/copy", float64(objects))
	return mbs, nil
}

// readPositions returns n random read positions in a segment of size
// bytes from seed: the same for every row of a repetition.
func readPositions(seed uint64, n int, size int64) []int64 {
	rng := rand.New(rand.NewPCG(seed, 13))
	p := make([]int64, n)
	for i := range p {
		p[i] = rng.Int64N(size - remoteReadBytes + 1)
	}
	return p
}

// readRow reads 16 KiB at each position through row's path, checks every
// read against the segment (outside the timed region) and records the
// latencies and the GETs and stored bytes each read cost. It stops early,
// with a note, at limit.
func (t *remoteTarget) readRow(ctx context.Context, seg *remoteSegment, row string, positions []int64, limit time.Duration, res *results) error {
	buf := make([]byte, remoteReadBytes)
	var warm *remote.StorageManager
	if row == rowReadWarm {
		var err error
		if warm, err = remote.NewStorageManager(t.store, remote.StorageOptions{}); err != nil {
			return err
		}
		// Warm-up at other positions (seed 0; repetitions use 1, 2, ...):
		// the manifest is cached after the first read, the rest warm the
		// read path as the point reads' warm-up does.
		for _, pos := range readPositions(0, max(1, len(positions)/10), seg.data.LogSize) {
			if err := fetchInto(ctx, warm, &t.readMeta, pos, buf); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	var gets, fetched int64
	var before remote.StorageMetrics
	if warm != nil {
		before = warm.Metrics()
	}
	lat := make([]time.Duration, 0, len(positions))
	start := time.Now()
	for _, pos := range positions {
		if len(lat)%16 == 15 && time.Since(start) > limit {
			res.note(t.readSection(), row, fmt.Sprintf("time-capped (flag -remote-reads-max, %s): %d reads", limit, len(lat)))
			break
		}
		var d time.Duration
		var err error
		switch row {
		case rowRawGet:
			d, err = timed(func() error { return rawGetInto(ctx, t.store, pos, buf) })
		case rowReadCold, rowReadColdManifest:
			var sm *remote.StorageManager
			if sm, err = remote.NewStorageManager(t.store, remote.StorageOptions{}); err != nil {
				return err
			}
			meta := t.readMeta
			if row == rowReadColdManifest {
				meta.CustomMetadata = nil
			}
			d, err = timed(func() error { return fetchInto(ctx, sm, &meta, pos, buf) })
			m := sm.Metrics()
			gets, fetched = gets+m.GetRequests, fetched+m.BytesFetched
		default:
			d, err = timed(func() error { return fetchInto(ctx, warm, &t.readMeta, pos, buf) })
		}
		if err != nil {
			return fmt.Errorf("read at %d: %w", pos, err)
		}
		lat = append(lat, d)
		if err := seg.check(buf, pos); err != nil {
			return err
		}
	}
	switch row {
	case rowRawGet:
		gets, fetched = int64(len(lat)), int64(len(lat))*remoteReadBytes
	case rowReadWarm:
		m := warm.Metrics()
		gets, fetched = m.GetRequests-before.GetRequests, m.BytesFetched-before.BytesFetched
	}
	recordReads(res, t.readSection(), row, lat, gets, fetched)
	return nil
}

func recordReads(res *results, sec, row string, lat []time.Duration, gets, fetched int64) {
	if len(lat) == 0 {
		return
	}
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	n := float64(len(lat))
	slices.Sort(lat)
	res.addRow(sec, row, "p50 µs", micros(percentile(lat, 0.50)))
	res.addRow(sec, row, "p99 µs", micros(percentile(lat, 0.99)))
	res.addRow(sec, row, "p99.9 µs", micros(percentile(lat, 0.999)))
	res.addRow(sec, row, "reads/s", n/total.Seconds())
	res.addRow(sec, row, "GETs/read", float64(gets)/n)
	res.addRow(sec, row, "KiB fetched/read", float64(fetched)/n/1024)
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// rawGetInto reads len(buf) bytes at pos of the raw read object with one
// ranged Get.
func rawGetInto(ctx context.Context, st objstore.Store, pos int64, buf []byte) error {
	body, err := st.Get(ctx, rawReadKey, pos, int64(len(buf)))
	if err != nil {
		return err
	}
	_, err = io.ReadFull(body, buf)
	return errors.Join(err, body.Close())
}

// fetchInto reads len(buf) bytes at pos of the remote segment m.
func fetchInto(ctx context.Context, sm *remote.StorageManager, m *remote.SegmentMetadata, pos int64, buf []byte) error {
	body, err := sm.FetchSegment(ctx, m, pos, int64(len(buf)))
	if err != nil {
		return err
	}
	_, err = io.ReadFull(body, buf)
	return errors.Join(err, body.Close())
}

// jsonValue fills v with JSON events (random user, event, item, price and
// session fields), cut at len(v): uncompressed producer data that zstd's
// fastest level stores in about a quarter of the bytes. (Random hex digits
// were tried first: zstd's fastest level finds no matches in them and
// stores every chunk raw, as it would producer-compressed batches.)
func jsonValue(rng *rand.Rand, v []byte) {
	words := [...]string{"click", "view", "purchase", "signup", "logout", "search", "cart", "refund"}
	b := make([]byte, 0, len(v)+128)
	for len(b) < len(v) {
		b = fmt.Appendf(b, `{"user":"u%06d","event":"%s","item":%d,"price":%d.%02d,"session":"%016x"},`,
			rng.IntN(1_000_000), words[rng.IntN(len(words))], rng.IntN(100_000), rng.IntN(1000), rng.IntN(100), rng.Uint64())
	}
	copy(v, b[:len(v)])
}
