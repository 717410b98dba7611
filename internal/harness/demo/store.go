package demo

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// StoreFlags selects the object store of a demo: the embedded default, a
// directory (objstore/fs), or an S3 endpoint.
type StoreFlags struct {
	Endpoint, Bucket, Region, CAFile, KeyPrefix string
	// RootCAs, when set, is trusted for the endpoint (tests).
	RootCAs *x509.CertPool
}

// Register adds -s3-endpoint, -s3-bucket, -s3-region, -s3-ca and
// -s3-prefix to fs. Credentials come from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY.
func (f *StoreFlags) Register(set *flag.FlagSet) {
	set.StringVar(&f.Endpoint, "s3-endpoint", "", "S3 endpoint (https://host:port); default: a directory store (objstore/fs)")
	set.StringVar(&f.Bucket, "s3-bucket", "", "S3 bucket (with -s3-endpoint)")
	set.StringVar(&f.Region, "s3-region", "", "S3 region (default $AWS_REGION or us-east-1)")
	set.StringVar(&f.CAFile, "s3-ca", "", "PEM file of a CA to trust for the endpoint")
	set.StringVar(&f.KeyPrefix, "s3-prefix", "", "key prefix in the bucket (default: a fresh one per run)")
}

// Open returns the store and a description of it. Without an endpoint the
// store is a directory under dir.
func (f *StoreFlags) Open(ctx context.Context, dir string) (objstore.Store, string, error) {
	if f.Endpoint == "" {
		root := filepath.Join(dir, "object-store")
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, "", err
		}
		s, err := fs.Open(root, fs.Options{})
		return s, "directory object store " + root, err
	}
	if f.Bucket == "" {
		return nil, "", fmt.Errorf("demo: -s3-endpoint needs -s3-bucket")
	}
	pool := f.RootCAs
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, "", err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("demo: no certificate in %s", f.CAFile)
		}
	}
	prefix := f.KeyPrefix
	if prefix == "" {
		prefix = fmt.Sprintf("tierlog-demo-%d/", time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := s3.Open(ctx, s3.Options{
		Endpoint: f.Endpoint, Bucket: f.Bucket, Region: f.Region, RootCAs: pool,
		KeyPrefix: prefix, PathSafeKeys: true, CreateBucket: true,
	})
	return s, fmt.Sprintf("S3 bucket %s at %s, prefix %s", f.Bucket, f.Endpoint, prefix), err
}

// Setup opens the store the flags select and a cluster over it, in dir or,
// when dir is "", in a new temporary directory. close releases everything
// (and removes the temporary directory); describe says what the store is.
func Setup(ctx context.Context, dir string, flags StoreFlags, out io.Writer) (c *Cluster, describe string, close func(), err error) {
	var cleanups []func()
	close = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	temporary := dir == ""
	if temporary {
		tmp, err := os.MkdirTemp("", "tierlog-demo-")
		if err != nil {
			return nil, "", nil, err
		}
		cleanups = append(cleanups, func() { _ = os.RemoveAll(tmp) })
		dir = tmp
	}
	store, describe, err := flags.Open(ctx, dir)
	if err != nil {
		return nil, "", nil, err
	}
	if temporary && flags.Endpoint == "" {
		// The path changes every run; the output should not.
		describe = "directory object store in a temporary directory"
	}
	cleanups = append(cleanups, func() { _ = store.Close() })
	c, err = NewCluster(dir, store, out)
	if err != nil {
		return nil, "", nil, err
	}
	cleanups = append(cleanups, func() { _ = c.Close() })
	return c, describe, close, nil
}
