// Package s3test starts a real S3 server for tests: versitygw v1.8.0
// (Apache-2.0, pinned by the separate module internal/tools/versitygw)
// with its posix backend on a temporary directory, TLS on a free
// 127.0.0.1 port under a self-signed certificate, and fixed test
// credentials. Only tests import it.
//
// # Finding the binary
//
//  1. $TIERLOG_VERSITYGW, when set, names a prebuilt binary (.ci/run
//     builds one in its own step and sets it).
//  2. Otherwise the binary is built once per machine with `go build` in
//     internal/tools/versitygw into the user cache directory
//     (os.UserCacheDir, so $XDG_CACHE_HOME is respected):
//     <cache>/tierlog/versitygw-v1.8.0-<hash of go.mod and go.sum>/versitygw.
//     A cold build takes about two to three minutes, a cached one nothing.
//     Test processes that find it missing take a file lock (flock on
//     build.lock beside it, on Linux and macOS): one builds, the others
//     wait and use its binary. The build writes a temporary name and
//     renames it into place, so a build that dies leaves no binary.
//
// The build says what it builds and, when done, how long it took, on
// stderr and on the terminal: `go test ./...` shows a passing package's
// output only under -v, and minutes of silence look like a hang.
//
// # A server that cannot be had
//
// When the server cannot be built or started, the tests that need it
// fail: `go test ./...` must not print ok for tests that did not run.
// TIERLOG_SKIP_S3=1 makes them skip instead (a laptop without network);
// TIERLOG_REQUIRE_S3=1 (CI sets it) keeps them failing even then. Main
// closes the run with a summary of those tests and the reason, on stderr
// and on the terminal.
//
// # Sharing
//
// A package that calls Main from its TestMain shares one server among all
// its tests, started on first use and stopped when the tests end; each test
// takes a fresh bucket (NewBucketName). Without Main, Start starts a
// server per call and stops it at the test's cleanup.
package s3test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/testserver"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Version is the versitygw release internal/tools/versitygw pins.
const Version = "v1.8.0"

// Test credentials and region of every server this package starts.
const (
	AccessKeyID     = "tierlog-test-access"
	SecretAccessKey = "tierlog-test-secret-0123456789"
	Region          = "us-east-1"
)

// Environment variables read by this package.
const (
	// EnvBinary names a prebuilt versitygw binary to use instead of building one.
	EnvBinary = "TIERLOG_VERSITYGW"
	// EnvSkip, set to 1, skips the tests that need a server when none can
	// be built or started; without it they fail.
	EnvSkip = "TIERLOG_SKIP_S3"
	// EnvRequire, set to 1, makes those tests fail even under EnvSkip (CI
	// sets it, so a stray EnvSkip cannot turn its run green).
	EnvRequire = "TIERLOG_REQUIRE_S3"
)

const (
	buildTimeout = 10 * time.Minute
	readyTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	pkgPath      = "github.com/versity/versitygw/cmd/versitygw"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is host:port, for S3 clients.
	Endpoint string
	// URL is https://Endpoint.
	URL string
	// CertPEM is the server's self-signed certificate, and RootCAs a pool
	// holding it: clients trust the server through it.
	CertPEM []byte
	RootCAs *x509.CertPool
	// LogPath is the file the server's stdout and stderr go to.
	LogPath string
	// DataDir is the posix backend's root: bucket b's object "k" is the
	// file DataDir/b/k (tests corrupt objects through it).
	DataDir string

	proc *testserver.Process // owns the temporary directory: cert, key, data, log
}

// TLSConfig returns a client TLS configuration that trusts the server.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.RootCAs, MinVersion: tls.VersionTLS12}
}

var bucketSeq atomic.Uint64

// NewBucketName returns a bucket name no other call in this process
// returns: lowercase, 3 to 63 characters, valid for S3.
func NewBucketName(tb testing.TB) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("t%d-%s", bucketSeq.Add(1), hex.EncodeToString(r[:]))
}

// LogTail returns the last n bytes of the server's log.
func (s *Server) LogTail(n int64) string { return testserver.LogTail(s.LogPath, n) }

// CPUTime returns the CPU time the server process has used so far
// (testserver.Process.CPUTime).
func (s *Server) CPUTime() (time.Duration, error) { return s.proc.CPUTime() }

// Stop kills the server and waits for it to exit; it is idempotent.
func (s *Server) Stop() { s.proc.Stop(os.Kill, stopTimeout) }

// StartServer starts a server outside a test (the benchmarks module's
// compare command); the caller stops it with Stop. Tests use Start.
func StartServer(ctx context.Context) (*Server, error) { return start(ctx) }

// start finds or builds the binary and starts a server. Port races with
// other processes are retried.
func start(ctx context.Context) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		srv, err := startOnce(ctx, bin)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, bin string) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", "tierlog-s3test-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	certPEM, certFile, keyFile, err := writeCert(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return nil, err
	}
	port, err := testserver.FreePort()
	if err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "versitygw.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(bin,
		"--access", AccessKeyID, "--secret", SecretAccessKey, "--region", Region,
		"--port", endpoint, "--cert", certFile, "--key", keyFile,
		"--health", "/health",
		"posix", data)
	cmd.Env = serverEnv()
	cmd.SysProcAttr = procAttr()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := testserver.StartProcess(cmd, dir, logPath)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	srv := &Server{
		Endpoint: endpoint, URL: "https://" + endpoint,
		CertPEM: certPEM, RootCAs: pool, LogPath: logPath, DataDir: data, proc: proc,
	}
	if err := srv.waitReady(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// serverEnv is the test process's environment without the variables
// versitygw reads as flags (VGW_*, ROOT_*), so a developer's shell cannot
// change the server under test.
func serverEnv() []string { return testserver.EnvWithout("VGW_", "ROOT_") }

// waitReady polls the health endpoint over TLS until it answers 200.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: s.TLSConfig()},
		Timeout:   time.Second,
	}
	defer client.CloseIdleConnections()
	return s.proc.WaitReady(ctx, "versitygw", readyTimeout, func(context.Context) error {
		resp, err := client.Get(s.URL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	})
}

// writeCert writes a self-signed ECDSA P-256 certificate for 127.0.0.1
// and localhost, valid for a day, and its key.
func writeCert(dir string) (certPEM []byte, certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tierlog s3test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, "", "", err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, "", "", err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, "", "", err
	}
	return certPEM, certFile, keyFile, nil
}
