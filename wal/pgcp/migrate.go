package pgcp

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// The migrations: migrations/NNNN_name.sql, applied in order, each in its
// own transaction together with its row in schema_migrations. Never edit
// an applied one: add the next.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("pgcp: migration file %q is not NNNN_name.sql", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgcp: migration %d is %q, want version %d", i+1, m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the newest schema version this code knows.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// migrationLock is the advisory lock key that serialises the migrations
// of concurrent Opens (brokers starting together).
const migrationLock = 0x7469_6572_6c6f_6701 // "tierlog" 01

// migrate applies the migrations the schema lacks, up to version upTo
// (the tests stop early to build a schema of an earlier version). Each
// runs in its own transaction holding the advisory lock, re-reading the
// applied version under it, so concurrent Opens apply each migration once.
func (cp *ControlPlane) migrate(ctx context.Context, schema string, upTo int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.version > upTo {
			break
		}
		applied := false
		err := cp.run(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, true, func(tx pgx.Tx, _ int64) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
				return err
			}
			if schema != "" {
				if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var have int
			if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
				return err
			}
			if have > len(ms) {
				return &SchemaVersionError{Found: have, Supported: len(ms)}
			}
			if have >= m.version {
				return nil
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("pgcp: migration %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return err
		}
		if applied {
			cp.logger.Info("pgcp: applied schema migration", zap.Int("version", m.version), zap.String("name", m.name))
		}
	}
	return nil
}
