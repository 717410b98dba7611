package pebblecp

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierlog/tierlog/wal"
)

func checkKey(key string) error {
	if key == "" || len(key) > wal.MaxObjectKeyLen {
		return fmt.Errorf("%w: pebblecp: object key of %d bytes", wal.ErrInvalidArgument, len(key))
	}
	return nil
}

// ReserveObject implements wal.ControlPlane.
func (cp *ControlPlane) ReserveObject(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	return cp.update(ctx, func(tx *txn) error {
		f, err := tx.file(key)
		if err != nil {
			return err
		}
		reserved, err := get(tx.b, reservationKey(key), func([]byte) error { return nil })
		if err != nil {
			return err
		}
		reaped, err := get(tx.b, tombstoneKey(key), func([]byte) error { return nil })
		if err != nil {
			return err
		}
		if f.found || reserved || reaped {
			return fmt.Errorf("%w: %q is already reserved, registered or reaped", wal.ErrObjectKeyReused, key)
		}
		return tx.b.Set(reservationKey(key), encodeReservation(tx.nowMs), nil)
	})
}

// ExpireReservations implements wal.ControlPlane.
func (cp *ControlPlane) ExpireReservations(ctx context.Context, reservedBefore time.Time, limit int) ([]string, error) {
	var keys []string
	err := cp.update(ctx, func(tx *txn) error {
		keys = keys[:0]
		before := millis(reservedBefore)
		it, err := tx.b.NewIter(&pebble.IterOptions{LowerBound: []byte{tagReservation}, UpperBound: []byte{tagReservation + 1}})
		if err != nil {
			return err
		}
		for ok := it.First(); ok && (limit <= 0 || len(keys) < limit); ok = it.Next() {
			at, err := decodeReservation(it.Key(), it.Value())
			if err != nil {
				_ = it.Close()
				return err
			}
			if at < before {
				keys = append(keys, string(it.Key()[1:]))
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, k := range keys {
			// The orphan becomes an object marked for deletion: the
			// cleaner deletes it after the grace period, and a late
			// CommitFile of the key fails (ErrObjectReaped), now and
			// after DeleteFiles (which leaves a tombstone).
			f, err := tx.file(k)
			if err != nil {
				return err
			}
			f.found, f.dirty = true, true
			f.row = fileRow{State: fileDeleting, Reason: reasonOrphan, CommittedAt: tx.nowMs, MarkedAt: tx.nowMs}
			if err := tx.b.Delete(reservationKey(k), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// IsSafeToDeleteObject implements wal.ControlPlane.
func (cp *ControlPlane) IsSafeToDeleteObject(ctx context.Context, key string) (bool, error) {
	safe := false
	err := cp.viewKey(ctx, func(r pebble.Reader) error {
		row, found, err := readFile(r, key)
		safe = !found || row.Reason == reasonOrphan
		return err
	})
	return safe, err
}

// FilesToDelete implements wal.ControlPlane.
func (cp *ControlPlane) FilesToDelete(ctx context.Context, markedBefore time.Time, limit int) ([]wal.FileToDelete, error) {
	var out []wal.FileToDelete
	err := cp.view(ctx, func(r pebble.Reader) error {
		upper := binary.BigEndian.AppendUint64([]byte{tagDeleteQueue}, uint64(millis(markedBefore)))
		if millis(markedBefore) < 0 {
			return nil
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{tagDeleteQueue}, UpperBound: upper})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
			k := it.Key()
			if len(k) < 10 {
				return &CorruptionError{Key: append([]byte(nil), k...), Reason: "short deletion-queue key"}
			}
			objectKey := string(k[9:])
			row, found, err := readFile(r, objectKey)
			if err != nil {
				return err
			}
			if !found || row.State != fileDeleting {
				return &CorruptionError{Key: append([]byte(nil), k...), Reason: "queued for deletion but not marked"}
			}
			out = append(out, wal.FileToDelete{ObjectKey: objectKey, Size: row.Size, MarkedAt: time.UnixMilli(row.MarkedAt)})
		}
		return nil
	})
	return out, err
}

// DeleteFiles implements wal.ControlPlane.
func (cp *ControlPlane) DeleteFiles(ctx context.Context, keys []string) error {
	return cp.update(ctx, func(tx *txn) error {
		for _, k := range keys {
			f, err := tx.file(k)
			if err != nil {
				return err
			}
			if !f.found || f.row.State != fileDeleting {
				continue
			}
			if err := tx.b.Delete(deleteQueueKey(f.row.MarkedAt, k), nil); err != nil {
				return err
			}
			if err := tx.b.Delete(fileKey(k), nil); err != nil {
				return err
			}
			if f.row.Reason == reasonOrphan {
				// A writer that reserved the key may still be uploading
				// it: the tombstone keeps its commit failing for ever.
				// One small row per reaped orphan, kept for ever
				// (ReapedKeys counts them): orphans come from crashes
				// and from uploads and commits that failed or timed
				// out, so they stay few while the store is healthy.
				if err := tx.b.Set(tombstoneKey(k), encodeReservation(tx.nowMs), nil); err != nil {
					return err
				}
			}
			delete(tx.files, k)
		}
		return nil
	})
}

// ReapedKeys counts the tombstones of reaped orphans that DeleteFiles
// forgot. They are kept for ever (a late CommitFile or ReserveObject of
// such a key must keep failing), one small row each, so the count grows
// with every upload or commit that failed, timed out or crashed before
// its reservation expired: a number to watch. It reads every tombstone.
func (cp *ControlPlane) ReapedKeys(ctx context.Context) (int64, error) {
	var n int64
	err := cp.view(ctx, func(r pebble.Reader) error {
		p := []byte{tagTombstone}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return fmt.Errorf("pebblecp: iterate tombstones: %w", err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		return it.Error()
	})
	return n, err
}
