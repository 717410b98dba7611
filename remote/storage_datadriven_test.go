package remote

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote/objstore"
)

// TestStorageDataDriven runs the scenario files under testdata/storage.
// Each file starts with an empty mem store behind a Get-counting wrapper
// and a StorageManager for topic "orders" (topic id TID) partition 0.
// Segment ids are names (A, B, ...) mapped to fixed UUIDs; output prints
// the names. Segment bytes are segmentBytes(seed, size).
//
// Commands (errors are printed as output, never fatal):
//
//	new [chunk=N] [block=N] [object-bytes=N] [compression] [prefix=P] [cache=N] [readahead=N] [manifest-checksums]
//	                                               a new manager (same store)
//	copy seg=A start=S size=N [txn] [seed=K]       CopySegment; prints the objects written and the
//	                                               custom metadata's length (the locator, kept for
//	                                               fetch and index with locator)
//	locator seg=A                                  the locator, decoded
//	swap-blocks seg=A a=I b=J frame=N              swap the frames (N bytes each) I and J of data-000000
//	damage-locator seg=A at=N | size=N             flip a byte of the kept locator, or cut it
//	manifest seg=A                                 the stored manifest, decoded
//	keys                                           every key in the store
//	fetch seg=A start=S length=L [locator]         FetchSegment; checks the bytes, prints Gets and chunks;
//	                                               with locator, the metadata carries the locator
//	index seg=A type=OFFSET [locator]              FetchIndex; checks the bytes
//	epochs seg=A                                   FetchLeaderEpochs
//	corrupt seg=A object=O at=N                    flip a byte of an object
//	truncate seg=A object=O size=N                 cut an object
//	put key=K [seg=D]                              an empty object; TID and <seg> are substituted
//	delete seg=A                                   DeleteSegment
//	orphans keep=A,B                               DeleteOrphans; prints the deleted names
func TestStorageDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/storage", func(t *testing.T, path string) {
		e := &storageEnv{t: t, store: &countingStore{Store: newMemStore()}, segs: map[string]*testCopy{}}
		e.s = newTestStorage(t, e.store, StorageOptions{})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

var ddTopic = TopicIDPartition{TopicID: UUID{0xff}, Topic: "orders", Partition: 0}

type storageEnv struct {
	t     *testing.T
	store *countingStore
	s     *StorageManager
	segs  map[string]*testCopy
}

// segID is the fixed UUID of a segment name.
func ddSegID(name string) UUID {
	var u UUID
	copy(u[:], name)
	return u
}

// printable replaces UUIDs in s by names.
func (e *storageEnv) printable(s string) string {
	s = strings.ReplaceAll(s, ddTopic.TopicID.String(), "TID")
	for name := range e.segs {
		s = strings.ReplaceAll(s, ddSegID(name).String(), name)
	}
	return s
}

func (e *storageEnv) seg(d *datadriven.TestData) *testCopy {
	var name string
	d.ScanArgs(e.t, "seg", &name)
	c, ok := e.segs[name]
	if !ok {
		// A segment never copied: metadata only.
		c = newTestCopy(ddTopic, 1, 0, 100, false)
		c.m.SegmentID.ID = ddSegID(name)
		e.segs[name] = c
	}
	return c
}

func (e *storageEnv) objectKey(d *datadriven.TestData, c *testCopy) string {
	var object string
	d.ScanArgs(e.t, "object", &object)
	dir, err := e.s.SegmentPrefix(&c.m)
	require.NoError(e.t, err)
	return dir + object
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}

func (e *storageEnv) handle(t *testing.T, d *datadriven.TestData) string {
	handlers := map[string]func(*testing.T, *datadriven.TestData) string{
		"new": e.cmdNew, "copy": e.cmdCopy, "manifest": e.cmdManifest, "keys": e.cmdKeys,
		"fetch": e.cmdFetch, "index": e.cmdIndex, "epochs": e.cmdEpochs, "corrupt": e.cmdCorrupt,
		"truncate": e.cmdTruncate, "put": e.cmdPut, "delete": e.cmdDelete, "orphans": e.cmdOrphans,
		"locator": e.cmdLocator, "damage-locator": e.cmdDamageLocator, "swap-blocks": e.cmdSwapBlocks,
	}
	h, ok := handlers[d.Cmd]
	if !ok {
		t.Fatalf("unknown command %q", d.Cmd)
	}
	return h(t, d)
}

// result prints an error (UUIDs replaced by names) or "ok".
func (e *storageEnv) result(err error) string {
	if err != nil {
		return "error: " + e.printable(err.Error()) + "\n"
	}
	return "ok\n"
}

func (e *storageEnv) cmdNew(t *testing.T, d *datadriven.TestData) string {
	opts := StorageOptions{ChunkSize: int(intArg(t, d, "chunk", 0)), DataObjectBytes: int(intArg(t, d, "object-bytes", 0)),
		Compression: d.HasArg("compression"), ManifestCacheEntries: int(intArg(t, d, "cache", 0)),
		ReadAheadBytes: int(intArg(t, d, "readahead", 0)), ChecksumsInManifest: d.HasArg("manifest-checksums"),
		BlockSize: int(intArg(t, d, "block", 0))}
	if d.HasArg("prefix") {
		d.ScanArgs(t, "prefix", &opts.KeyPrefix)
	}
	s, err := NewStorageManager(e.store, opts)
	if err == nil {
		e.s = s
	}
	return e.result(err)
}

func (e *storageEnv) cmdCopy(t *testing.T, d *datadriven.TestData) string {
	var name string
	d.ScanArgs(t, "seg", &name)
	c := newTestCopy(ddTopic, uint64(intArg(t, d, "seed", 1)), intArg(t, d, "start", 0), int(intArg(t, d, "size", 0)), d.HasArg("txn"))
	c.m.SegmentID.ID = ddSegID(name)
	e.segs[name] = c
	before := objectSet(e.store)
	custom, err := e.s.CopySegment(context.Background(), &c.m, c.data)
	if err != nil {
		return e.result(err)
	}
	c.locator = custom
	var b strings.Builder
	for _, o := range listObjects(t, e.store) {
		if before[o.Key] {
			continue
		}
		size := strconv.FormatInt(o.Size, 10)
		if e.s.opts.Compression && strings.Contains(o.Key, dataObjectPrefix) {
			size = "(compressed)" // depends on the zstd version
		}
		fmt.Fprintf(&b, "%s %s\n", e.printable(o.Key), size)
	}
	if custom != nil {
		fmt.Fprintf(&b, "custom metadata %d bytes\n", len(custom))
	}
	return b.String()
}

// meta returns the metadata of c a command reads with: with the locator
// as custom metadata when the command has the locator argument.
func (e *storageEnv) meta(d *datadriven.TestData, c *testCopy) *SegmentMetadata {
	m := c.m
	if d.HasArg("locator") {
		require.NotNil(e.t, c.locator, "the copy returned no locator")
		m.CustomMetadata = c.locator
	}
	return &m
}

func (e *storageEnv) cmdLocator(t *testing.T, d *datadriven.TestData) string {
	c := e.seg(d)
	man, err := manifestFromLocator(e.meta(d, c))
	if err != nil {
		return e.result(err)
	}
	return describeManifest(man, false)
}

func (e *storageEnv) cmdSwapBlocks(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	c := e.seg(d)
	dir, err := e.s.SegmentPrefix(&c.m)
	require.NoError(t, err)
	key := dir + "data-000000"
	b, err := objstore.ReadAll(ctx, e.store, key)
	if err != nil {
		return e.result(err)
	}
	i, j, n := intArg(t, d, "a", 0), intArg(t, d, "b", 0), intArg(t, d, "frame", 0)
	tmp := bytes.Clone(b[i*n : (i+1)*n])
	copy(b[i*n:], b[j*n:(j+1)*n])
	copy(b[j*n:], tmp)
	return e.result(e.store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
}

func (e *storageEnv) cmdDamageLocator(t *testing.T, d *datadriven.TestData) string {
	c := e.seg(d)
	c.locator = bytes.Clone(c.locator)
	if d.HasArg("size") {
		c.locator = c.locator[:intArg(t, d, "size", 0)]
	} else {
		c.locator[intArg(t, d, "at", 0)] ^= 0x20
	}
	return "ok\n"
}

func (e *storageEnv) cmdManifest(t *testing.T, d *datadriven.TestData) string {
	c := e.seg(d)
	keys, err := e.s.keysFor(&c.m)
	require.NoError(t, err)
	b, err := objstore.ReadAll(context.Background(), e.store, keys.manifest())
	if err != nil {
		return e.result(err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return e.result(err)
	}
	return describeManifest(m, d.HasArg("sizes"))
}

func (e *storageEnv) cmdKeys(t *testing.T, _ *datadriven.TestData) string {
	var b strings.Builder
	for _, o := range listObjects(t, e.store) {
		fmt.Fprintf(&b, "%s\n", e.printable(o.Key))
	}
	return b.String()
}

func (e *storageEnv) cmdFetch(t *testing.T, d *datadriven.TestData) string {
	c := e.seg(d)
	start, length := intArg(t, d, "start", 0), intArg(t, d, "length", -1)
	gets0, bytes0, chunks0 := e.store.gets.Load(), e.store.bytes.Load(), e.s.Metrics().ChunksFetched
	got, err := fetchAll(context.Background(), e.s, e.meta(d, c), start, length)
	stats := fmt.Sprintf("gets=%d chunks=%d", e.store.gets.Load()-gets0, e.s.Metrics().ChunksFetched-chunks0)
	if !e.s.opts.Compression {
		stats += fmt.Sprintf(" bytes-fetched=%d", e.store.bytes.Load()-bytes0)
	}
	if err != nil {
		return fmt.Sprintf("%s%s after %d bytes\n", e.result(err), stats, len(got))
	}
	end := int64(len(c.src))
	if length >= 0 {
		end = start + length
	}
	if !bytes.Equal(got, c.src[start:end]) {
		return fmt.Sprintf("WRONG BYTES: %d bytes read\n", len(got))
	}
	return fmt.Sprintf("%d bytes match; %s\n", len(got), stats)
}

func (e *storageEnv) cmdIndex(t *testing.T, d *datadriven.TestData) string {
	c := e.seg(d)
	var typ string
	d.ScanArgs(t, "type", &typ)
	it := map[string]IndexType{"OFFSET": IndexOffset, "TIMESTAMP": IndexTimestamp, "PRODUCER_SNAPSHOT": IndexProducerSnapshot,
		"TRANSACTION": IndexTransaction, "LEADER_EPOCH": IndexLeaderEpoch}[typ]
	got, err := e.s.FetchIndex(context.Background(), e.meta(d, c), it)
	if err != nil {
		return e.result(err)
	}
	want := map[IndexType][]byte{IndexOffset: c.data.OffsetIndex, IndexTimestamp: c.data.TimeIndex,
		IndexProducerSnapshot: c.data.ProducerSnapshot, IndexTransaction: c.data.TxnIndex,
		IndexLeaderEpoch: appendEpochCheckpoint(nil, c.data.LeaderEpochs)}[it]
	if !bytes.Equal(got, want) {
		return "WRONG BYTES\n"
	}
	if it == IndexLeaderEpoch {
		return fmt.Sprintf("%d bytes match: %q\n", len(got), got)
	}
	return fmt.Sprintf("%d bytes match\n", len(got))
}

func (e *storageEnv) cmdEpochs(_ *testing.T, d *datadriven.TestData) string {
	got, err := e.s.FetchLeaderEpochs(context.Background(), &e.seg(d).m)
	if err != nil {
		return e.result(err)
	}
	return epochcache.FormatEntries(got) + "\n"
}

func (e *storageEnv) cmdCorrupt(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	key, at := e.objectKey(d, e.seg(d)), intArg(t, d, "at", 0)
	b, err := objstore.ReadAll(ctx, e.store, key)
	if err != nil {
		return e.result(err)
	}
	b[at] ^= 0x20
	return e.result(e.store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
}

func (e *storageEnv) cmdTruncate(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	key, size := e.objectKey(d, e.seg(d)), intArg(t, d, "size", 0)
	b, err := objstore.ReadAll(ctx, e.store, key)
	if err != nil {
		return e.result(err)
	}
	return e.result(e.store.Put(ctx, key, bytes.NewReader(b[:size]), size, objstore.PutOptions{}))
}

func (e *storageEnv) cmdPut(t *testing.T, d *datadriven.TestData) string {
	var key, seg string
	d.ScanArgs(t, "key", &key)
	key = strings.ReplaceAll(key, "TID", ddTopic.TopicID.String())
	if d.HasArg("seg") {
		// The key names a segment that has no metadata here: a crashed copy.
		d.ScanArgs(t, "seg", &seg)
		c := newTestCopy(ddTopic, 1, 0, 100, false)
		c.m.SegmentID.ID = ddSegID(seg)
		e.segs[seg] = c
		key = strings.ReplaceAll(key, "<seg>", ddSegID(seg).String())
	}
	return e.result(e.store.Put(context.Background(), key, bytes.NewReader(nil), 0, objstore.PutOptions{}))
}

func (e *storageEnv) cmdDelete(_ *testing.T, d *datadriven.TestData) string {
	return e.result(e.s.DeleteSegment(context.Background(), &e.seg(d).m))
}

func (e *storageEnv) cmdOrphans(t *testing.T, d *datadriven.TestData) string {
	keep := map[SegmentID]bool{}
	if d.HasArg("keep") {
		var names []string
		d.ScanArgs(t, "keep", &names)
		for _, n := range names {
			keep[SegmentID{TopicIDPartition: ddTopic, ID: ddSegID(n)}] = true
		}
	}
	deleted, err := e.s.DeleteOrphans(context.Background(), ddTopic, func(id SegmentID) bool { return keep[id] })
	if err != nil {
		return e.result(err)
	}
	var names []string
	for _, id := range deleted {
		names = append(names, e.printable(id.ID.String()))
	}
	return fmt.Sprintf("deleted: [%s]\n", strings.Join(names, " "))
}

func listObjects(t *testing.T, s objstore.Store) []objstore.ObjectInfo {
	var objs []objstore.ObjectInfo
	require.NoError(t, objstore.ListAll(context.Background(), s, "", func(o objstore.ObjectInfo) error {
		objs = append(objs, o)
		return nil
	}))
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs
}

func objectSet(s *countingStore) map[string]bool {
	set := map[string]bool{}
	_ = objstore.ListAll(context.Background(), s, "", func(o objstore.ObjectInfo) error {
		set[o.Key] = true
		return nil
	})
	return set
}

// describeManifest prints a manifest: stored sizes of zstd chunks only
// with sizes (they depend on the zstd version).
func describeManifest(m *manifest, sizes bool) string {
	var b strings.Builder
	if m.framed {
		fmt.Fprintf(&b, "version 3: start=%d log=%d block=%d blocks=%d object=%v\n", m.startOffset, m.logSize,
			m.blockSize, m.numBlocks(), m.objectSizes)
	} else {
		fmt.Fprintf(&b, "start=%d log=%d chunk=%d objects=%d chunks=%d\n", m.startOffset, m.logSize, m.chunkSize,
			len(m.objectSizes), len(m.chunks))
	}
	for k, c := range m.chunks {
		codec := "raw"
		stored := fmt.Sprintf("[%d, %d)", c.storedOffset, c.storedEnd())
		if c.codec == codecZstd {
			codec = "zstd"
			if !sizes {
				stored = "(compressed)"
			}
		}
		fmt.Fprintf(&b, "chunk %d: raw [%d, %d) %s data-%06d %s\n", k, c.rawOffset, c.rawOffset+c.rawLen, codec, c.object, stored)
	}
	for _, ix := range m.indexes {
		fmt.Fprintf(&b, "index %s: [%d, %d)\n", ix.typ, ix.offset, ix.offset+ix.size)
	}
	return b.String()
}
