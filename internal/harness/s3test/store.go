package s3test

import (
	"context"
	"testing"
	"time"

	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// StoreOptions returns the S3 adapter's options for a fresh bucket on srv:
// the server's credentials and CA, a 10 s request timeout, quick retries,
// path-safe keys (versitygw's posix backend stores objects as files) and
// bucket creation. Tests change what they need before OpenStore.
func (srv *Server) StoreOptions(tb testing.TB) s3.Options {
	return s3.Options{
		Endpoint:        srv.URL,
		Bucket:          NewBucketName(tb),
		Region:          Region,
		AccessKeyID:     AccessKeyID,
		SecretAccessKey: SecretAccessKey,
		RootCAs:         srv.RootCAs,
		RequestTimeout:  10 * time.Second,
		Retry:           s3.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		PathSafeKeys:    true,
		CreateBucket:    true,
	}
}

// OpenStore opens the adapter with o (within 30 s) and closes it at tb's
// cleanup.
func OpenStore(tb testing.TB, o s3.Options) *s3.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := s3.Open(ctx, o)
	if err != nil {
		tb.Fatalf("s3test: open %s: %v", o.Bucket, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
