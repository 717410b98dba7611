package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/atomicfile"
)

// The committed offsets of consumer groups: one file per group, replaced
// whole at each commit through atomicfile.Write (a temporary file, fsync,
// rename, fsync of the directory: the commit point), before the commit is
// answered. A crash, of the process or of the machine, leaves the old or
// the new file, never a torn one: an acknowledged commit survives both.
//
// Why not Kafka's design, an internal compacted __consumer_offsets topic
// appended to by the coordinator: the library has no log compaction
// (logmanager has no LogCleaner), so such a log would grow with every
// commit and be replayed whole at each start. A file per group is
// bounded by the group's partition count and read once at start. The
// price is two fsyncs per commit (the file's and the directory's), which
// also keep a commit across a crash of the machine, where one replica of
// Kafka's topic holds it in the page cache; consumers commit every few
// seconds, so the price is small.
//
//	DIR/consumer-offsets/<sha256 of the group id, hex>.offsets
//
//	magic "TLCO" | version 1 | group | count | entry... | crc32c
//	group, topic, metadata: uvarint length, bytes
//	count: uvarint
//	entry: topic | partition int32 | offset int64 | leader epoch int32 | metadata
//	crc32c (Castagnoli, big-endian) covers every byte before it
//
// The file name is a hash because a group id is any string (the empty
// one included, and longer than a file name may be); the group id inside
// the file is checked against the name when it is loaded.

// offsetsDirName is the directory under Options.Dir holding the files.
const offsetsDirName = "consumer-offsets"

const (
	offsetsMagic       = "TLCO"
	offsetsVersion     = 1
	offsetsFileSuffix  = ".offsets"
	offsetsHeaderBytes = len(offsetsMagic) + 1
)

// errDamagedOffsets is the sentinel of a committed-offsets file that
// does not decode: a broker refuses to start on one rather than forget
// the commits it holds.
var errDamagedOffsets = errors.New("broker: damaged committed-offsets file")

// offsetsFileError is a damaged committed-offsets file: its path and
// what is wrong. It unwraps to errDamagedOffsets.
type offsetsFileError struct {
	Path   string
	Reason string
}

func (e *offsetsFileError) Error() string {
	return fmt.Sprintf("%v %s: %s", errDamagedOffsets, e.Path, e.Reason)
}

func (e *offsetsFileError) Unwrap() error { return errDamagedOffsets }

// committedOffset is one partition's committed position (Kafka's
// OffsetAndMetadata): the next offset to consume, the leader epoch of
// the record before it (-1: unknown), and the client's metadata ("" for
// none).
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
}

// groupOffsets is one group's committed offsets.
type groupOffsets struct {
	id string

	// committed is the durable state: replaced (never modified) after
	// the file holding the new map is written. Read without a lock.
	committed atomic.Pointer[map[topicPartition]committedOffset]

	// writeMu serializes the group's commits: each writes the whole map,
	// so two at once could leave the older one on disk. It is held
	// across the file write and its fsyncs, by design: a commit is
	// answered after its file is durable, and only the group's own
	// commits wait.
	writeMu sync.Mutex
}

// offsets is the store of every group's committed offsets.
type offsets struct {
	fs  vfs.FS
	dir string

	mu struct {
		sync.Mutex
		groups map[string]*groupOffsets
	}
}

// openOffsets loads every group's file from dir (created if missing),
// removing the temporary files of writes a crash interrupted. A file
// that does not decode fails the open with an *offsetsFileError.
func openOffsets(fs vfs.FS, dir string) (*offsets, error) {
	o := &offsets{fs: fs, dir: dir}
	o.mu.groups = map[string]*groupOffsets{}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: create %s: %w", dir, err)
	}
	if err := atomicfile.SyncDir(fs, fs.PathDir(dir)); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("broker: list %s: %w", dir, err)
	}
	slices.Sort(names)
	for _, name := range names {
		path := fs.PathJoin(dir, name)
		switch {
		case strings.HasSuffix(name, offsetsFileSuffix+atomicfile.TempSuffix):
			if err := fs.Remove(path); err != nil {
				return nil, fmt.Errorf("broker: remove %s: %w", path, err)
			}
			continue
		case !strings.HasSuffix(name, offsetsFileSuffix):
			continue
		}
		data, err := readAll(fs, path)
		if err != nil {
			return nil, fmt.Errorf("broker: read %s: %w", path, err)
		}
		id, committed, err := decodeGroupOffsets(data)
		if err != nil {
			return nil, &offsetsFileError{Path: path, Reason: err.Error()}
		}
		if want := offsetsFileName(id); name != want {
			return nil, &offsetsFileError{Path: path, Reason: fmt.Sprintf("holds group %q, whose file is %s", id, want)}
		}
		g := &groupOffsets{id: id}
		g.committed.Store(&committed)
		o.mu.groups[id] = g
	}
	return o, nil
}

func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data, err
}

// offsetsFileName is the file name of group id's offsets.
func offsetsFileName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:]) + offsetsFileSuffix
}

// group returns group id's offsets, nil when the group does not exist
// (no commit was ever accepted for it).
func (o *offsets) group(id string) *groupOffsets {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.groups[id]
}

// getOrCreate returns group id's offsets, creating the group (in memory:
// its file is written by its first commit) if it does not exist. Kafka
// creates a "simple" group the same way on a commit with generation -1
// (OffsetMetadataManager.validateOffsetCommit).
func (o *offsets) getOrCreate(id string) *groupOffsets {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.mu.groups[id]
	if !ok {
		g = &groupOffsets{id: id}
		empty := map[topicPartition]committedOffset{}
		g.committed.Store(&empty)
		o.mu.groups[id] = g
	}
	return g
}

// get returns a partition's committed offset.
func (g *groupOffsets) get(tp topicPartition) (committedOffset, bool) {
	c, ok := (*g.committed.Load())[tp]
	return c, ok
}

// all returns every committed partition, sorted by topic and partition.
func (g *groupOffsets) all() ([]topicPartition, map[topicPartition]committedOffset) {
	m := *g.committed.Load()
	return sortedPartitions(m), m
}

// sortedPartitions returns m's partitions sorted by topic and partition.
func sortedPartitions(m map[topicPartition]committedOffset) []topicPartition {
	return slices.SortedFunc(maps.Keys(m), func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
}

// commit makes updates durable, then visible: the group's file is
// replaced with its offsets and updates before commit returns. On an
// error nothing is visible and the file holds the old offsets or the new
// ones (a crash after the rename and before the directory fsync); a
// later commit rewrites it whole from memory.
func (o *offsets) commit(g *groupOffsets, updates map[topicPartition]committedOffset) error {
	if len(updates) == 0 {
		return nil
	}
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	next := maps.Clone(*g.committed.Load())
	maps.Copy(next, updates)
	path := o.fs.PathJoin(o.dir, offsetsFileName(g.id))
	if err := atomicfile.Write(o.fs, path, encodeGroupOffsets(nil, g.id, next)); err != nil {
		return fmt.Errorf("broker: commit offsets of group %q: %w", g.id, err)
	}
	g.committed.Store(&next)
	return nil
}

// encodeGroupOffsets appends the file contents of group id's offsets to
// b, the entries sorted so that the same offsets give the same bytes.
func encodeGroupOffsets(b []byte, id string, committed map[topicPartition]committedOffset) []byte {
	start := len(b)
	b = append(b, offsetsMagic...)
	b = append(b, offsetsVersion)
	b = appendString(b, id)
	b = binary.AppendUvarint(b, uint64(len(committed)))
	for _, tp := range sortedPartitions(committed) {
		c := committed[tp]
		b = appendString(b, tp.topic)
		b = binary.BigEndian.AppendUint32(b, uint32(tp.partition))
		b = binary.BigEndian.AppendUint64(b, uint64(c.offset))
		b = binary.BigEndian.AppendUint32(b, uint32(c.leaderEpoch))
		b = appendString(b, c.metadata)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], crc32c))
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeGroupOffsets decodes a file's contents. Any damage (a short
// file, a bad magic, version or checksum, a length past the end, a
// repeated partition, bytes after the last entry) is an error: the
// contents are all or nothing.
func decodeGroupOffsets(data []byte) (string, map[topicPartition]committedOffset, error) {
	if len(data) < offsetsHeaderBytes+4 {
		return "", nil, fmt.Errorf("%d bytes, shorter than a header and a checksum", len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crc32c); got != sum {
		return "", nil, fmt.Errorf("checksum %08x, computed %08x", sum, got)
	}
	if string(body[:len(offsetsMagic)]) != offsetsMagic {
		return "", nil, fmt.Errorf("magic %q, want %q", body[:len(offsetsMagic)], offsetsMagic)
	}
	if v := body[len(offsetsMagic)]; v != offsetsVersion {
		return "", nil, fmt.Errorf("version %d, want %d", v, offsetsVersion)
	}
	d := decoder{b: body[offsetsHeaderBytes:]}
	id := d.string()
	n := d.uvarint()
	// Each entry takes at least 18 bytes: a bound on n before allocating.
	if d.err == nil && n > uint64(len(d.b))/18 {
		d.fail("%d entries in %d bytes", n, len(d.b))
	}
	committed := make(map[topicPartition]committedOffset, min(n, 1<<16))
	for i := uint64(0); i < n && d.err == nil; i++ {
		tp := topicPartition{topic: d.string(), partition: int32(d.uint32())}
		c := committedOffset{offset: int64(d.uint64()), leaderEpoch: int32(d.uint32()), metadata: d.string()}
		if d.err != nil {
			break
		}
		if _, dup := committed[tp]; dup {
			d.fail("partition %s-%d twice", tp.topic, tp.partition)
			break
		}
		committed[tp] = c
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the last entry", len(d.b))
	}
	if d.err != nil {
		return "", nil, d.err
	}
	return id, committed, nil
}

// decoder reads big-endian fields; the first error sticks and later
// reads return zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("field of %d bytes, %d left", n, len(d.b))
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail("bad length")
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) string() string { return string(d.take(d.uvarint())) }

func (d *decoder) uint32() uint32 {
	if b := d.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) uint64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}
