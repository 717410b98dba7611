package remote

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// openS3ForStorage opens the S3 adapter on a fresh bucket of the shared
// versitygw server (failed without one, skipped under TIERLOG_SKIP_S3=1).
func openS3ForStorage(t *testing.T, srv *s3test.Server) (*s3.Store, s3.Options) {
	t.Helper()
	o := srv.StoreOptions(t)
	// Small parts, so that an uncompressed segment of a few MiB takes the
	// multipart path of objstore.PutLarge.
	o.MultipartThresholdBytes, o.PartBytes = 5<<20, 5<<20
	store := s3test.OpenStore(t, o)
	return store, o
}

// TestStorageCorruptionS3 runs the corruption cases (objects damaged,
// cut, extended or replaced) against a real S3 server.
func TestStorageCorruptionS3(t *testing.T) {
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%t", compression), func(t *testing.T) {
			testStorageCorruption(t, "s3", compression)
		})
	}
}

// TestStorageS3 runs the round trip, a corruption on the server's disk,
// orphan sweeping and deletion against a real S3 server.
func TestStorageS3(t *testing.T) {
	srv := s3test.Start(t)
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%t", compression), func(t *testing.T) {
			ctx := context.Background()
			store, o := openS3ForStorage(t, srv)
			opts := StorageOptions{KeyPrefix: "cluster-1/", ChunkSize: 1000, DataObjectBytes: 2500, Compression: compression, ChecksumsInManifest: true}
			s := newTestStorage(t, store, opts)
			c := newTestCopy(storageTopic, 21, 1200, 10_500, true)
			_, err := s.CopySegment(ctx, &c.m, c.data)
			require.NoError(t, err)
			checkFetches(t, s, &c.m, c.src)
			checkIndexes(t, s, c)
			cold := newTestStorage(t, store, opts)
			checkFetches(t, cold, &c.m, c.src)
			checkIndexes(t, cold, c)

			// Flip a byte of chunk 3 in the server's file: S3 has no
			// checksum for ranged reads, the chunk's CRC-32C catches it.
			keys, err := s.keysFor(&c.m)
			require.NoError(t, err)
			man := s.cache.get(c.m.SegmentID)
			ch := man.chunks[3]
			path := filepath.Join(srv.DataDir, o.Bucket, filepath.FromSlash(keys.data(ch.object))+"!")
			flipFileByte(t, path, ch.storedOffset+1)
			_, err = fetchAll(ctx, s, &c.m, ch.rawOffset, 10)
			requireCorrupt(t, err, keys.data(ch.object))
			got, err := fetchAll(ctx, s, &c.m, 0, 100)
			require.NoError(t, err)
			require.Equal(t, c.src[:100], got)
			flipFileByte(t, path, ch.storedOffset+1)

			// A crashed copy (no manifest) is swept; the copied segment is
			// kept; then DeleteSegment removes everything.
			crashed := newTestCopy(storageTopic, 22, 5000, 100, false)
			ckeys, err := s.keysFor(&crashed.m)
			require.NoError(t, err)
			putBytes(t, store, ckeys.data(0), crashed.src)
			deleted, err := s.DeleteOrphans(ctx, storageTopic, func(id SegmentID) bool { return id == c.m.SegmentID })
			require.NoError(t, err)
			require.Equal(t, []SegmentID{crashed.m.SegmentID}, deleted)
			checkFetches(t, s, &c.m, c.src)
			require.NoError(t, s.DeleteSegment(ctx, &c.m))
			require.NoError(t, s.DeleteSegment(ctx, &c.m))
			var left []string
			require.NoError(t, objstore.ListAll(ctx, store, "", func(oi objstore.ObjectInfo) error {
				left = append(left, oi.Key)
				return nil
			}))
			require.Empty(t, left)
		})
	}
	t.Run("framed", func(t *testing.T) {
		// Layout version 3 with the locator in the metadata: one ranged
		// Get per short read, no manifest; the block trailers catch a
		// byte flipped on the server's disk.
		ctx := context.Background()
		store, o := openS3ForStorage(t, srv)
		s := newTestStorage(t, store, StorageOptions{KeyPrefix: "cluster-1/"})
		c := newTestCopy(storageTopic, 24, 0, 300_000, true)
		custom, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		c.m.CustomMetadata = custom
		cold := newTestStorage(t, store, StorageOptions{KeyPrefix: "cluster-1/", ManifestCacheEntries: -1})
		checkFetches(t, cold, &c.m, c.src)
		checkIndexes(t, cold, c)
		gets0 := cold.Metrics().GetRequests
		got, err := fetchAll(ctx, cold, &c.m, 100_000, 16<<10)
		require.NoError(t, err)
		require.Equal(t, c.src[100_000:100_000+16<<10], got)
		mt := cold.Metrics()
		require.EqualValues(t, 1, mt.GetRequests-gets0)
		require.Zero(t, mt.ManifestMisses)

		keys, err := s.keysFor(&c.m)
		require.NoError(t, err)
		path := filepath.Join(srv.DataDir, o.Bucket, filepath.FromSlash(keys.data(0))+"!")
		at := int64(6*(defaultBlockSize+trailerLen) + 77) // block 6
		flipFileByte(t, path, at)
		_, err = fetchAll(ctx, cold, &c.m, 6*defaultBlockSize+100, 10)
		ce := requireCorrupt(t, err, keys.data(0))
		require.EqualValues(t, 6*(defaultBlockSize+trailerLen), ce.Offset)
		got, err = fetchAll(ctx, cold, &c.m, 0, 6*defaultBlockSize)
		require.NoError(t, err, "the blocks before it read")
		require.Equal(t, c.src[:6*defaultBlockSize], got)
		flipFileByte(t, path, at)
		got, err = fetchAll(ctx, cold, &c.m, 0, -1)
		require.NoError(t, err)
		require.True(t, bytes.Equal(c.src, got))
	})
	t.Run("multipart", func(t *testing.T) {
		if testing.Short() {
			t.Skip("12 MiB upload")
		}
		ctx := context.Background()
		store, _ := openS3ForStorage(t, srv)
		s := newTestStorage(t, store, StorageOptions{ChunkSize: 1 << 20})
		c := newTestCopy(storageTopic, 23, 0, 12<<20+123, false)
		custom, err := s.CopySegment(ctx, &c.m, c.data)
		require.NoError(t, err)
		// Layout version 3 through parallel parts that start inside
		// blocks: at most a block per part boundary is read twice.
		require.LessOrEqual(t, s.Metrics().ChecksumRereadBytes, int64(3*defaultBlockSize))
		c.m.CustomMetadata = custom
		n := int64(len(c.src))
		for _, r := range [][2]int64{{0, 10}, {5<<20 - 5, 10}, {(1 << 20) - 1, 2 << 20}, {n - 100, -1}} {
			got, err := fetchAll(ctx, s, &c.m, r[0], r[1])
			require.NoError(t, err)
			end := n
			if r[1] >= 0 {
				end = r[0] + r[1]
			}
			require.Equal(t, c.src[r[0]:end], got, "range %v", r)
		}
	})
}

func flipFileByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err, "the posix backend's file of the object (escaped name %s)", strings.TrimPrefix(path, os.TempDir()))
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}
