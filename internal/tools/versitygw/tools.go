//go:build tools

// Package versitygw pins the versitygw S3 server (Apache-2.0) that
// internal/harness/s3test builds and starts for the S3 adapter's tests.
//
// This directory is its own module, so the root module never depends on
// versitygw: `go test ./...` and `go list ./...` in the root skip it. Build
// the binary with
//
//	cd internal/tools/versitygw && go build -o <dir>/versitygw github.com/versity/versitygw/cmd/versitygw
//
// (internal/harness/s3test does this once per machine and caches the result).
package versitygw

import _ "github.com/versity/versitygw/cmd/versitygw"
