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
//     A cold build takes about three minutes, a cached one nothing.
//
// When the server cannot be built or started, tests fail if
// TIERLOG_REQUIRE_S3=1 (CI sets it) and are skipped otherwise (a laptop
// without network).
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
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
	// EnvRequire, set to 1, turns a server that cannot be built or started
	// into a test failure instead of a skip.
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

	dir     string // owned temporary directory: cert, key, data, log
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // set before exited is closed
	stopped atomic.Bool
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
func (s *Server) LogTail(n int64) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", s.LogPath, err)
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// Stop kills the server and waits for it to exit; it is idempotent.
func (s *Server) Stop() {
	if s.stopped.Swap(true) {
		return
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
		}
	}
	_ = os.RemoveAll(s.dir)
}

var shared struct {
	active bool // Main is running the tests
	once   sync.Once
	srv    *Server
	err    error
}

// Main runs the tests of a package that shares one server among them
// (call it from TestMain: os.Exit(s3test.Main(m))) and stops the server,
// if a test started it, once they are done.
func Main(m *testing.M) int {
	shared.active = true
	code := m.Run()
	if shared.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "versitygw log tail (%s):\n%s\n", shared.srv.LogPath, shared.srv.LogTail(8<<10))
		}
		shared.srv.Stop()
	}
	return code
}

// Start returns a running server: the package's shared one under Main,
// else a new one stopped at tb's cleanup. It skips tb (or fails it, under
// TIERLOG_REQUIRE_S3=1) when no server can be built or started.
func Start(tb testing.TB) *Server {
	tb.Helper()
	var srv *Server
	var err error
	if shared.active {
		shared.once.Do(func() { shared.srv, shared.err = start(context.Background()) })
		srv, err = shared.srv, shared.err
	} else {
		srv, err = start(context.Background())
		if srv != nil {
			tb.Cleanup(srv.Stop)
		}
	}
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("s3test: %v (%s=1: the S3 tests must run)", err, EnvRequire)
		}
		tb.Skipf("s3test: no S3 server: %v (set %s=1 to fail instead)", err, EnvRequire)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("versitygw log tail (%s):\n%s", srv.LogPath, srv.LogTail(4<<10))
		}
	})
	return srv
}

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

// Binary returns the path of a versitygw binary: $TIERLOG_VERSITYGW, or
// the cached build, building it first if missing.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return "", fmt.Errorf("%s=%s: not a file: %v", EnvBinary, p, err)
		}
		return p, nil
	}
	toolsDir, err := toolsModuleDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(toolsDir, f))
		if err != nil {
			return "", fmt.Errorf("tools module: %w", err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	dir := filepath.Join(cache, "tierlog", fmt.Sprintf("versitygw-%s-%x", Version, h.Sum(nil)[:6]))
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Build under a unique name and rename into place, so that concurrent
	// test processes never run a half-written binary.
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, pkgPath)
	cmd.Dir = toolsDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("building versitygw %s in %s (timeout %v): %v\n%s", Version, toolsDir, buildTimeout, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// toolsModuleDir finds internal/tools/versitygw from this file's path.
func toolsModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate internal/s3test source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "tools", "versitygw")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("tools module not found: %w", err)
	}
	return dir, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
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
	port, err := freePort()
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
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	srv := &Server{
		Endpoint: endpoint, URL: "https://" + endpoint,
		CertPEM: certPEM, RootCAs: pool, LogPath: logPath, DataDir: data,
		dir: dir, cmd: cmd, exited: make(chan struct{}),
	}
	go func() {
		srv.waitErr = cmd.Wait()
		close(srv.exited)
	}()
	if err := srv.waitReady(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// serverEnv is the test process's environment without the variables
// versitygw reads as flags (VGW_*, ROOT_*), so a developer's shell cannot
// change the server under test.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls the health endpoint over TLS until it answers 200.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: s.TLSConfig()},
		Timeout:   time.Second,
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited during startup (%v); log:\n%s", s.waitErr, s.LogTail(4<<10))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := client.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health: %s", resp.Status)
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("versitygw not ready after %v: %v; log:\n%s", readyTimeout, lastErr, s.LogTail(4<<10))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
