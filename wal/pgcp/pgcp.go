// Package pgcp is the wal.ControlPlane on PostgreSQL: the control plane
// that several brokers share. It is the only package that imports the
// driver (github.com/jackc/pgx/v5).
//
// # Model
//
// The schema (migrations/*.sql, applied at Open) has one row per
// partition (logs), per object (files), per run of accepted batches
// (batches: contiguous batches of one partition in one object committed
// together are one row, wal.JoinRun, split batch by batch by every read,
// wal.SplitRun; a removal whose boundary falls inside a run first cuts
// it in two rows, cutRunAt), per producer of a partition
// (producer_state), per reserved key (reservations) and per reaped key
// (reaped_keys). Every mutating call is
// one transaction at READ COMMITTED whose statements are built here (no
// stored functions); the decisions (sequence checks, retention, prune's W)
// are the pure rules of package wal that the embedded plane uses too, so
// the two planes cannot drift apart, except the prune's W, which one SQL
// statement computes (and a test holds equal to wal.PrunedLogStart).
//
// # Locking
//
// A call that changes partitions first locks their logs rows, FOR
// UPDATE, in (topic_id, partition) order, in one statement: two calls
// over the same partitions wait for each other instead of deadlocking,
// and a commit reads each high watermark under its lock and writes it
// back once. A call that deletes batches then locks the files rows those
// batches were in (FOR NO KEY UPDATE, in file_id order) before it checks
// whether they still hold a batch, so that two calls emptying one object
// from two partitions cannot both see the other's batch and leave the
// object unmarked (github.com/aiven/inkless/pull/782). Lock order:
// reservations -> logs -> files.
//
// # Group commit
//
// A commit holds its partitions' rows locked until its COMMIT is flushed,
// so commits of one partition run one after the other, each paying its
// round trips and its log flush. CommitFile calls of one ControlPlane
// that arrive while a commit is being written therefore wait in a queue
// (package internal/groupcommit) and go as one group: one transaction
// (commitGroupTx) that registers their objects in key order, locks the
// union of their partitions once, decides the calls in arrival order,
// each on the rows as the calls before it left them, and commits them
// with one COMMIT: the commit point of every call of the group. A call
// that fails alone (an offset overflow) is undone within the
// transaction; a key already registered is answered from its row; a
// failed transaction fails every call of the group, none of which is
// then visible. A CommitFiles call is one entry of the queue: its
// requests are calls of one group, decided in list order (a writer
// hands over the objects it uploaded during its previous commit that
// way). Brokers with their own ControlPlane still take turns on
// shared partitions, one group each.
//
// # Failures
//
// A call failing with a serialization failure (40001) or a deadlock
// (40P01), or whose BEGIN never reached the server, is retried (at most
// Options.MaxAttempts). A connection lost after a statement was sent is
// not: the outcome is unknown (ErrOutcomeUnknown), and for CommitFile
// the object key resolves it (a retry answers as the first commit did).
package pgcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/groupcommit"
	"github.com/tierlog/tierlog/wal"
)

// Options configures a ControlPlane. The zero value connects as the
// standard PG* environment variables say (PGHOST, PGUSER, PGPASSWORD,
// PGSSLMODE, ...), as libpq does.
type Options struct {
	// ConnString is a postgres:// URL or a key=value string; what it
	// leaves out comes from the PG* environment. Default "".
	ConnString string
	// User and Password, when set, override the connection string's.
	User     string
	Password string
	// TLS, when set, overrides the connection string's sslmode: the
	// connection uses this configuration (and no plaintext fallback).
	TLS *tls.Config
	// Schema holds the tables; it is created if missing. Default: the
	// connection's own search_path (normally "public"). Several clusters
	// may share a database under different schemas.
	Schema string
	// MaxConns bounds the pool. Default 8 (Inkless:
	// control.plane.max.connections is 10).
	MaxConns int32
	// ConnectTimeout bounds establishing one connection. Default 10 s.
	// Every call is otherwise bounded by its context.
	ConnectTimeout time.Duration
	// MaxAttempts bounds the attempts of a transaction that fails with a
	// serialization failure or a deadlock. Default 5.
	MaxAttempts int
	// Now is the clock of commit times, deletion marks and reservations.
	// Default time.Now.
	Now func() time.Time
	// Logger receives retries and migrations. Default zap.NewNop().
	Logger *zap.Logger
}

// Errors of this package (the others are wal's).
var (
	// ErrUnreachable: no connection to the server could be made.
	ErrUnreachable = errors.New("pgcp: server unreachable")
	// ErrSchemaTooNew: the database holds a schema version this code
	// does not know (a newer release migrated it).
	ErrSchemaTooNew = errors.New("pgcp: schema newer than this code")
	// ErrOutcomeUnknown: the connection failed after a mutating call's
	// statements were sent; it may or may not have been applied.
	ErrOutcomeUnknown = errors.New("pgcp: outcome unknown (connection lost)")
)

// SchemaVersionError reports the versions when the schema is too new.
type SchemaVersionError struct {
	Found, Supported int
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("%v: version %d, this code knows up to %d", ErrSchemaTooNew, e.Found, e.Supported)
}

func (e *SchemaVersionError) Unwrap() error { return ErrSchemaTooNew }

// ControlPlane is the wal.ControlPlane on PostgreSQL.
type ControlPlane struct {
	pool        *pgxpool.Pool
	now         func() time.Time
	logger      *zap.Logger
	maxAttempts int
	password    string // for redaction only
	closed      atomic.Bool
	metrics     counters
	// commits is the CommitFile queue (commit.go).
	commits groupcommit.Queue[[]*commitCall]
}

var _ wal.ControlPlane = (*ControlPlane)(nil)

// Open connects, applies the migrations the database lacks and returns
// the control plane. An unreachable server is ErrUnreachable, a schema
// newer than this code ErrSchemaTooNew. Errors never carry the password.
func Open(ctx context.Context, opts Options) (*ControlPlane, error) {
	return open(ctx, opts, SchemaVersion())
}

// open is Open migrating the schema up to version schemaVersion.
func open(ctx context.Context, opts Options, schemaVersion int) (*ControlPlane, error) {
	cfg, err := pgxpool.ParseConfig(opts.ConnString)
	if err != nil {
		// pgconn redacts the password in its parse errors; the rest of
		// the string may still carry one, so say nothing of it.
		return nil, fmt.Errorf("%w: pgcp: connection string: %v", wal.ErrInvalidArgument, redact(err.Error(), opts.Password))
	}
	if opts.User != "" {
		cfg.ConnConfig.User = opts.User
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	if opts.TLS != nil {
		cfg.ConnConfig.TLSConfig = opts.TLS.Clone()
		if cfg.ConnConfig.TLSConfig.ServerName == "" {
			cfg.ConnConfig.TLSConfig.ServerName = cfg.ConnConfig.Host
		}
		cfg.ConnConfig.Fallbacks = nil
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 8
	}
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "tierlog-pgcp"
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	cp := &ControlPlane{now: opts.Now, logger: opts.Logger, maxAttempts: opts.MaxAttempts, password: cfg.ConnConfig.Password}
	if cp.now == nil {
		cp.now = time.Now
	}
	if cp.logger == nil {
		cp.logger = zap.NewNop()
	}
	if cp.maxAttempts <= 0 {
		cp.maxAttempts = 5
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgcp: %s", cp.redact(err.Error()))
	}
	cp.pool = pool
	if err := cp.migrate(ctx, opts.Schema, schemaVersion); err != nil {
		pool.Close()
		return nil, err
	}
	return cp, nil
}

// Close closes the pool. Everything acknowledged is already durable.
func (cp *ControlPlane) Close() error {
	if cp.closed.Swap(true) {
		return wal.ErrClosed
	}
	cp.pool.Close()
	return nil
}

func (cp *ControlPlane) redact(s string) string { return redact(s, cp.password) }

func redact(s, password string) string {
	if password == "" {
		return s
	}
	return strings.ReplaceAll(s, password, "xxxxx")
}

// errRetry asks tx to run the transaction again (a row appeared between
// a read and an insert).
var errRetry = errors.New("pgcp: retry")

// begin checks the plane is open and the context live.
func (cp *ControlPlane) begin(ctx context.Context) error {
	if cp.closed.Load() {
		return wal.ErrClosed
	}
	return ctx.Err()
}

// update runs fn in a READ COMMITTED transaction and commits it, retrying
// on serialization failures and deadlocks.
func (cp *ControlPlane) update(ctx context.Context, fn func(tx pgx.Tx, nowMs int64) error) error {
	return cp.run(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, true, fn)
}

// view runs fn in a REPEATABLE READ, READ ONLY transaction: one
// consistent snapshot of every partition the call reads.
func (cp *ControlPlane) view(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return cp.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false,
		func(tx pgx.Tx, _ int64) error { return fn(tx) })
}

func (cp *ControlPlane) run(ctx context.Context, opts pgx.TxOptions, mutating bool, fn func(tx pgx.Tx, nowMs int64) error) error {
	return cp.retry(ctx, mutating, func() error { return cp.attempt(ctx, opts, fn) })
}

// retry runs once until it succeeds or fails for good: it tries again on
// a serialization failure, a deadlock, errRetry or a request that never
// left (at most Options.MaxAttempts), and classifies the final error.
func (cp *ControlPlane) retry(ctx context.Context, mutating bool, once func() error) error {
	if err := cp.begin(ctx); err != nil {
		return err
	}
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := once()
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= cp.maxAttempts || ctx.Err() != nil {
			err = cp.classify(ctx, err, mutating)
			if errors.Is(err, ErrOutcomeUnknown) {
				cp.metrics.outcomeUnknown.Add(1)
			}
			return err
		}
		cp.metrics.retries.Add(1)
		cp.logger.Debug("pgcp: retrying a transaction", zap.Int("attempt", attempt), zap.String("error", cp.redact(err.Error())))
		sleep := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (cp *ControlPlane) attempt(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx, nowMs int64) error) error {
	tx, err := cp.pool.BeginTx(ctx, opts)
	if err != nil {
		return &stageError{err: err, began: false}
	}
	if err := fn(tx, cp.now().UnixMilli()); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return &stageError{err: err, began: true}
	}
	if err := tx.Commit(ctx); err != nil {
		return &stageError{err: err, began: true}
	}
	return nil
}

// stageError records whether the transaction had begun when err struck:
// after BEGIN, a connection failure leaves the outcome to the server
// (pgx may report even a failure around a COMMIT it wrote as "conn
// closed", which it calls safe to retry), so only BEGIN's own failures
// are retried.
type stageError struct {
	err   error
	began bool
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// retryable: a serialization failure or deadlock (the server rolled the
// transaction back), errRetry, or a BEGIN that never reached the server.
func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false // a server that refuses or does not answer: say so now
	}
	if began(err) {
		return false
	}
	return pgconn.SafeToRetry(err)
}

// classify turns a failed call's error into the one callers see: typed
// errors of wal pass unchanged; a server error keeps its SQLSTATE; a
// connection failure is ErrUnreachable if nothing was sent, else (for a
// mutating call) ErrOutcomeUnknown.
func (cp *ControlPlane) classify(ctx context.Context, err error, mutating bool) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("%w: %s", ErrUnreachable, cp.redact(err.Error()))
	case ctx.Err() != nil && !errors.As(err, &pe):
		return fmt.Errorf("pgcp: %w (%s)", ctx.Err(), cp.redact(err.Error()))
	case isWalError(err):
		return err
	case errors.As(err, &pe):
		return fmt.Errorf("pgcp: server error %s: %s", pe.Code, cp.redact(pe.Message))
	case mutating && began(err):
		return fmt.Errorf("%w: %s", ErrOutcomeUnknown, cp.redact(err.Error()))
	case pgconn.SafeToRetry(err):
		return fmt.Errorf("%w: %s", ErrUnreachable, cp.redact(err.Error()))
	case mutating:
		return fmt.Errorf("%w: %s", ErrOutcomeUnknown, cp.redact(err.Error()))
	default:
		return fmt.Errorf("pgcp: %s", cp.redact(err.Error()))
	}
}

func began(err error) bool {
	var se *stageError
	return errors.As(err, &se) && se.began
}

func isWalError(err error) bool {
	for _, e := range []error{wal.ErrInvalidArgument, wal.ErrObjectKeyReused, wal.ErrUnknownTopicOrPartition,
		wal.ErrClosed, wal.ErrCorruption, ErrSchemaTooNew} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
