package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/objstoretest"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	objstoretest.RunConformance(t, func(t *testing.T) objstore.Store {
		return s3test.OpenStore(t, srv.StoreOptions(t))
	})
}

// rawClient is a minio-go client on the server, to look at S3 names.
func rawClient(t testing.TB, srv *s3test.Server) *minio.Client {
	t.Helper()
	tr, err := minio.DefaultTransport(true)
	require.NoError(t, err)
	tr.TLSClientConfig = srv.TLSConfig()
	c, err := minio.New(srv.Endpoint, &minio.Options{
		Creds:           credentials.NewStaticV4(s3test.AccessKeyID, s3test.SecretAccessKey, ""),
		Secure:          true,
		Transport:       tr,
		Region:          s3test.Region,
		BucketLookup:    minio.BucketLookupPath,
		TrailingHeaders: true,
	})
	require.NoError(t, err)
	return c
}

func rawNames(t *testing.T, c *minio.Client, bucket string) []string {
	t.Helper()
	var names []string
	for o := range c.ListObjectsIter(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, o.Err)
		names = append(names, o.Key)
	}
	return names
}

// TestKeyLayout checks the S3 names of a store with a key prefix, a salt
// and path-safe keys, and that listings across and within salts are
// complete and ordered under every page size.
func TestKeyLayout(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	o := srv.StoreOptions(t)
	o.KeyPrefix = "cluster-1/"
	o.SaltHexDigits = 1 // 16 salts: a listing without '/' in its prefix asks each
	s := s3test.OpenStore(t, o)

	var keys []string
	for p := range 5 {
		for i := range 7 {
			keys = append(keys, fmt.Sprintf("orders-%d/%020d.log", p, i), fmt.Sprintf("orders-%d/%020d.log/idx", p, i))
		}
		keys = append(keys, fmt.Sprintf("orders-%d", p), fmt.Sprintf("orders-%d/with space!", p))
	}
	keys = append(keys, "a", "a-b", "b")
	for _, k := range keys {
		require.NoError(t, s.Put(ctx, k, strings.NewReader(k), int64(len(k)), objstore.PutOptions{}))
	}

	// Names: prefix, salt of the first segment, escaped key, end mark.
	names := rawNames(t, rawClient(t, srv), o.Bucket)
	require.Len(t, names, len(keys))
	require.Contains(t, names, "cluster-1/"+salt("orders-3", 1)+"orders-3/with\"`space\"a!")
	require.Contains(t, names, "cluster-1/"+salt("orders-3", 1)+"orders-3!")
	require.Contains(t, names, "cluster-1/"+salt("orders-3", 1)+"orders-3/00000000000000000002.log/idx!")
	for _, n := range names {
		require.True(t, strings.HasPrefix(n, "cluster-1/"), n)
	}

	sorted := slices.Sorted(slices.Values(keys))
	for _, limit := range []int{0, 4, 1000} {
		var got []string
		after := ""
		for range 1000 {
			page, next, err := s.List(ctx, "", after, limit)
			require.NoError(t, err)
			for _, o := range page {
				got = append(got, o.Key)
			}
			if next == "" {
				break
			}
			after = next
		}
		require.Equal(t, sorted, got, "limit %d", limit)
	}
	var want []string
	for _, k := range sorted {
		if strings.HasPrefix(k, "orders-2/") {
			want = append(want, k)
		}
	}
	var got []string
	require.NoError(t, objstore.ListAll(ctx, s, "orders-2/", func(o objstore.ObjectInfo) error {
		got = append(got, o.Key)
		return nil
	}))
	require.Equal(t, want, got)

	// The longest key shrinks by the layout's overhead.
	// (Segments of 100 bytes: the posix backend's file names are at most 255.)
	long := strings.Repeat(strings.Repeat("k", 99)+"/", 10) + strings.Repeat("k", objstore.MaxKeyLen-len("cluster-1/")-2-1000)
	require.NoError(t, s.Put(ctx, long, strings.NewReader("x"), 1, objstore.PutOptions{}))
	err := s.Put(ctx, long+"k", strings.NewReader("x"), 1, objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	b, err := objstore.ReadAll(ctx, s, long)
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
}

func salt(first string, digits int) string {
	h := fnv.New64a()
	h.Write([]byte(first))
	return fmt.Sprintf("%016x", h.Sum64())[:digits] + "/"
}

// TestSecretsRedacted checks that neither String, %v, %#v nor an error
// shows the secret key.
func TestSecretsRedacted(t *testing.T) {
	srv := s3test.Start(t)
	o := srv.StoreOptions(t)
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(f, o)
		require.NotContains(t, out, s3test.SecretAccessKey, f)
		require.NotContains(t, out, s3test.AccessKeyID, f)
	}
	s := s3test.OpenStore(t, o)
	require.NotContains(t, s.String(), s3test.SecretAccessKey)
	require.NotContains(t, fmt.Sprintf("%v %+v", s, s), s3test.SecretAccessKey)

	// A wrong secret: the server refuses the signature; the error names
	// neither the secret nor the access key.
	bad := o
	bad.SecretAccessKey = "wrong-secret-" + s3test.SecretAccessKey
	bad.CreateBucket = false
	_, err := s3.Open(context.Background(), bad)
	require.Error(t, err)
	require.NotContains(t, err.Error(), bad.SecretAccessKey)
	require.NotContains(t, err.Error(), s3test.SecretAccessKey)

	// Errors of operations, too (a missing key, a precondition).
	ctx := context.Background()
	_, err = s.Stat(ctx, "missing")
	require.True(t, objstore.IsNotExist(err))
	require.NotContains(t, err.Error(), s3test.SecretAccessKey)
}

// TestEnvironmentCredentials opens a store with credentials and region
// from the standard AWS variables only.
func TestEnvironmentCredentials(t *testing.T) {
	srv := s3test.Start(t)
	o := srv.StoreOptions(t)
	o.AccessKeyID, o.SecretAccessKey, o.Region = "", "", ""
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretAccessKey)
	t.Setenv("AWS_REGION", s3test.Region)
	s := s3test.OpenStore(t, o)
	require.NoError(t, s.Put(context.Background(), "k", strings.NewReader("v"), 1, objstore.PutOptions{}))

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	_, err := s3.Open(context.Background(), o)
	require.ErrorIs(t, err, objstore.ErrInvalidArgument)
}

func TestOptionsValidation(t *testing.T) {
	base := s3.Options{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKeyID: "ak", SecretAccessKey: "sk"}
	for _, mod := range []func(*s3.Options){
		func(o *s3.Options) { o.Endpoint = "" },
		func(o *s3.Options) { o.Endpoint = "ftp://x" },
		func(o *s3.Options) { o.Bucket = "" },
		func(o *s3.Options) { o.PartBytes = 1 << 20 },
		func(o *s3.Options) { o.SaltHexDigits = 5 },
		func(o *s3.Options) { o.KeyPrefix = "/abs" },
		func(o *s3.Options) { o.Retry.MaxAttempts = -1 },
		func(o *s3.Options) { o.Retry = s3.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond} },
	} {
		o := base
		mod(&o)
		_, err := s3.Open(context.Background(), o)
		require.ErrorIs(t, err, objstore.ErrInvalidArgument, "%v", o)
	}
}

// TestChecksumMismatch corrupts an object on the server's disk: a whole
// read fails with ErrChecksum instead of returning the bytes.
func TestChecksumMismatch(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	o := srv.StoreOptions(t)
	s := s3test.OpenStore(t, o)
	data := bytes.Repeat([]byte("tierlog "), 4096)
	require.NoError(t, s.Put(ctx, "seg/1.log", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	got, err := objstore.ReadAll(ctx, s, "seg/1.log")
	require.NoError(t, err)
	require.Equal(t, data, got)

	// The posix backend stores the object as a file (name escaped).
	path := filepath.Join(srv.DataDir, o.Bucket, "seg", "1.log!")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("X"), 100)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, err = objstore.ReadAll(ctx, s, "seg/1.log")
	require.ErrorIs(t, err, s3.ErrChecksum)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
	// Ranged reads have no checksum to compare with (see the package comment).
	_, err = objstore.ReadRange(ctx, s, "seg/1.log", 0, 10)
	require.NoError(t, err)
}

// cancelingReaderAt cancels its context once a read passes after bytes.
type cancelingReaderAt struct {
	data   []byte
	after  int64
	cancel context.CancelFunc
}

func (c cancelingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > c.after {
		c.cancel()
	}
	return bytes.NewReader(c.data).ReadAt(p, off)
}

// TestPutMultipartSmallAndShort: a PutMultipart of one part is a single
// PUT, and a canceled one leaves no object (versitygw keeps a truncated
// object when a streaming-trailer upload is cut, so the adapter must not
// use one there); a ReaderAt shorter than the size is ErrShortRead.
func TestPutMultipartSmallAndShort(t *testing.T) {
	srv := s3test.Start(t)
	s := s3test.OpenStore(t, srv.StoreOptions(t))
	data := bytes.Repeat([]byte("p"), 4<<20)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.PutMultipart(ctx, "canceled", cancelingReaderAt{data: data, after: 256 << 10, cancel: cancel},
		int64(len(data)), objstore.MultipartOptions{PartBytes: 8 << 20})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Stat(context.Background(), "canceled")
	require.True(t, objstore.IsNotExist(err), "%v", err)

	err = s.PutMultipart(context.Background(), "short", bytes.NewReader(data[:1000]), int64(len(data)), objstore.MultipartOptions{})
	require.ErrorIs(t, err, objstore.ErrShortRead)
	_, err = s.Stat(context.Background(), "short")
	require.True(t, objstore.IsNotExist(err), "%v", err)

	require.NoError(t, s.PutMultipart(context.Background(), "small", bytes.NewReader(data), int64(len(data)), objstore.MultipartOptions{}))
	got, err := objstore.ReadAll(context.Background(), s, "small")
	require.NoError(t, err)
	require.Equal(t, data, got)
}
