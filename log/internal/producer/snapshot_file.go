package producer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
)

// SnapshotSuffix ends the name of a producer snapshot file.
const SnapshotSuffix = ".snapshot"

const offsetDigits = 20

// SnapshotFileName returns the name of the snapshot taken at offset (its
// map end offset): "00000000000000000042.snapshot", the name
// segment.SnapshotFileName reserves.
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, SnapshotSuffix)
}

// ParseSnapshotFileName returns the offset of a snapshot file name, and
// false for any other name (including a snapshot's ".tmp").
func ParseSnapshotFileName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, SnapshotSuffix)
	if !ok || len(digits) != offsetDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	offset, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return offset, true
}

// WriteSnapshotFile writes data as the snapshot at offset in dir,
// atomically (internal/atomicfile: temp file, fsync, rename, directory
// fsync; the directory fsync is the commit point). A leftover
// "<name>.tmp" is a segment.KindTemp file, which the log deletes on open.
func WriteSnapshotFile(fsys vfs.FS, dir string, offset int64, data []byte) error {
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, SnapshotFileName(offset)), data); err != nil {
		return fmt.Errorf("producer: write snapshot: %w", err)
	}
	return nil
}

// ReadSnapshotFile returns the bytes of the snapshot at offset in dir
// (what the remote copy task uploads), unvalidated. A missing file is an
// error wrapping fs.ErrNotExist.
func ReadSnapshotFile(fsys vfs.FS, dir string, offset int64) ([]byte, error) {
	path := fsys.PathJoin(dir, SnapshotFileName(offset))
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("producer: open snapshot %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("producer: read snapshot %s: %w", path, err)
	}
	return data, nil
}

// ListSnapshotOffsets returns the offsets of the snapshot files in dir,
// ascending.
func ListSnapshotOffsets(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("producer: list %s: %w", dir, err)
	}
	var offsets []int64
	for _, name := range names {
		if off, ok := ParseSnapshotFileName(name); ok {
			offsets = append(offsets, off)
		}
	}
	slices.Sort(offsets)
	return offsets, nil
}

// DeleteSnapshot removes the snapshot at offset; a missing file is not an
// error. The removal is not fsynced: a snapshot that reappears after a
// crash is deleted again by the same rule, or is harmless (see the
// package comment).
func DeleteSnapshot(fsys vfs.FS, dir string, offset int64) error {
	path := fsys.PathJoin(dir, SnapshotFileName(offset))
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("producer: remove snapshot %s: %w", path, err)
	}
	return nil
}

// DeleteSnapshotsBelow removes the snapshots at offsets < offset (below a
// new log start offset) and returns their offsets.
func DeleteSnapshotsBelow(fsys vfs.FS, dir string, offset int64) ([]int64, error) {
	return deleteSnapshotsIf(fsys, dir, func(o int64) bool { return o < offset })
}

// DeleteSnapshotsAbove removes the snapshots at offsets > offset (beyond
// a truncation point) and returns their offsets. A snapshot at exactly
// offset describes the state up to it and is kept.
func DeleteSnapshotsAbove(fsys vfs.FS, dir string, offset int64) ([]int64, error) {
	return deleteSnapshotsIf(fsys, dir, func(o int64) bool { return o > offset })
}

func deleteSnapshotsIf(fsys vfs.FS, dir string, del func(int64) bool) ([]int64, error) {
	offsets, err := ListSnapshotOffsets(fsys, dir)
	if err != nil {
		return nil, err
	}
	var deleted []int64
	for _, o := range offsets {
		if !del(o) {
			continue
		}
		if err := DeleteSnapshot(fsys, dir, o); err != nil {
			return deleted, err
		}
		deleted = append(deleted, o)
	}
	return deleted, nil
}

// SnapshotLoad reports what LoadLatestSnapshotFile did.
type SnapshotLoad struct {
	// Loaded is true if a snapshot was loaded; Offset is then its offset
	// (the new MapEndOffset).
	Loaded bool
	Offset int64
	// Corrupt lists the snapshots that failed to decode and were
	// deleted, newest first, with the reason.
	Corrupt []CorruptSnapshot
}

// CorruptSnapshot is a snapshot file that failed to decode.
type CorruptSnapshot struct {
	Offset int64
	Err    error
}

// LoadLatestSnapshotFile replaces the state with the newest snapshot in
// dir at or below maxOffset. A snapshot that fails to decode (bad CRC,
// version or size) is deleted and the next older one tried, as Kafka's
// loadFromSnapshot does. Without a usable snapshot the state is emptied
// and known up to emptyAt (Kafka: the log start offset). Either way the
// caller then replays the log from MapEndOffset() to its end with Replay.
// I/O errors are returned with the state unchanged.
func (m *Manager) LoadLatestSnapshotFile(fsys vfs.FS, dir string, maxOffset, emptyAt int64) (SnapshotLoad, error) {
	var res SnapshotLoad
	offsets, err := ListSnapshotOffsets(fsys, dir)
	if err != nil {
		return res, err
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > maxOffset {
			continue
		}
		data, err := ReadSnapshotFile(fsys, dir, off)
		if err != nil {
			return res, err
		}
		err = m.LoadSnapshot(data, off)
		if err == nil {
			res.Loaded, res.Offset = true, off
			return res, nil
		}
		if !errors.Is(err, ErrCorruption) {
			return res, err
		}
		res.Corrupt = append(res.Corrupt, CorruptSnapshot{Offset: off, Err: err})
		if err := DeleteSnapshot(fsys, dir, off); err != nil {
			return res, err
		}
	}
	m.TruncateFullyAndStartAt(emptyAt)
	return res, nil
}

// TruncateAndReload brings the state in line with a log that now holds
// [logStart, logEnd) after a truncation or on open (Kafka:
// truncateAndReload): snapshots above logEnd and below logStart are
// deleted; if the state was not already known exactly up to logEnd it is
// reloaded from the newest remaining snapshot (or emptied at logStart),
// otherwise only OnLogStartOffsetIncremented(logStart) applies. The
// caller then replays [MapEndOffset(), logEnd) with Replay.
func (m *Manager) TruncateAndReload(fsys vfs.FS, dir string, logStart, logEnd int64) (SnapshotLoad, error) {
	if _, err := DeleteSnapshotsAbove(fsys, dir, logEnd); err != nil {
		return SnapshotLoad{}, err
	}
	if _, err := DeleteSnapshotsBelow(fsys, dir, logStart); err != nil {
		return SnapshotLoad{}, err
	}
	if logEnd == m.mapEndOffset {
		m.OnLogStartOffsetIncremented(logStart)
		return SnapshotLoad{}, nil
	}
	return m.LoadLatestSnapshotFile(fsys, dir, logEnd, logStart)
}
