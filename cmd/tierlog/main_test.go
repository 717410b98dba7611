package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// testTopicID is the topic id of every test partition; its text form is
// AQAAAAAAAAAAAAAAAAAAAA.
var testTopicID = remote.UUID{1}

// TestTool runs the tool against files the scenarios make with the public
// APIs (log, remote, pebblecp) on a memory FS. "tierlog" runs the tool on
// the arguments in its input and prints stdout, stderr and the exit
// status; the other commands make and damage the inputs.
func TestTool(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &env{fs: vfs.NewMem()}
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := e.handle(t, d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

// scanT is the test the argument helpers report malformed arguments to.
var scanT testing.TB

type env struct {
	fs vfs.FS
	l  *log.UnifiedLog
	// ts is the next record timestamp.
	ts int64
	// remembered is the listing of the last remember command.
	remembered string
}

func (e *env) close() {
	if e.l != nil {
		_ = e.l.Close()
	}
}

func (e *env) handle(t *testing.T, d *datadriven.TestData) (string, error) {
	scanT = t
	switch d.Cmd {
	case "tierlog":
		return e.runTool(d)
	case "log-open":
		return "", e.logOpen(d)
	case "log-append":
		return e.logAppend(d)
	case "log-flush":
		return "", e.l.Flush()
	case "log-close":
		err := e.l.Close()
		e.l = nil
		return "", err
	case "ls":
		return e.ls(d)
	case "remember":
		out, err := e.ls(d)
		e.remembered = out
		return "", err
	case "unchanged":
		// Pebble numbers its files by timing, so stores are compared
		// with what remember saw rather than printed.
		out, err := e.ls(d)
		if err != nil || out == e.remembered {
			return "unchanged\n", err
		}
		return "changed:\n" + e.remembered + "now:\n" + out, nil
	case "flip":
		return e.flip(d)
	case "poke":
		return "", e.poke(d)
	case "cut":
		return "", e.cut(d)
	case "write":
		return "", e.write(d.CmdArgs[0].Key, []byte(d.Input))
	case "remote-add":
		return "", e.remoteAdd(d)
	case "wal-commit":
		return "", e.walCommit(d)
	default:
		return "", fmt.Errorf("unknown command %q", d.Cmd)
	}
}

// runTool runs the tool; progress-bytes=N turns on progress lines.
func (e *env) runTool(d *datadriven.TestData) (string, error) {
	var stdout, stderr bytes.Buffer
	tl := &tool{fs: e.fs, stdout: &stdout, stderr: &stderr}
	if d.HasArg("progress-bytes") {
		var n int
		d.ScanArgs(scanT, "progress-bytes", &n)
		tl.progressBytes = int64(n)
	}
	code := tl.main(strings.Fields(d.Input))
	var b strings.Builder
	b.WriteString(stdout.String())
	for _, line := range strings.SplitAfter(stderr.String(), "\n") {
		if line != "" {
			b.WriteString("stderr: " + line)
		}
	}
	fmt.Fprintf(&b, "exit %d\n", code)
	return b.String(), nil
}

func intArg(d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(scanT, key, &v)
	return v
}

func strArg(d *datadriven.TestData, key, def string) string {
	if !d.HasArg(key) {
		return def
	}
	var v string
	d.ScanArgs(scanT, key, &v)
	return v
}

// logOpen opens a log in dir=<dir> with a fixed clock.
func (e *env) logOpen(d *datadriven.TestData) error {
	l, err := log.Open(strArg(d, "dir", "p0"), log.Options{
		FS:                 e.fs,
		SegmentBytes:       int64(intArg(d, "segment-bytes", 1<<20)),
		IndexIntervalBytes: intArg(d, "index-interval", 1),
		SegmentIndexBytes:  4096,
		Now:                func() time.Time { return time.UnixMilli(1_000_000) },
	})
	e.l, e.ts = l, 1000
	return err
}

// logAppend appends batches=B batches of records=R records each as leader
// in epoch=E; producer=P makes them idempotent (epoch 0, sequences from
// seq=S); codec=zstd compresses; headers=N adds N headers per record.
func (e *env) logAppend(d *datadriven.TestData) (string, error) {
	opts := record.DefaultBuilderOptions()
	if d.HasArg("producer") {
		opts.ProducerID, opts.ProducerEpoch = int64(intArg(d, "producer", 0)), 0
		opts.BaseSequence = int32(intArg(d, "seq", 0))
	}
	if strArg(d, "codec", "none") == "zstd" {
		opts.Compression = record.CompressionZstd
	}
	epoch := int32(intArg(d, "epoch", 0))
	records, headers := intArg(d, "records", 1), intArg(d, "headers", 0)
	var infos []string
	for range intArg(d, "batches", 1) {
		b := record.NewBuilder(opts)
		for i := range records {
			var hs []record.Header
			for h := range headers {
				hs = append(hs, record.Header{Key: "h" + strconv.Itoa(h), Value: []byte("v")})
			}
			key := []byte("k" + strconv.Itoa(i))
			if i%2 == 1 {
				key = nil
			}
			b.Add(e.ts, key, []byte("value-"+strconv.Itoa(i)), hs...)
			e.ts++
		}
		buf, err := b.Build()
		if err != nil {
			return "", err
		}
		info, err := e.l.AppendAsLeader(buf, epoch, log.OriginClient)
		if err != nil {
			return "", err
		}
		infos = append(infos, fmt.Sprintf("[%d, %d]", info.FirstOffset, info.LastOffset))
		if opts.ProducerID >= 0 {
			opts.BaseSequence += int32(records)
		}
	}
	return strings.Join(infos, " ") + "\n", nil
}

// ls lists dir=<dir> with file sizes.
func (e *env) ls(d *datadriven.TestData) (string, error) {
	dir := strArg(d, "dir", "p0")
	names, err := e.fs.List(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	sort.Strings(names)
	for _, n := range names {
		st, err := e.fs.Stat(e.fs.PathJoin(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %d\n", n, st.Size())
	}
	return b.String(), nil
}

func (e *env) read(path string) ([]byte, error) {
	f, err := e.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (e *env) write(path string, data []byte) error {
	if err := e.fs.MkdirAll(e.fs.PathDir(path), 0o755); err != nil {
		return err
	}
	f, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// flip xors the byte at pos=N of file=<path> with 0xff.
func (e *env) flip(d *datadriven.TestData) (string, error) {
	path, pos := strArg(d, "file", ""), intArg(d, "pos", 0)
	data, err := e.read(path)
	if err != nil {
		return "", err
	}
	if pos >= len(data) {
		return "", fmt.Errorf("pos %d beyond %d bytes", pos, len(data))
	}
	data[pos] ^= 0xff
	return "", e.write(path, data)
}

// poke sets the byte at pos=N of file=<path> to value=V.
func (e *env) poke(d *datadriven.TestData) error {
	path, pos := strArg(d, "file", ""), intArg(d, "pos", 0)
	data, err := e.read(path)
	if err != nil {
		return err
	}
	if pos >= len(data) {
		return fmt.Errorf("pos %d beyond %d bytes", pos, len(data))
	}
	data[pos] = byte(intArg(d, "value", 0))
	return e.write(path, data)
}

// cut keeps the first size=N bytes of file=<path>.
func (e *env) cut(d *datadriven.TestData) error {
	path := strArg(d, "file", "")
	data, err := e.read(path)
	if err != nil {
		return err
	}
	return e.write(path, data[:intArg(d, "size", 0)])
}

// remoteAdd adds a segment to the metadata store in dir=<dir>: id=N names
// it deterministically, state=started|finished|delete-started.
func (e *env) remoteAdd(d *datadriven.TestData) error {
	m, err := remote.Open(e.fs, strArg(d, "dir", "meta"), remote.MetadataOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	tp := remote.TopicIDPartition{TopicID: testTopicID, Topic: strArg(d, "topic", "orders"), Partition: int32(intArg(d, "partition", 0))}
	id := remote.SegmentID{TopicIDPartition: tp, ID: remote.UUID{0xee, byte(intArg(d, "id", 0))}}
	start, end := int64(intArg(d, "start", 0)), int64(intArg(d, "end", 0))
	epochs, err := epochcache.ParseEntries(strArg(d, "epochs", "0@"+strconv.FormatInt(start, 10)))
	if err != nil {
		return err
	}
	ctx := context.Background()
	seg := remote.SegmentMetadata{SegmentID: id, StartOffset: start, EndOffset: end, SegmentLeaderEpochs: epochs,
		SizeBytes: int64(intArg(d, "size", 100)), MaxTimestampMs: 5000, BrokerID: 1, EventTimestampMs: 6000, TxnIndexEmpty: true}
	if err := m.AddSegment(ctx, seg); err != nil {
		return err
	}
	state := strArg(d, "state", "finished")
	if state == "started" {
		return nil
	}
	if err := m.UpdateSegment(ctx, remote.SegmentMetadataUpdate{SegmentID: id, State: remote.CopySegmentFinished, EventTimestampMs: 7000, BrokerID: 1}); err != nil {
		return err
	}
	if state == "delete-started" {
		return m.UpdateSegment(ctx, remote.SegmentMetadataUpdate{SegmentID: id, State: remote.DeleteSegmentStarted, EventTimestampMs: 8000, BrokerID: 1})
	}
	return nil
}

// walCommit creates topic orders with partitions=N in the control plane in
// dir=<dir> (if new) and commits one object holding one batch of
// records=R for partition=P; producer=ID makes it idempotent.
func (e *env) walCommit(d *datadriven.TestData) error {
	ctx := context.Background()
	now := func() time.Time { return time.UnixMilli(2_000_000) }
	cp, err := pebblecp.Open(e.fs, strArg(d, "dir", "cp"), pebblecp.Options{Now: now})
	if err != nil {
		return err
	}
	defer cp.Close()
	topic := wal.TopicID(testTopicID)
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "orders", NumPartitions: int32(intArg(d, "partitions", 1))}}); err != nil {
		return err
	}
	tp := wal.TopicIDPartition{TopicID: topic, Partition: int32(intArg(d, "partition", 0))}
	n := int64(intArg(d, "records", 1))
	b := wal.CommitBatch{Partition: tp, Size: 100, LastOffset: n - 1, RecordCount: int32(n), MaxTimestamp: 1500,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if d.HasArg("producer") {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = int64(intArg(d, "producer", 0)), 0, int32(intArg(d, "seq", 0))
	}
	res, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: strArg(d, "key", "obj"), ObjectSize: 100, Batches: []wal.CommitBatch{b}})
	if err != nil {
		return err
	}
	return res.Batches[0].Err
}
