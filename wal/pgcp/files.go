package pgcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/wal"
)

func checkKey(key string) error {
	if key == "" || len(key) > wal.MaxObjectKeyLen {
		return fmt.Errorf("%w: pgcp: object key of %d bytes", wal.ErrInvalidArgument, len(key))
	}
	return nil
}

// ReserveObject implements wal.ControlPlane.
func (cp *ControlPlane) ReserveObject(ctx context.Context, key string) error {
	if err := cp.begin(ctx); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	return cp.update(ctx, func(tx pgx.Tx, nowMs int64) error {
		tag, err := tx.Exec(ctx, `INSERT INTO reservations (object_key, reserved_at)
			SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM files WHERE object_key = $1)
				AND NOT EXISTS (SELECT 1 FROM reaped_keys WHERE object_key = $1)
			ON CONFLICT DO NOTHING`, key, nowMs)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %q is already reserved, registered or reaped", wal.ErrObjectKeyReused, key)
		}
		return nil
	})
}

// ExpireReservations implements wal.ControlPlane. The expired keys become
// objects marked for deletion and tombstones in reaped_keys, which outlive
// the objects' rows: a late commit or reservation of such a key fails
// even after the cleaner deleted the object. A reservation a commit is
// confirming (locked by it) is skipped.
func (cp *ControlPlane) ExpireReservations(ctx context.Context, reservedBefore time.Time, limit int) ([]string, error) {
	var keys []string
	err := cp.update(ctx, func(tx pgx.Tx, nowMs int64) error {
		keys = nil
		var lim any
		if limit > 0 {
			lim = limit
		}
		rows, err := tx.Query(ctx, `WITH
			victims AS (SELECT object_key FROM reservations WHERE reserved_at < $1 ORDER BY reserved_at, object_key
				LIMIT $2 FOR UPDATE SKIP LOCKED),
			del AS (DELETE FROM reservations r USING victims v WHERE r.object_key = v.object_key RETURNING r.object_key),
			tomb AS (INSERT INTO reaped_keys (object_key, reaped_at) SELECT object_key, $3 FROM del ON CONFLICT DO NOTHING)
			INSERT INTO files (object_key, reason, state, committed_at, marked_for_deletion_at)
			SELECT object_key, $4, $5, $3, $3 FROM del ON CONFLICT (object_key) DO NOTHING RETURNING object_key`,
			reservedBefore.UnixMilli(), lim, nowMs, reasonOrphan, stateDeleting)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// IsSafeToDeleteObject implements wal.ControlPlane. It is asked after a
// commit whose outcome is unknown, whose transaction may still be open on
// the server (the client saw its connection fail before the server read
// the COMMIT). Such a transaction holds the key's reservation row locked
// (CommitFile deletes it first), so the answer first waits for that lock:
// the answer is then the outcome, not a guess made while the commit is in
// flight. A key committed without a reservation gets no such wait.
func (cp *ControlPlane) IsSafeToDeleteObject(ctx context.Context, key string) (bool, error) {
	safe := false
	err := cp.update(ctx, func(tx pgx.Tx, _ int64) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM reservations WHERE object_key = $1 FOR UPDATE`, key); err != nil {
			return err
		}
		var reason int16
		err := tx.QueryRow(ctx, `SELECT reason FROM files WHERE object_key = $1`, key).Scan(&reason)
		if errors.Is(err, pgx.ErrNoRows) {
			safe = true
			return nil
		}
		safe = reason == reasonOrphan
		return err
	})
	return safe, err
}

// FilesToDelete implements wal.ControlPlane.
func (cp *ControlPlane) FilesToDelete(ctx context.Context, markedBefore time.Time, limit int) ([]wal.FileToDelete, error) {
	out := []wal.FileToDelete{}
	err := cp.view(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		var lim any
		if limit > 0 {
			lim = limit
		}
		rows, err := tx.Query(ctx, `SELECT object_key, size, marked_for_deletion_at FROM files
			WHERE state = $1 AND marked_for_deletion_at < $2 ORDER BY marked_for_deletion_at, object_key LIMIT $3`,
			stateDeleting, markedBefore.UnixMilli(), lim)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f wal.FileToDelete
			var at int64
			if err := rows.Scan(&f.ObjectKey, &f.Size, &at); err != nil {
				return err
			}
			f.MarkedAt = time.UnixMilli(at)
			out = append(out, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteFiles implements wal.ControlPlane.
func (cp *ControlPlane) DeleteFiles(ctx context.Context, keys []string) error {
	if keys == nil {
		keys = []string{}
	}
	return cp.update(ctx, func(tx pgx.Tx, _ int64) error {
		_, err := tx.Exec(ctx, `DELETE FROM files WHERE object_key = ANY($1) AND state = $2
			AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.file_id = files.file_id)`, keys, stateDeleting)
		return err
	})
}
