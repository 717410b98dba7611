// Package pgtest gives tests a real PostgreSQL server: either one it
// starts itself (initdb in a temporary directory, the server on a free
// 127.0.0.1 port) or an existing one named by TIERLOG_POSTGRES_URL. Each
// caller of NewDatabase gets a database of its own. Only tests import it.
//
// # Finding the binaries
//
//  1. $TIERLOG_PG_BIN, when set, is the directory holding initdb and
//     postgres.
//  2. Otherwise the highest version under /usr/lib/postgresql/*/bin
//     (Debian's layout), then initdb on $PATH.
//
// PostgreSQL refuses to run as root. A test process running as root
// (containers, CI) runs initdb and the server as the "postgres" user (the
// Debian package creates it) and hands it the cluster directory; as any
// other user it runs them as itself.
//
// # The local cluster
//
// initdb creates a superuser "tierlog" with a password (SCRAM over TCP,
// so the tests exercise credentials) and the server listens on 127.0.0.1
// only, its Unix socket in the cluster directory. fsync is off (unless
// TIERLOG_PG_FSYNC=1): the server's durability across power loss is not
// what the tests test, and on a shared machine the fsyncs would dominate
// their time. The server
// gets SIGKILL when the test process dies (Pdeathsig), and Stop shuts it
// down fast and removes the directory.
//
// # A server that cannot be had
//
// As with internal/harness/s3test, a test that needs a server and gets none
// fails: `go test ./...` must not print ok for tests that did not run.
// TIERLOG_SKIP_POSTGRES=1 makes them skip instead; TIERLOG_REQUIRE_POSTGRES=1
// (CI sets it) keeps them failing even then. Main closes the run with a
// summary of those tests and the reason.
//
// # Sharing
//
// A package that calls Main from its TestMain shares one server among all
// its tests, started on first use and stopped when the tests end. Without
// Main, Start starts a server per call and stops it at the test's
// cleanup.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/testserver"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Environment variables read by this package.
const (
	// EnvURL names an existing server (a postgres:// URL of a role that
	// may create databases) to use instead of starting one.
	EnvURL = "TIERLOG_POSTGRES_URL"
	// EnvBin names the directory of initdb and postgres.
	EnvBin = "TIERLOG_PG_BIN"
	// EnvSkip, set to 1, skips the tests that need a server when none can
	// be had; without it they fail.
	EnvSkip = "TIERLOG_SKIP_POSTGRES"
	// EnvRequire, set to 1, makes those tests fail even under EnvSkip.
	EnvRequire = "TIERLOG_REQUIRE_POSTGRES"
	// EnvFsync, set to 1, starts the local cluster with fsync on (for
	// benchmarks that should pay for durability).
	EnvFsync = "TIERLOG_PG_FSYNC"
)

// Credentials of the superuser of every cluster this package starts.
const (
	User     = "tierlog"
	Password = "tierlog-test-password-5f2c"
)

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
	// serverUser runs initdb and the server when the tests run as root.
	serverUser = "postgres"
)

// Server is a PostgreSQL server for tests.
type Server struct {
	// URL is a postgres:// URL of the maintenance database ("postgres")
	// as the superuser (or the role of EnvURL).
	URL string
	// Host and Port are where the server listens.
	Host string
	Port int
	// LogPath is the server's log (empty for an existing server).
	LogPath string
	// BinDir holds the server's binaries (empty for an existing server).
	BinDir string

	external bool
	proc     *testserver.Process // a local cluster; owns its temporary directory
}

// External reports whether the server came from EnvURL.
func (s *Server) External() bool { return s.external }

var dbSeq atomic.Uint64

// NewDatabase creates an empty database no other call returns and
// returns its URL. On an existing server (EnvURL) the database is
// dropped at tb's cleanup; a local cluster goes away whole at Stop.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name, err := s.createDatabase()
	if err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	if s.external {
		tb.Cleanup(func() {
			if err := s.dropDatabase(name); err != nil {
				tb.Logf("pgtest: drop database %s: %v", name, err)
			}
		})
	}
	return WithDatabase(s.URL, name)
}

func (s *Server) createDatabase() (string, error) {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := fmt.Sprintf("tierlog_t%d_%s", dbSeq.Add(1), hex.EncodeToString(r[:]))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return name, s.Exec(ctx, "CREATE DATABASE "+name)
}

func (s *Server) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// WithDatabase returns rawURL with its database replaced by name.
func WithDatabase(rawURL, name string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs one statement on the maintenance database.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := pgconn.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Exec(ctx, sql).Close()
}

// LogTail returns the last n bytes of the server's log.
func (s *Server) LogTail(n int64) string {
	if s.LogPath == "" {
		return "(an existing server: no log)"
	}
	return testserver.LogTail(s.LogPath, n)
}

// Stop shuts a local server down (a fast shutdown, then SIGKILL) and
// removes its directory; it is idempotent and does nothing to an
// existing server.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(syscall.SIGINT, stopTimeout) // SIGINT: PostgreSQL's fast shutdown
	}
}

// StartServer starts a server outside a test (the benchmarks' compare
// command, -pg-test-server): the server of EnvURL or a new local cluster
// (fsync as EnvFsync says). The caller stops it.
func StartServer(ctx context.Context) (*Server, error) { return start(ctx) }

// CreateDatabase creates an empty database no other call returns and
// returns its URL (NewDatabase outside a test; on an existing server the
// caller drops it).
func (s *Server) CreateDatabase() (string, error) {
	name, err := s.createDatabase()
	if err != nil {
		return "", err
	}
	return WithDatabase(s.URL, name), nil
}

// start returns the server of EnvURL or a new local one.
func start(ctx context.Context) (*Server, error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		return external(ctx, raw)
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a port taken between FreePort and the server's bind
		srv, err := startLocal(ctx, bin)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func external(ctx context.Context, raw string) (*Server, error) {
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	srv := &Server{URL: raw, Host: cfg.Host, Port: int(cfg.Port), external: true}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Exec(cctx, "SELECT 1"); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	return srv, nil
}

// BinDir finds the directory of initdb and postgres.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBin); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%s=%s: no initdb: %w", EnvBin, d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL binaries: no initdb under /usr/lib/postgresql/*/bin or on PATH " +
		"(install the Debian package postgresql, set " + EnvBin + " to their directory, or " + EnvURL + " to a server)")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// credential returns the user the server runs as: "postgres" when the
// tests run as root, else nil (the current user).
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root, PostgreSQL needs another user and %q is missing: %w", serverUser, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, 0, 0, fmt.Errorf("user %q has uid %q gid %q", serverUser, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

func startLocal(ctx context.Context, bin string) (_ *Server, err error) {
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	base := os.TempDir()
	if cred != nil && !traversable(base) {
		base = "/tmp" // the server's user must reach the cluster directory
	}
	dir, err := os.MkdirTemp(base, "tierlog-pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	pwFile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pwFile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, fmt.Errorf("handing %s to %s: %w", p, serverUser, err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the children have their own descriptors

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", User, "--pwfile="+pwFile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	initdb.Stdout, initdb.Stderr = logFile, logFile
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("initdb: %w; log:\n%s", err, testserver.LogTail(logPath, 4<<10))
	}

	port, err := testserver.FreePort()
	if err != nil {
		return nil, err
	}
	durable := "off"
	if os.Getenv(EnvFsync) == "1" {
		durable = "on"
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+dir, "-c", "fsync="+durable, "-c", "full_page_writes="+durable,
		"-c", "max_connections=200", "-c", "shared_buffers=64MB")
	cmd.Dir = dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := testserver.StartProcess(cmd, dir, logPath)
	if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	srv := &Server{URL: u.String(), Host: "127.0.0.1", Port: port, LogPath: logPath, BinDir: bin,
		proc: proc}
	if err := srv.waitReady(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// serverEnv is the environment without the PG* variables, so that a
// developer's shell cannot change the cluster under test.
func serverEnv() []string { return append(testserver.EnvWithout("PG"), "LC_ALL=C") }

// waitReady connects until the server answers.
func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, "postgres", readyTimeout, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return s.Exec(cctx, "SELECT 1")
	})
}

// traversable reports whether every directory from / to dir lets other
// users through (o+x).
func traversable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}
