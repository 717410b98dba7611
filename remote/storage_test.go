package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// storageTopic is the partition of most storage tests: a topic name with
// every character class Kafka allows besides letters.
var storageTopic = TopicIDPartition{TopicID: UUID{0x74, 0x69, 0x65, 0x72}, Topic: "orders.v2_eu-1", Partition: 3}

// segmentBytes returns n deterministic bytes of seed that alternate
// between compressible runs (text) and random blocks, so that a compressed
// copy stores some chunks with zstd and some raw.
func segmentBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5e9))
	b := make([]byte, 0, n)
	for len(b) < n {
		block := min(300+rng.IntN(900), n-len(b))
		if rng.IntN(2) == 0 {
			for i := range block {
				b = append(b, "kafka tiered storage "[i%21])
			}
		} else {
			for range block {
				b = append(b, byte(rng.Uint32()))
			}
		}
	}
	return b
}

// testCopy is one segment ready to copy, with its source bytes.
type testCopy struct {
	m    SegmentMetadata
	data SegmentData
	src  []byte
	// locator is what the copy returned as custom metadata (the
	// datadriven locator argument reads with it).
	locator []byte
}

// newTestCopy builds a segment of size bytes at start with a fresh id;
// txn adds a transaction index.
func newTestCopy(tp TopicIDPartition, seed uint64, start int64, size int, txn bool) *testCopy {
	src := segmentBytes(seed, size)
	c := &testCopy{src: src}
	c.m = SegmentMetadata{
		SegmentID: NewSegmentID(tp), StartOffset: start, EndOffset: start + 99,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 4, StartOffset: start}, {Epoch: 6, StartOffset: start + 50}},
		SizeBytes:           int64(size), MaxTimestampMs: 1700000000000, State: CopySegmentStarted,
		TxnIndexEmpty: !txn,
	}
	c.data = SegmentData{
		Log: bytes.NewReader(src), LogSize: int64(size),
		OffsetIndex:      segmentBytes(seed+1, 160),
		TimeIndex:        segmentBytes(seed+2, 240),
		ProducerSnapshot: segmentBytes(seed+3, 77),
		LeaderEpochs:     []epochcache.Entry{{Epoch: 4, StartOffset: start}, {Epoch: 6, StartOffset: start + 50}},
	}
	if start > 10 {
		// The history before the segment, as EntriesInRange(-1, next base)
		// gives it.
		c.data.LeaderEpochs = append([]epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: start - 10}},
			c.data.LeaderEpochs...)
	}
	if txn {
		c.data.TxnIndex = segmentBytes(seed+4, 34)
	}
	return c
}

func newMemStore() *mem.Mem { return mem.New(mem.Options{Seed: 1}) }

func newFSStore(t testing.TB) objstore.Store {
	s, err := fs.Open(t.TempDir(), fs.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestStorage(t testing.TB, store objstore.Store, opts StorageOptions) *StorageManager {
	t.Helper()
	s, err := NewStorageManager(store, opts)
	require.NoError(t, err)
	return s
}

// fetchAll reads [start, start+length) through FetchSegment.
func fetchAll(ctx context.Context, s *StorageManager, m *SegmentMetadata, start, length int64) ([]byte, error) {
	body, err := s.FetchSegment(ctx, m, start, length)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(body)
	if cerr := body.Close(); err == nil {
		err = cerr
	}
	return b, err
}

// fetchRanges are ranges around chunk boundaries for a segment of size n
// in chunks of 1000 bytes.
func fetchRanges(n int64) [][2]int64 {
	return [][2]int64{
		{0, 0}, {0, 1}, {0, -1}, {0, n}, {n, 0}, {n, -1}, // ends, empty, whole
		{1500, 100}, {1000, 1000}, {999, 1}, {999, 2}, {1999, 1}, // one chunk, exact chunk, boundaries
		{500, 3000}, {999, 1002}, {1, n - 2}, // across chunks
		{n - 1, 1}, {n - 1, -1}, {n - 500, -1}, {n - 1000, 1000}, // the last, short chunk
	}
}

// checkFetches reads every range of fetchRanges and some random ones and
// compares them with src.
func checkFetches(t *testing.T, s *StorageManager, m *SegmentMetadata, src []byte) {
	t.Helper()
	ctx := context.Background()
	n := int64(len(src))
	ranges := fetchRanges(n)
	rng := rand.New(rand.NewPCG(uint64(n), 9))
	for range 20 {
		start := rng.Int64N(n + 1)
		ranges = append(ranges, [2]int64{start, rng.Int64N(n - start + 1)})
	}
	for _, r := range ranges {
		if r[0] < 0 || r[0] > n || r[1] > n-r[0] {
			continue // a range for a larger segment
		}
		got, err := fetchAll(ctx, s, m, r[0], r[1])
		require.NoError(t, err, "range %v", r)
		end := n
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		require.True(t, bytes.Equal(src[r[0]:end], got), "range %v: %d bytes differ from the source", r, len(got))
	}
	for _, r := range [][2]int64{{n + 1, 0}, {n + 1, -1}, {n - 1, 2}, {0, n + 1}, {-1, 0}, {0, -2}} {
		_, err := s.FetchSegment(ctx, m, r[0], r[1])
		require.ErrorIs(t, err, ErrInvalidArgument, "range %v", r)
	}
}

// checkIndexes fetches every index and the leader epochs.
func checkIndexes(t *testing.T, s *StorageManager, c *testCopy) {
	t.Helper()
	ctx := context.Background()
	want := map[IndexType][]byte{
		IndexOffset: c.data.OffsetIndex, IndexTimestamp: c.data.TimeIndex,
		IndexProducerSnapshot: c.data.ProducerSnapshot, IndexTransaction: c.data.TxnIndex,
		IndexLeaderEpoch:     appendEpochCheckpoint(nil, c.data.LeaderEpochs),
		IndexProducerBatches: c.data.ProducerBatches,
	}
	for typ, w := range want {
		got, err := s.FetchIndex(ctx, &c.m, typ)
		if (typ == IndexTransaction || typ == IndexProducerBatches) && len(w) == 0 {
			require.ErrorIs(t, err, ErrIndexNotFound)
			continue
		}
		require.NoError(t, err, "%s", typ)
		require.Equal(t, w, got, "%s", typ)
	}
	epochs, err := s.FetchLeaderEpochs(ctx, &c.m)
	require.NoError(t, err)
	require.Equal(t, c.data.LeaderEpochs, epochs)
	_, err = s.FetchIndex(ctx, &c.m, IndexType(9))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestStorageRoundTrip(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) objstore.Store
	}{
		{"mem", func(*testing.T) objstore.Store { return newMemStore() }},
		{"fs", func(t *testing.T) objstore.Store { return newFSStore(t) }},
	}
	for _, st := range stores {
		// zstd: compressed chunks (version 1); manifest: raw chunks with
		// their checksums in the manifest (version 1); framed: blocks with
		// CRC trailers and a locator (version 3).
		for _, layout := range []string{"zstd", "manifest", "framed"} {
			compression := layout == "zstd"
			// txn adds a transaction index, and a producer batches index:
			// both optional (the other case is a segment without them,
			// the layout copies wrote before the batches index existed).
			for _, txn := range []bool{false, true} {
				t.Run(fmt.Sprintf("store=%s/layout=%s/txn=%t", st.name, layout, txn), func(t *testing.T) {
					store := st.open(t)
					opts := StorageOptions{KeyPrefix: "cluster-1/", ChunkSize: 1000, DataObjectBytes: 2500, Compression: compression,
						ChecksumsInManifest: layout == "manifest", BlockSize: 1000}
					s := newTestStorage(t, store, opts)
					c := newTestCopy(storageTopic, 7, 1200, 10_500, txn)
					if txn {
						c.data.ProducerBatches = segmentBytes(12, 131)
					}
					custom, err := s.CopySegment(context.Background(), &c.m, c.data)
					require.NoError(t, err)
					checkFetches(t, s, &c.m, c.src)
					checkIndexes(t, s, c)

					// A manager without the manifest cached reads the same.
					cold := newTestStorage(t, store, opts)
					checkFetches(t, cold, &c.m, c.src)
					checkIndexes(t, cold, c)
					require.Positive(t, cold.Metrics().ManifestMisses)

					if layout != "framed" {
						require.Nil(t, custom)
					} else {
						// With the locator in the metadata, a cold manager
						// never reads the manifest.
						if txn {
							require.Len(t, custom, locatorBatchesLen)
							require.EqualValues(t, locatorFlagBatches, custom[1])
						} else {
							require.Len(t, custom, locatorLen, "the layout copies wrote before the producer batches index")
							require.Zero(t, custom[1], "flags")
						}
						require.LessOrEqual(t, len(custom), 128, "Kafka's default remote.log.metadata.custom.metadata.max.bytes")
						located := c.m
						located.CustomMetadata = custom
						lc := &testCopy{m: located, data: c.data, src: c.src}
						cold := newTestStorage(t, store, StorageOptions{KeyPrefix: "cluster-1/", ManifestCacheEntries: -1})
						checkFetches(t, cold, &lc.m, c.src)
						checkIndexes(t, cold, lc)
						mt := cold.Metrics()
						require.Zero(t, mt.ManifestMisses)
						require.Positive(t, mt.LocatorReads)
						require.Zero(t, mt.SpeculativeReads)
					}

					man := s.cache.get(c.m.SegmentID)
					require.NotNil(t, man)
					codecs := map[uint8]int{}
					for _, ch := range man.chunks {
						codecs[ch.codec]++
					}
					switch {
					case layout == "framed":
						require.True(t, man.framed)
						require.Equal(t, []int64{10_500 + 11*trailerLen}, man.objectSizes)
					case compression:
						require.Positive(t, codecs[codecZstd], "some chunks compress")
						require.Positive(t, codecs[codecNone], "random chunks are stored raw")
						require.Greater(t, len(man.objectSizes), 1, "data objects of at most 2500 bytes")
					default:
						require.Equal(t, map[uint8]int{codecNone: 11}, codecs)
						require.Equal(t, []int64{10_500}, man.objectSizes)
					}
					mt := s.Metrics()
					require.EqualValues(t, 1, mt.SegmentsCopied)
					require.EqualValues(t, len(man.objectSizes)+2, mt.ObjectsPut)
					require.Zero(t, mt.Corruptions)
				})
			}
		}
	}
}

// TestStorageCopyIdempotent: a retry of the same metadata overwrites the
// same keys; a copy of an empty segment works.
func TestStorageCopyIdempotent(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	s := newTestStorage(t, store, StorageOptions{ChunkSize: 1000, Compression: true})
	c := newTestCopy(storageTopic, 1, 0, 4321, false)
	_, err := s.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)
	keys := store.Keys()
	_, err = s.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)
	require.Equal(t, keys, store.Keys())
	checkFetches(t, s, &c.m, c.src)

	empty := newTestCopy(storageTopic, 2, 100, 0, false)
	_, err = s.CopySegment(ctx, &empty.m, empty.data)
	require.NoError(t, err)
	got, err := fetchAll(ctx, s, &empty.m, 0, -1)
	require.NoError(t, err)
	require.Empty(t, got)
	checkIndexes(t, s, empty)
}

func TestStorageCopyValidation(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	s := newTestStorage(t, store, StorageOptions{ChunkSize: 1000})
	for name, mutate := range map[string]func(c *testCopy){
		"size differs":        func(c *testCopy) { c.m.SizeBytes++ },
		"nil log":             func(c *testCopy) { c.data.Log = nil },
		"txn flag":            func(c *testCopy) { c.m.TxnIndexEmpty = false },
		"txn bytes":           func(c *testCopy) { c.data.TxnIndex = []byte{1} },
		"epochs not monotone": func(c *testCopy) { c.data.LeaderEpochs[1].Epoch = 0 },
		"epoch after end": func(c *testCopy) {
			c.data.LeaderEpochs = append(c.data.LeaderEpochs, epochcache.Entry{Epoch: 9, StartOffset: 500})
		},
		"negative epoch":       func(c *testCopy) { c.data.LeaderEpochs[0].Epoch = -1 },
		"bad metadata":         func(c *testCopy) { c.m.SegmentLeaderEpochs = nil },
		"illegal topic":        func(c *testCopy) { c.m.SegmentID.TopicIDPartition.Topic = "a/b" },
		"negative partition":   func(c *testCopy) { c.m.SegmentID.TopicIDPartition.Partition = -1 },
		"too many small chunk": func(c *testCopy) { c.data.LogSize = 1000 * (maxChunksPerSegment + 1); c.m.SizeBytes = c.data.LogSize },
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestCopy(storageTopic, 1, 0, 2000, false)
			mutate(c)
			_, err := s.CopySegment(ctx, &c.m, c.data)
			require.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
	require.Empty(t, store.Keys(), "nothing uploaded by a refused copy")
	// A log that reads short fails the upload itself: the indexes object,
	// uploaded alongside, may be there, but no manifest, so the segment
	// reads as not copied (the Manager deletes such a dangling copy).
	c := newTestCopy(storageTopic, 1, 0, 2000, false)
	c.data.Log = bytes.NewReader(c.src[:100])
	_, err := s.CopySegment(ctx, &c.m, c.data)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = s.FetchSegment(ctx, &c.m, 0, -1)
	require.ErrorIs(t, err, ErrSegmentDataNotFound)
	require.NoError(t, s.DeleteSegment(ctx, &c.m))
	require.Empty(t, store.Keys())
	_, err = s.CopySegment(ctx, nil, SegmentData{})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestNewStorageManagerOptions(t *testing.T) {
	store := newMemStore()
	for _, o := range []StorageOptions{
		{ChunkSize: -1}, {ChunkSize: MaxChunkBytes + 1}, {ChunkSize: 1000, DataObjectBytes: 999}, {ReadAheadBytes: -1},
		{KeyPrefix: "/x"}, {KeyPrefix: "a//"}, {KeyPrefix: "a/./"}, {KeyPrefix: "a\x00"},
	} {
		_, err := NewStorageManager(store, o)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
	}
	_, err := NewStorageManager(nil, StorageOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	s := newTestStorage(t, store, StorageOptions{ChunkSize: 32 << 20})
	require.Equal(t, 32<<20, s.opts.DataObjectBytes)
	s = newTestStorage(t, store, StorageOptions{})
	require.Equal(t, defaultChunkSize, s.opts.ChunkSize)
	require.Equal(t, defaultDataObjectBytes, s.opts.DataObjectBytes)
	require.Equal(t, 2*defaultChunkSize, s.opts.ReadAheadBytes)
	require.Equal(t, defaultManifestCacheEntries, s.cache.capacity)
}

// countingStore counts Get calls and the body bytes read, independently
// of the manager's own metrics.
type countingStore struct {
	objstore.Store
	gets, bytes atomic.Int64
	reads       atomic.Int64 // Read calls on the bodies
}

func (c *countingStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	body, err := c.Store.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &countingBody{ReadCloser: body, n: &c.bytes, reads: &c.reads}, nil
}

type countingBody struct {
	io.ReadCloser
	n, reads *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	b.reads.Add(1)
	return n, err
}

// TestStorageFetchReadsABlockRunAtOnce: the blocks a 16 KiB read touches
// (five of 4 KiB, unaligned) come from the store's body in one Read (one
// pread under the fs store), plus the one-byte Read that checks the body
// ends there; every block is still checked before its bytes are served.
func TestStorageFetchReadsABlockRunAtOnce(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore()
	c := newTestCopy(storageTopic, 4, 0, 1<<20, false)
	counted := &countingStore{Store: mem}
	s := newTestStorage(t, counted, StorageOptions{BlockSize: 4 << 10})
	custom, err := s.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)
	located := c.m
	located.CustomMetadata = custom

	const pos, n = 100_000, 16 << 10
	got, err := fetchAll(ctx, s, &located, pos, n)
	require.NoError(t, err)
	require.Equal(t, c.src[pos:pos+n], got)
	require.EqualValues(t, 1, counted.gets.Load())
	require.EqualValues(t, 2, counted.reads.Load(), "one Read for the five blocks, one for the end")
	require.EqualValues(t, 5*(4<<10+trailerLen), counted.bytes.Load())

	// Corrupt the fifth block the read touches: nothing is served.
	keys, err := s.keysFor(&c.m)
	require.NoError(t, err)
	fifth := int64(pos/(4<<10) + 4)
	b, err := objstore.ReadAll(ctx, mem, keys.data(0))
	require.NoError(t, err)
	b[fifth*(4<<10+trailerLen)+10] ^= 1
	require.NoError(t, mem.Put(ctx, keys.data(0), bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
	s = newTestStorage(t, mem, StorageOptions{BlockSize: 4 << 10})
	got, err = fetchAll(ctx, s, &located, pos, n)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, c.src[pos:fifth*(4<<10)], got, "the four checked blocks, nothing of the fifth")
}

// TestStorageFetchReadsOnlyNeededChunks: a ranged read issues one Get per
// data object it spans and receives exactly the stored bytes of the chunks
// it needs, or with block checksums (an uncompressed segment whose chunks
// are longer than BlockSize) of the blocks it needs.
func TestStorageFetchReadsOnlyNeededChunks(t *testing.T) {
	for _, tc := range []struct {
		compression bool
		blockSize   int
	}{{false, 0}, {true, 0}, {false, 64}, {true, 64}} {
		t.Run(fmt.Sprintf("compression=%t/blocks=%d", tc.compression, tc.blockSize), func(t *testing.T) {
			compression := tc.compression
			ctx := context.Background()
			store := &countingStore{Store: newMemStore()}
			// A read-ahead window larger than the segment: a Get per object.
			opts := StorageOptions{ChunkSize: 1000, DataObjectBytes: 2500, Compression: compression, ReadAheadBytes: 1 << 20,
				BlockSize: tc.blockSize, ChecksumsInManifest: true}
			writer := newTestStorage(t, store, opts)
			c := newTestCopy(storageTopic, 3, 0, 10_500, false)
			_, err := writer.CopySegment(ctx, &c.m, c.data)
			require.NoError(t, err)
			man := writer.cache.get(c.m.SegmentID)
			manifestSize := int64(man.encodedLen())
			if tc.blockSize > 0 && !compression {
				require.EqualValues(t, tc.blockSize, man.blockSize, "version 2, with blocks")
			} else {
				require.Zero(t, man.blockSize, "version 1")
			}

			for _, r := range [][2]int64{{1500, 100}, {999, 2}, {500, 3000}, {10_400, -1}, {0, -1}} {
				s := newTestStorage(t, store, opts) // cold: the manifest is read first
				gets0, bytes0 := store.gets.Load(), store.bytes.Load()
				got, err := fetchAll(ctx, s, &c.m, r[0], r[1])
				require.NoError(t, err)
				end := int64(len(c.src))
				if r[1] >= 0 {
					end = r[0] + r[1]
				}
				require.Equal(t, c.src[r[0]:end], got)

				first, last := man.unitAt(r[0]), man.unitAt(end-1)
				var wantBytes int64
				objects := map[int]bool{}
				for k := first; k <= last; k++ {
					wantBytes += man.unit(k).storedLen
					objects[man.unit(k).object] = true
				}
				require.EqualValues(t, 1+len(objects), store.gets.Load()-gets0, "range %v: manifest + one Get per object", r)
				require.EqualValues(t, manifestSize+wantBytes, store.bytes.Load()-bytes0, "range %v", r)
				mt := s.Metrics()
				require.EqualValues(t, last-first+1, mt.ChunksFetched)
				require.EqualValues(t, 1+len(objects), mt.GetRequests)
				require.EqualValues(t, manifestSize+wantBytes, mt.BytesFetched)

				// Warm: the manifest comes from the cache.
				gets0 = store.gets.Load()
				_, err = fetchAll(ctx, s, &c.m, r[0], r[1])
				require.NoError(t, err)
				require.EqualValues(t, len(objects), store.gets.Load()-gets0)
				require.EqualValues(t, 1, s.Metrics().ManifestHits)
			}
			if !compression {
				// An uncompressed segment is one object: any range is one Get.
				require.Len(t, man.objectSizes, 1)
			}
		})
	}
}

// TestStorageManifestCacheBounded: the LRU holds at most its capacity and
// evicts the least recently used manifest.
func TestStorageManifestCacheBounded(t *testing.T) {
	ctx := context.Background()
	s := newTestStorage(t, newMemStore(), StorageOptions{ChunkSize: 1000, ManifestCacheEntries: 2})
	var copies []*testCopy
	for i := range 3 {
		c := newTestCopy(storageTopic, uint64(i), int64(i)*100, 1500, false)
		_, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		copies = append(copies, c)
	}
	require.Nil(t, s.cache.get(copies[0].m.SegmentID), "evicted")
	require.NotNil(t, s.cache.get(copies[1].m.SegmentID))
	_, err := fetchAll(ctx, s, &copies[0].m, 0, 10) // miss: reloads 0, evicts 2 (1 was used last)
	require.NoError(t, err)
	require.Nil(t, s.cache.get(copies[2].m.SegmentID))
	require.EqualValues(t, 1, s.Metrics().ManifestMisses)

	off := newTestStorage(t, newMemStore(), StorageOptions{ManifestCacheEntries: -1})
	require.Nil(t, off.cache)
}

func TestStorageDeleteSegment(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	s := newTestStorage(t, store, StorageOptions{ChunkSize: 1000, DataObjectBytes: 2000, Compression: true})
	c := newTestCopy(storageTopic, 5, 0, 9000, true)
	other := newTestCopy(storageTopic, 6, 100, 3000, false)
	for _, x := range []*testCopy{c, other} {
		_, err := s.CopySegment(ctx, &x.m, x.data)
		require.NoError(t, err)
	}
	require.NoError(t, s.DeleteSegment(ctx, &c.m))
	require.NoError(t, s.DeleteSegment(ctx, &c.m), "twice")
	never := newTestCopy(storageTopic, 7, 200, 100, false)
	require.NoError(t, s.DeleteSegment(ctx, &never.m), "never copied")

	prefix, err := s.SegmentPrefix(&other.m)
	require.NoError(t, err)
	for _, k := range store.Keys() {
		require.True(t, len(k) > len(prefix) && k[:len(prefix)] == prefix, "only the other segment is left: %s", k)
	}
	_, err = s.FetchSegment(ctx, &c.m, 0, -1)
	require.ErrorIs(t, err, ErrSegmentDataNotFound)
	require.True(t, objstore.IsNotExist(err))
	_, err = s.FetchIndex(ctx, &c.m, IndexOffset)
	require.ErrorIs(t, err, ErrSegmentDataNotFound)
	checkFetches(t, s, &other.m, other.src)
	require.EqualValues(t, 3, s.Metrics().SegmentsDeleted)
}

// TestStorageDeleteOrphans: a crashed copy (data, no manifest), a copy
// whose metadata was lost and foreign objects; only the rejected
// segments of the one partition go.
func TestStorageDeleteOrphans(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	s := newTestStorage(t, store, StorageOptions{KeyPrefix: "p/", ChunkSize: 1000})
	var kept, orphans []*testCopy
	for i := range 4 {
		c := newTestCopy(storageTopic, uint64(i), int64(i)*100, 2500, i == 1)
		_, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		if i%2 == 0 {
			kept = append(kept, c)
		} else {
			orphans = append(orphans, c)
		}
	}
	// A copy that crashed after its data object: no manifest.
	crashed := newTestCopy(storageTopic, 9, 50, 1000, false)
	keys, err := s.keysFor(&crashed.m)
	require.NoError(t, err)
	require.NoError(t, store.Put(ctx, keys.data(0), bytes.NewReader(crashed.src), 1000, objstore.PutOptions{}))
	orphans = append(orphans, crashed)
	// Another partition of the topic and another topic: untouched.
	otherTP := storageTopic
	otherTP.Partition = 4
	otherPart := newTestCopy(otherTP, 10, 0, 1000, false)
	_, err = s.CopySegment(ctx, &otherPart.m, otherPart.data)
	require.NoError(t, err)
	// Foreign objects under the partition's prefix: left alone.
	foreign := []string{s.partitionPrefix(storageTopic) + "README", s.partitionPrefix(storageTopic) + "00000000000000000000-x/manifest"}
	for _, k := range foreign {
		require.NoError(t, store.Put(ctx, k, bytes.NewReader(nil), 0, objstore.PutOptions{}))
	}

	keepSet := map[SegmentID]bool{}
	for _, c := range kept {
		keepSet[c.m.SegmentID] = true
	}
	var asked []SegmentID
	deleted, err := s.DeleteOrphans(ctx, storageTopic, func(id SegmentID) bool {
		asked = append(asked, id)
		return keepSet[id]
	})
	require.NoError(t, err)
	want := []SegmentID{orphans[2].m.SegmentID, orphans[0].m.SegmentID, orphans[1].m.SegmentID} // by start: 50, 100, 300
	require.Equal(t, want, deleted)
	require.Len(t, asked, 5)

	for _, c := range kept {
		checkFetches(t, s, &c.m, c.src)
	}
	checkFetches(t, s, &otherPart.m, otherPart.src)
	for _, c := range orphans {
		prefix, err := s.SegmentPrefix(&c.m)
		require.NoError(t, err)
		for _, k := range store.Keys() {
			require.NotContains(t, k, prefix)
		}
	}
	for _, k := range foreign {
		require.Contains(t, store.Keys(), k)
	}
	// A second sweep finds nothing more.
	deleted, err = s.DeleteOrphans(ctx, storageTopic, func(id SegmentID) bool { return keepSet[id] })
	require.NoError(t, err)
	require.Empty(t, deleted)

	_, err = s.DeleteOrphans(ctx, storageTopic, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestStorageKeys(t *testing.T) {
	for _, prefix := range []string{"", "tier/", "a/b-", "x"} {
		s := newTestStorage(t, newMemStore(), StorageOptions{KeyPrefix: prefix, ChunkSize: 100, DataObjectBytes: 100, Compression: true})
		for _, topic := range []string{"a", "orders.v2", "my_topic-1", "-", "a-b-c", "..a", "_", string(bytes.Repeat([]byte("t"), MaxTopicNameLen))} {
			tp := TopicIDPartition{TopicID: NewUUID(), Topic: topic, Partition: 12}
			c := newTestCopy(tp, 1, 42, 350, true)
			_, err := s.CopySegment(context.Background(), &c.m, c.data)
			require.NoError(t, err, "topic %q", topic)
			dir, err := s.SegmentPrefix(&c.m)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("%s%s-%s/12/00000000000000000042-%s/", prefix, topic, tp.TopicID, c.m.SegmentID.ID), dir)
			var objects []string
			for _, k := range s.store.(*mem.Mem).Keys() {
				if len(k) < len(dir) || k[:len(dir)] != dir {
					continue
				}
				id, start, object, err := s.ParseObjectKey(k)
				require.NoError(t, err, k)
				require.Equal(t, c.m.SegmentID, id)
				require.EqualValues(t, 42, start)
				objects = append(objects, object)
			}
			var want []string
			for i := range s.cache.get(c.m.SegmentID).objectSizes {
				want = append(want, fmt.Sprintf("data-%06d", i))
			}
			require.Equal(t, append(want, "indexes", "manifest"), objects)
		}
		for _, bad := range []string{"", prefix + "t-AAAAAAAAAAAAAAAAAAAAAA/0/x", prefix + "t/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA/manifest",
			prefix + "t-AAAAAAAAAAAAAAAAAAAAAB/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA/manifest", // non-canonical uuid
			prefix + "t-AAAAAAAAAAAAAAAAAAAAAA/01/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA/manifest",
			prefix + "t-AAAAAAAAAAAAAAAAAAAAAA/0/0000000000000000000x-AAAAAAAAAAAAAAAAAAAAAA/manifest",
			prefix + "t-AAAAAAAAAAAAAAAAAAAAAA/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA/a/b",
			prefix + "a/b-AAAAAAAAAAAAAAAAAAAAAA/0/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA/manifest",
		} {
			if bad == "" && prefix == "" {
				continue
			}
			_, _, _, err := s.ParseObjectKey(bad)
			require.ErrorIs(t, err, ErrInvalidArgument, "%q", bad)
		}
	}
	for _, topic := range []string{"", ".", "..", "a/b", "ü", "a b", string(bytes.Repeat([]byte("t"), MaxTopicNameLen+1))} {
		require.ErrorIs(t, validateTopicName(topic), ErrInvalidArgument, "%q", topic)
	}
}

// TestStorageConcurrentFetches: readers of several segments share a small
// manifest cache while deletes and copies run.
func TestStorageConcurrentFetches(t *testing.T) {
	ctx := context.Background()
	s := newTestStorage(t, newMemStore(), StorageOptions{ChunkSize: 500, DataObjectBytes: 1200, Compression: true, ManifestCacheEntries: 2})
	var copies []*testCopy
	for i := range 5 {
		c := newTestCopy(storageTopic, uint64(i), int64(i)*100, 4000, false)
		_, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		copies = append(copies, c)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				c := copies[rng.IntN(len(copies))]
				start := rng.Int64N(4001)
				n := rng.Int64N(4001 - start)
				got, err := fetchAll(ctx, s, &c.m, start, n)
				if err != nil || !bytes.Equal(got, c.src[start:start+n]) {
					errs <- fmt.Errorf("range [%d, +%d): %v", start, n, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			c := newTestCopy(storageTopic, uint64(100+i), 1000, 1000, false)
			if _, err := s.CopySegment(ctx, &c.m, c.data); err != nil {
				errs <- err
				return
			}
			if err := s.DeleteSegment(ctx, &c.m); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestEpochCheckpointText(t *testing.T) {
	entries := []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 8}}
	b := appendEpochCheckpoint(nil, entries)
	require.Equal(t, "0\n2\n0 0\n3 8\n", string(b))
	got, reason := parseEpochCheckpoint(b)
	require.Empty(t, reason)
	require.Equal(t, entries, got)
	got, reason = parseEpochCheckpoint([]byte("0\n0\n"))
	require.Empty(t, reason)
	require.Empty(t, got)
	for _, bad := range []string{"", "0\n", "1\n0\n", "0\n1\n", "0\n1\n0 0", "0\n2\n0 0\n0 1\n", "0\n2\n1 5\n2 5\n",
		"0\n1\n0  0\n", "0\n1\n+0 0\n", "0\n1\n-1 0\n", "0\n1\n0 0\n\n", "0\n-1\n", "0\n99999999999\n0 0\n", "0\r\n0\r\n"} {
		_, reason := parseEpochCheckpoint([]byte(bad))
		require.NotEmpty(t, reason, "%q", bad)
	}
}

// requireCorrupt checks err is a *CorruptionError about key.
func requireCorrupt(t *testing.T, err error, key string) *CorruptionError {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, ErrCorruption)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, key, ce.Key)
	return ce
}

// rewrite replaces the object under key with f of its bytes.
func rewrite(t *testing.T, store objstore.Store, key string, f func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	b, err := objstore.ReadAll(ctx, store, key)
	require.NoError(t, err)
	b = f(slices.Clone(b))
	require.NoError(t, store.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
}

func TestStorageCorruption(t *testing.T) {
	for _, compression := range []bool{false, true} {
		for _, storeName := range []string{"mem", "fs"} {
			t.Run(fmt.Sprintf("store=%s/compression=%t", storeName, compression), func(t *testing.T) {
				testStorageCorruption(t, storeName, compression)
			})
		}
	}
}

// corruptionFixture is one copied segment and what its corruption cases
// need; each case restores what it breaks.
type corruptionFixture struct {
	store    objstore.Store
	s        *StorageManager
	c        *testCopy
	keys     segmentKeys
	man      *manifest
	manBytes []byte
}

func testStorageCorruption(t *testing.T, storeName string, compression bool) {
	ctx := context.Background()
	var store objstore.Store = newMemStore()
	switch storeName {
	case "fs":
		store = newFSStore(t)
	case "s3":
		store, _ = openS3ForStorage(t, s3test.Start(t))
	}
	opts := StorageOptions{ChunkSize: 1000, DataObjectBytes: 100_000, Compression: compression, ManifestCacheEntries: -1, ChecksumsInManifest: true}
	fx := &corruptionFixture{store: store, s: newTestStorage(t, store, opts), c: newTestCopy(storageTopic, 11, 0, 5500, true)}
	_, err := fx.s.CopySegment(ctx, &fx.c.m, fx.c.data)
	require.NoError(t, err)
	fx.keys, err = fx.s.keysFor(&fx.c.m)
	require.NoError(t, err)
	fx.manBytes, err = objstore.ReadAll(ctx, store, fx.keys.manifest())
	require.NoError(t, err)
	fx.man, err = decodeManifest(fx.manBytes)
	require.NoError(t, err)

	t.Run("chunk", fx.caseChunk)
	t.Run("manifest byte", fx.caseManifestByte)
	t.Run("manifest truncated or garbage", fx.caseManifestTruncatedOrGarbage)
	t.Run("manifest of another segment", fx.caseManifestOfAnotherSegment)
	t.Run("index", fx.caseIndex)
	t.Run("leader epochs with a valid checksum", fx.caseLeaderEpochsWithAValidChecksum)
	t.Run("data object truncated or missing", fx.caseDataObjectTruncatedOrMissing)
	t.Run("indexes object size", fx.caseIndexesObjectSize)
	if compression {
		t.Run("zstd frame with a valid checksum", fx.caseZstdFrameWithAValidChecksum)
	}
}

// caseChunk: a flipped byte in a chunk fails that chunk only, after the verified chunks before it.
func (fx *corruptionFixture) caseChunk(t *testing.T) {
	ctx := context.Background()
	ch := fx.man.chunks[2]
	rewrite(t, fx.store, fx.keys.data(0), func(b []byte) []byte { b[ch.storedOffset+ch.storedLen/2] ^= 0x10; return b })
	defer rewrite(t, fx.store, fx.keys.data(0), func(b []byte) []byte { b[ch.storedOffset+ch.storedLen/2] ^= 0x10; return b })
	_, err := fetchAll(ctx, fx.s, &fx.c.m, 2100, 10)
	ce := requireCorrupt(t, err, fx.keys.data(0))
	require.Equal(t, ch.storedOffset, ce.Offset)
	require.Contains(t, ce.Error(), "chunk 2 (raw [2000, 3000))")

	// Ranges that do not touch chunk 2 still read.
	got, err := fetchAll(ctx, fx.s, &fx.c.m, 0, 2000)
	require.NoError(t, err)
	require.Equal(t, fx.c.src[:2000], got)
	// A read through it returns the verified chunks before it, then
	// the error, never a byte of the bad chunk.
	body, err := fx.s.FetchSegment(ctx, &fx.c.m, 500, -1)
	require.NoError(t, err)
	got, err = io.ReadAll(body)
	requireCorrupt(t, err, fx.keys.data(0))
	require.Equal(t, fx.c.src[500:2000], got)
	_, err = body.Read(make([]byte, 1))
	requireCorrupt(t, err, fx.keys.data(0)) // sticky
	require.NoError(t, body.Close())
	require.Positive(t, fx.s.Metrics().Corruptions)
}

// caseManifestByte: a flipped manifest byte fails every read of the segment.
func (fx *corruptionFixture) caseManifestByte(t *testing.T) {
	ctx := context.Background()
	for _, at := range []int{0, 5, 30, 60, len(fx.manBytes) / 2, len(fx.manBytes) - 1} {
		rewrite(t, fx.store, fx.keys.manifest(), func(b []byte) []byte { b[at] ^= 1; return b })
		_, err := fx.s.FetchSegment(ctx, &fx.c.m, 0, 1)
		requireCorrupt(t, err, fx.keys.manifest())
		_, err = fx.s.FetchIndex(ctx, &fx.c.m, IndexOffset)
		requireCorrupt(t, err, fx.keys.manifest())
		rewrite(t, fx.store, fx.keys.manifest(), func(b []byte) []byte { b[at] ^= 1; return b })
	}
}

// caseManifestTruncatedOrGarbage: a cut, extended or random manifest is corruption, not a short read.
func (fx *corruptionFixture) caseManifestTruncatedOrGarbage(t *testing.T) {
	ctx := context.Background()
	for _, f := range []func([]byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },
		func(b []byte) []byte { return b[:len(b)-1] },
		func([]byte) []byte { return nil },
		func(b []byte) []byte { return append(b, 0) },
		func(b []byte) []byte { return segmentBytes(3, len(b)) },
	} {
		rewrite(t, fx.store, fx.keys.manifest(), f)
		_, err := fx.s.FetchSegment(ctx, &fx.c.m, 0, -1)
		requireCorrupt(t, err, fx.keys.manifest())
		putBytes(t, fx.store, fx.keys.manifest(), fx.manBytes)
	}
}

// caseManifestOfAnotherSegment: a valid manifest under the keys of another
// segment is caught by the ids, start offset and size it carries.
func (fx *corruptionFixture) caseManifestOfAnotherSegment(t *testing.T) {
	ctx := context.Background()
	for _, mutate := range []func(*SegmentMetadata){
		func(m *SegmentMetadata) { m.SegmentID.ID[0] ^= 1 },
		func(m *SegmentMetadata) { m.SegmentID.TopicIDPartition.TopicID[0] ^= 1 },
		func(m *SegmentMetadata) { m.SegmentID.TopicIDPartition.Partition++ },
		func(m *SegmentMetadata) { m.StartOffset++; m.EndOffset++ },
		func(m *SegmentMetadata) { m.SizeBytes++ },
	} {
		other := fx.c.m
		mutate(&other)
		otherKeys, err := fx.s.keysFor(&other)
		require.NoError(t, err)
		putBytes(t, fx.store, otherKeys.manifest(), fx.manBytes)
		_, err = fx.s.FetchSegment(ctx, &other, 0, 1)
		requireCorrupt(t, err, otherKeys.manifest())
		if otherKeys != fx.keys {
			require.NoError(t, fx.store.Delete(ctx, otherKeys.manifest()))
		}
	}
}

// caseIndex: a flipped index byte fails that index only.
func (fx *corruptionFixture) caseIndex(t *testing.T) {
	ctx := context.Background()
	ix, ok := fx.man.index(IndexTimestamp)
	require.True(t, ok)
	rewrite(t, fx.store, fx.keys.indexes(), func(b []byte) []byte { b[ix.offset+3] ^= 0x80; return b })
	defer rewrite(t, fx.store, fx.keys.indexes(), func(b []byte) []byte { b[ix.offset+3] ^= 0x80; return b })
	_, err := fx.s.FetchIndex(ctx, &fx.c.m, IndexTimestamp)
	ce := requireCorrupt(t, err, fx.keys.indexes())
	require.Equal(t, ix.offset, ce.Offset)
	got, err := fx.s.FetchIndex(ctx, &fx.c.m, IndexOffset)
	require.NoError(t, err)
	require.Equal(t, fx.c.data.OffsetIndex, got)
}

// caseLeaderEpochsWithAValidChecksum: epoch checkpoint bytes that pass their checksum but do not parse.
func (fx *corruptionFixture) caseLeaderEpochsWithAValidChecksum(t *testing.T) {
	ctx := context.Background()
	// The bytes are replaced and the manifest resealed, so only the
	// checkpoint parser can object.
	ix, _ := fx.man.index(IndexLeaderEpoch)
	bad := []byte("0\n2\n5 0\n4 9\n")
	idx, err := objstore.ReadAll(ctx, fx.store, fx.keys.indexes())
	require.NoError(t, err)
	idx = append(idx[:ix.offset:ix.offset], bad...)
	m2 := *fx.man
	m2.indexes = slices.Clone(fx.man.indexes)
	m2.indexes[len(m2.indexes)-1] = manifestIndex{typ: IndexLeaderEpoch, offset: ix.offset, size: int64(len(bad)), crc: crc32c(bad)}
	putBytes(t, fx.store, fx.keys.indexes(), idx)
	putBytes(t, fx.store, fx.keys.manifest(), encodeManifest(nil, &m2))
	_, err = fx.s.FetchLeaderEpochs(ctx, &fx.c.m)
	requireCorrupt(t, err, fx.keys.indexes())
	got, err := fx.s.FetchIndex(ctx, &fx.c.m, IndexLeaderEpoch)
	require.NoError(t, err, "the bytes themselves are intact")
	require.Equal(t, bad, got)
	_, err = fx.s.CopySegment(ctx, &fx.c.m, fx.c.data) // restore
	require.NoError(t, err)
}

// caseDataObjectTruncatedOrMissing: a data object shorter or longer than
// the manifest says is corruption for every read that reaches past its
// new end or to its end, whether the store refuses the range or the body
// ends early or goes on; never a short read. Reads before the damage
// still read. A missing object is not found.
func (fx *corruptionFixture) caseDataObjectTruncatedOrMissing(t *testing.T) {
	ctx := context.Background()
	last := fx.man.chunks[len(fx.man.chunks)-1]
	for _, d := range []struct {
		name   string
		f      func([]byte) []byte
		reason string
	}{
		{"cut inside the last chunk", func(b []byte) []byte { return b[:len(b)-10] }, "ends"},
		{"cut before the last chunk", func(b []byte) []byte { return b[:last.storedOffset-1] }, "object shorter than the manifest's"},
		{"extended by a byte", func(b []byte) []byte { return append(b, 0) }, "goes on after its last chunk"},
	} {
		rewrite(t, fx.store, fx.keys.data(0), d.f)
		_, err := fetchAll(ctx, fx.s, &fx.c.m, last.rawOffset, -1)
		ce := requireCorrupt(t, err, fx.keys.data(0))
		require.Contains(t, ce.Reason, d.reason, d.name)
		got, err := fetchAll(ctx, fx.s, &fx.c.m, 0, 100)
		require.NoError(t, err, d.name)
		require.Equal(t, fx.c.src[:100], got)
		_, err = fx.s.CopySegment(ctx, &fx.c.m, fx.c.data) // restore
		require.NoError(t, err)
	}
	require.NoError(t, fx.store.Delete(ctx, fx.keys.data(0)))
	_, err := fetchAll(ctx, fx.s, &fx.c.m, 0, 100)
	require.ErrorIs(t, err, ErrSegmentDataNotFound)
	_, err = fx.s.CopySegment(ctx, &fx.c.m, fx.c.data) // restore
	require.NoError(t, err)
}

// caseIndexesObjectSize: an "indexes" object shorter or longer than the
// manifest says is corruption for the indexes it cuts and for the last
// one (read to the object's end); the indexes before a cut still read.
func (fx *corruptionFixture) caseIndexesObjectSize(t *testing.T) {
	ctx := context.Background()
	ts, _ := fx.man.index(IndexTimestamp)
	for _, d := range []struct {
		name   string
		f      func([]byte) []byte
		broken IndexType
	}{
		{"cut by a byte", func(b []byte) []byte { return b[:len(b)-1] }, IndexLeaderEpoch},
		{"cut inside the time index", func(b []byte) []byte { return b[:ts.offset+1] }, IndexTimestamp},
		{"cut before the time index", func(b []byte) []byte { return b[:ts.offset-1] }, IndexTimestamp},
		{"extended by a byte", func(b []byte) []byte { return append(b, '\n') }, IndexLeaderEpoch},
	} {
		rewrite(t, fx.store, fx.keys.indexes(), d.f)
		_, err := fx.s.FetchIndex(ctx, &fx.c.m, d.broken)
		ce := requireCorrupt(t, err, fx.keys.indexes())
		require.Contains(t, ce.Reason, "indexes object", d.name)
		if d.broken == IndexLeaderEpoch {
			_, err = fx.s.FetchLeaderEpochs(ctx, &fx.c.m)
			requireCorrupt(t, err, fx.keys.indexes())
		}
		if d.name != "cut before the time index" {
			got, err := fx.s.FetchIndex(ctx, &fx.c.m, IndexOffset)
			require.NoError(t, err, d.name)
			require.Equal(t, fx.c.data.OffsetIndex, got)
		}
		_, err = fx.s.CopySegment(ctx, &fx.c.m, fx.c.data) // restore
		require.NoError(t, err)
	}
}

// caseZstdFrameWithAValidChecksum: frames that pass their checksum but do
// not decompress to the raw length, including one that would inflate past it.
func (fx *corruptionFixture) caseZstdFrameWithAValidChecksum(t *testing.T) {
	ctx := context.Background()
	k := slices.IndexFunc(fx.man.chunks, func(ch manifestChunk) bool { return ch.codec == codecZstd })
	require.GreaterOrEqual(t, k, 0)
	ch := fx.man.chunks[k]
	for _, f := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)-5] ^= 0xff; return b }, // bad content
		func(b []byte) []byte { return append(make([]byte, 0, len(b)), b[:len(b)/2]...) },
	} {
		data, err := objstore.ReadAll(ctx, fx.store, fx.keys.data(0))
		require.NoError(t, err)
		stored := f(slices.Clone(data[ch.storedOffset:ch.storedEnd()]))
		// Keep the stored length: pad a shortened frame with zeros.
		stored = append(stored, make([]byte, ch.storedLen-int64(len(stored)))...)
		copy(data[ch.storedOffset:], stored)
		m2 := *fx.man
		m2.chunks = slices.Clone(fx.man.chunks)
		m2.chunks[k].crc = crc32c(stored)
		putBytes(t, fx.store, fx.keys.data(0), data)
		putBytes(t, fx.store, fx.keys.manifest(), encodeManifest(nil, &m2))
		_, err = fetchAll(ctx, fx.s, &fx.c.m, ch.rawOffset, 1)
		ce := requireCorrupt(t, err, fx.keys.data(0))
		require.Equal(t, ch.storedOffset, ce.Offset)
	}
	// A frame that inflates past the raw length is cut at it.
	big := fx.s.encoder.EncodeAll(make([]byte, 4*ch.rawLen), nil)
	require.Less(t, int64(len(big)), ch.storedLen, "a zero run compresses well")
	stored := append(big, make([]byte, ch.storedLen-int64(len(big)))...)
	data, err := objstore.ReadAll(ctx, fx.store, fx.keys.data(0))
	require.NoError(t, err)
	copy(data[ch.storedOffset:], stored)
	m2 := *fx.man
	m2.chunks = slices.Clone(fx.man.chunks)
	m2.chunks[k].crc = crc32c(stored)
	putBytes(t, fx.store, fx.keys.data(0), data)
	putBytes(t, fx.store, fx.keys.manifest(), encodeManifest(nil, &m2))
	_, err = fetchAll(ctx, fx.s, &fx.c.m, ch.rawOffset, 1)
	requireCorrupt(t, err, fx.keys.data(0))
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func putBytes(t *testing.T, store objstore.Store, key string, b []byte) {
	t.Helper()
	require.NoError(t, store.Put(context.Background(), key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
}

// TestStorageCorruptionErrorText pins the message format.
func TestStorageCorruptionErrorText(t *testing.T) {
	id := SegmentID{TopicIDPartition: TopicIDPartition{Topic: "t"}}
	err := &CorruptionError{SegmentID: id, Key: "k", Offset: 7, Reason: "bad"}
	require.Equal(t, "remote: corrupt segment data AAAAAAAAAAAAAAAAAAAAAA:t-0/AAAAAAAAAAAAAAAAAAAAAA: k@7: bad", err.Error())
	err.Offset = -1
	require.Equal(t, "remote: corrupt segment data AAAAAAAAAAAAAAAAAAAAAA:t-0/AAAAAAAAAAAAAAAAAAAAAA: k: bad", err.Error())
	require.True(t, errors.Is(err, ErrCorrupt) && errors.Is(err, ErrCorruption))
}

// TestChecksumReaderAtAnyOrder: whatever order and overlap the upload's
// reads come in (a multipart upload reads parts concurrently, and reads a
// part again on a retry), the chunk sums are those of the bytes, and only
// the bytes no read fed in order are read again.
func TestChecksumReaderAtAnyOrder(t *testing.T) {
	seed := testseed.Seed(t, 11)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 100 {
		size, chunk := int64(1+rng.IntN(5000)), int64(1+rng.IntN(700))
		bs := int64(rng.IntN(3)) * int64(1+rng.IntN(int(chunk))) // 0: no blocks
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		counted := &countingReaderAt{r: bytes.NewReader(src)}
		c := newChecksumReaderAt(counted, size, chunk, bs)
		for range rng.IntN(20) {
			off := rng.Int64N(size)
			p := make([]byte, 1+rng.Int64N(size-off))
			n, err := c.ReadAt(p, off)
			require.Equal(t, len(p), n)
			require.NoError(t, err)
		}
		read := counted.bytes.Load()
		reread, err := c.finish(context.Background())
		require.NoError(t, err)
		require.Equal(t, read+reread, counted.bytes.Load(), "round %d", round)
		for k, sum := range c.sums {
			lo := int64(k) * chunk
			hi := min(lo+chunk, size)
			require.Equal(t, crc32.Checksum(src[lo:hi], castagnoli), sum.crc, "round %d chunk %d", round, k)
		}
		if bs == 0 {
			require.Empty(t, c.blocks)
			continue
		}
		// Blocks: chunk by chunk, each chunk's from its start.
		var want []uint32
		for lo := int64(0); lo < size; lo += chunk {
			for b := lo; b < min(lo+chunk, size); b += bs {
				want = append(want, crc32.Checksum(src[b:min(b+bs, lo+chunk, size)], castagnoli))
			}
		}
		require.Equal(t, want, c.blocks, "round %d", round)
	}
	// Reads front to back leave nothing to read again.
	src := bytes.Repeat([]byte("tierlog"), 1000)
	c := newChecksumReaderAt(bytes.NewReader(src), int64(len(src)), 256, 100)
	_, err := io.Copy(io.Discard, io.NewSectionReader(c, 0, int64(len(src))))
	require.NoError(t, err)
	reread, err := c.finish(context.Background())
	require.NoError(t, err)
	require.Zero(t, reread)
}

// TestStorageFetchSmallReadDefaults: with the default options, a 16 KiB
// read at any position of an uncompressed segment fetches its blocks and
// their trailers only, at most twice the requested bytes plus two
// trailers: one ranged Get with the locator in the metadata, cold or warm;
// without it, one once the manifest is cached and two when cold (the
// manifest's, and the data's beside it).
func TestStorageFetchSmallReadDefaults(t *testing.T) {
	const size, batch = 4 << 20, 16 << 10
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 12), 0))
	store := &countingStore{Store: newMemStore()}
	c := newTestCopy(storageTopic, 4, 0, size, false)
	writer := newTestStorage(t, store, StorageOptions{})
	custom, err := writer.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)
	require.Len(t, custom, locatorLen)
	located := c.m
	located.CustomMetadata = custom
	manifestSize := int64(writer.cache.get(c.m.SegmentID).encodedLen())
	warm := newTestStorage(t, store, StorageOptions{})
	_, err = fetchAll(ctx, warm, &c.m, 0, 1) // caches the manifest
	require.NoError(t, err)
	for range 50 {
		start := rng.Int64N(size - batch + 1)
		for _, mode := range []string{"located", "cold", "warm"} {
			s, m := warm, &c.m
			switch mode {
			case "located":
				s, m = newTestStorage(t, store, StorageOptions{}), &located
			case "cold":
				s = newTestStorage(t, store, StorageOptions{})
			}
			gets0, bytes0 := store.gets.Load(), store.bytes.Load()
			got, err := fetchAll(ctx, s, m, start, batch)
			require.NoError(t, err)
			require.Equal(t, c.src[start:start+batch], got)
			gets, data := store.gets.Load()-gets0, store.bytes.Load()-bytes0
			switch mode {
			case "cold":
				require.EqualValues(t, 2, gets, "cold read at %d: the manifest and one ranged Get", start)
				data -= manifestSize
				if mt := s.Metrics(); start/(16<<10) < (size-1)/(16<<10)-1 { // not the last blocks
					require.EqualValues(t, 1, mt.SpeculativeServed, "cold read at %d: the data Get went beside the manifest's", start)
				}
			default:
				require.EqualValues(t, 1, gets, "%s read at %d: one ranged Get", mode, start)
			}
			require.LessOrEqual(t, data, int64((batch/(4<<10)+1)*(4<<10+trailerLen)), "read at %d (%s) fetched %d data bytes: five 4 KiB blocks at most, the default in layout 3", start, mode, data)
		}
	}
}

// orderedStore makes a manifest Get wait until a data Get has started,
// so a fetch that issues them one after the other would not finish; the
// wait is bounded, and says so, rather than hang the test.
type orderedStore struct {
	objstore.Store
	dataStarted chan struct{}
	once        sync.Once
	waitedOut   atomic.Bool
}

func (o *orderedStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	switch {
	case strings.HasSuffix(key, "/"+manifestObject):
		select {
		case <-o.dataStarted:
		case <-time.After(30 * time.Second): // a liveness guard, not a measurement
			o.waitedOut.Store(true)
		}
	case strings.Contains(key, "/data-"):
		o.once.Do(func() { close(o.dataStarted) })
	}
	return o.Store.Get(ctx, key, offset, length)
}

// TestStorageFetchColdReadOverlapsTheManifest: a cold 16 KiB read issues
// its data Get before the manifest's Get returns, and serves those bytes,
// verified; a layout the guess gets wrong (another block size) is read
// the usual way, with the guessed bytes dropped.
func TestStorageFetchColdReadOverlapsTheManifest(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore()
	c := newTestCopy(storageTopic, 4, 0, 1<<20, false)
	writer := newTestStorage(t, mem, StorageOptions{ChunkSize: 256 << 10})
	_, err := writer.CopySegment(ctx, &c.m, c.data)
	require.NoError(t, err)

	o := &orderedStore{Store: mem, dataStarted: make(chan struct{})}
	s := newTestStorage(t, o, StorageOptions{ChunkSize: 256 << 10})
	got, err := fetchAll(ctx, s, &c.m, 100_000, 16<<10)
	require.NoError(t, err)
	require.Equal(t, c.src[100_000:100_000+16<<10], got)
	require.False(t, o.waitedOut.Load(), "the manifest Get went first, alone")
	mt := s.Metrics()
	require.EqualValues(t, 1, mt.SpeculativeReads)
	require.EqualValues(t, 1, mt.SpeculativeServed)
	require.EqualValues(t, 2, mt.GetRequests)

	// A reader guessing 16 KiB blocks: its guess is dropped.
	other := newTestStorage(t, mem, StorageOptions{ChunkSize: 256 << 10, BlockSize: 16 << 10})
	got, err = fetchAll(ctx, other, &c.m, 100_000, 16<<10)
	require.NoError(t, err)
	require.Equal(t, c.src[100_000:100_000+16<<10], got)
	mt = other.Metrics()
	require.EqualValues(t, 1, mt.SpeculativeReads)
	require.Zero(t, mt.SpeculativeServed)
	require.EqualValues(t, 3, mt.GetRequests)

	// A speculative read's bytes are verified like any others.
	keys, err := s.keysFor(&c.m)
	require.NoError(t, err)
	b, err := objstore.ReadAll(ctx, mem, keys.data(0))
	require.NoError(t, err)
	b[100_010] ^= 1
	require.NoError(t, mem.Put(ctx, keys.data(0), bytes.NewReader(b), int64(len(b)), objstore.PutOptions{}))
	cold := newTestStorage(t, mem, StorageOptions{ChunkSize: 256 << 10})
	_, err = fetchAll(ctx, cold, &c.m, 100_000, 16<<10)
	require.ErrorIs(t, err, ErrCorrupt)
	require.EqualValues(t, 1, cold.Metrics().SpeculativeServed)
}

// putLog records the keys of the Puts that reach the store, failing those
// whose key contains fail.
type putLog struct {
	objstore.Store
	fail string
	mu   sync.Mutex
	keys []string
}

func (p *putLog) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	p.mu.Lock()
	p.keys = append(p.keys, key[strings.LastIndex(key, "/")+1:])
	p.mu.Unlock()
	if p.fail != "" && strings.Contains(key, p.fail) {
		return &objstore.OpError{Op: "put", Key: key, Err: errors.New("injected")}
	}
	return p.Store.Put(ctx, key, r, size, opts)
}

// TestStorageSequentialUploads: with SequentialUploads a copy puts its
// data, then its indexes, then its manifest, and a failed data Put
// leaves the indexes unsent, in every run (a deterministic harness's
// store faults then hit the same uploads every time).
func TestStorageSequentialUploads(t *testing.T) {
	ctx := context.Background()
	for range 20 {
		store := &putLog{Store: newMemStore()}
		s := newTestStorage(t, store, StorageOptions{ChunkSize: 4 << 10, SequentialUploads: true})
		c := newTestCopy(storageTopic, 4, 0, 10<<10, false)
		_, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		require.Equal(t, []string{"data-000000", "indexes", "manifest"}, store.keys)

		store = &putLog{Store: newMemStore(), fail: "/data-"}
		s = newTestStorage(t, store, StorageOptions{ChunkSize: 4 << 10, SequentialUploads: true})
		c = newTestCopy(storageTopic, 4, 0, 10<<10, false)
		_, err = s.CopySegment(ctx, &c.m, c.data)
		require.Error(t, err)
		require.Equal(t, []string{"data-000000"}, store.keys)
	}
}
