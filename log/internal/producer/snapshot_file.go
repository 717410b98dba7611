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

// BatchesSuffix ends the name of a producer batches file, the dedup
// windows that go with the snapshot at the same offset (batches.go).
const BatchesSuffix = ".producerbatches"

const offsetDigits = 20

// SnapshotFileName returns the name of the snapshot taken at offset (its
// map end offset): "00000000000000000042.snapshot", the name
// segment.SnapshotFileName reserves.
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, SnapshotSuffix)
}

// BatchesFileName returns the name of the batches file that goes with
// the snapshot at offset: "00000000000000000042.producerbatches".
func BatchesFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, BatchesSuffix)
}

// ParseBatchesFileName returns the offset of a batches file name, and
// false for any other name.
func ParseBatchesFileName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, BatchesSuffix)
	if !ok {
		return 0, false
	}
	return ParseSnapshotFileName(digits + SnapshotSuffix)
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
// fsync; the directory fsync is the commit point), without a batches
// file: for a snapshot that comes from elsewhere (the remote tier), which
// holds each producer's last batch only. A batches file at offset is
// removed first (it went with another snapshot). A leftover "<name>.tmp"
// is a segment.KindTemp file, which the log deletes on open.
func WriteSnapshotFile(fsys vfs.FS, dir string, offset int64, data []byte) error {
	if err := removeIfExists(fsys, fsys.PathJoin(dir, BatchesFileName(offset))); err != nil {
		return err
	}
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, SnapshotFileName(offset)), data); err != nil {
		return fmt.Errorf("producer: write snapshot: %w", err)
	}
	return nil
}

// WriteSnapshotFiles writes the snapshot at offset and its batches file
// (SnapshotWithBatches), each atomically: the batches file first, so the
// snapshot's rename is the commit point of the pair. A crash between the
// two leaves a batches file naming a snapshot that is not there, which a
// load ignores (LoadSnapshotWithBatches) and RemoveStrayBatches deletes.
func WriteSnapshotFiles(fsys vfs.FS, dir string, offset int64, snap, batches []byte) error {
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, BatchesFileName(offset)), batches); err != nil {
		return fmt.Errorf("producer: write batches: %w", err)
	}
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, SnapshotFileName(offset)), snap); err != nil {
		return fmt.Errorf("producer: write snapshot: %w", err)
	}
	return nil
}

// ReadBatchesFile returns the bytes of the batches file at offset, nil if
// there is none.
func ReadBatchesFile(fsys vfs.FS, dir string, offset int64) ([]byte, error) {
	path := fsys.PathJoin(dir, BatchesFileName(offset))
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("producer: open %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("producer: read %s: %w", path, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func removeIfExists(fsys vfs.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("producer: remove %s: %w", path, err)
	}
	return nil
}

// RemoveStrayBatches removes the batches files without a snapshot at
// their offset (left by a crash between the two writes of
// WriteSnapshotFiles, or by a deletion) and returns their offsets.
func RemoveStrayBatches(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("producer: list %s: %w", dir, err)
	}
	snaps := make(map[int64]bool)
	var batches []int64
	for _, name := range names {
		if off, ok := ParseSnapshotFileName(name); ok {
			snaps[off] = true
		} else if off, ok := ParseBatchesFileName(name); ok {
			batches = append(batches, off)
		}
	}
	var removed []int64
	for _, off := range batches {
		if snaps[off] {
			continue
		}
		if err := removeIfExists(fsys, fsys.PathJoin(dir, BatchesFileName(off))); err != nil {
			return removed, err
		}
		removed = append(removed, off)
	}
	slices.Sort(removed)
	return removed, nil
}

// RemoveStraySnapshots deletes the snapshots that are not at one of
// segmentBases, except the newest of them when it is at or above the
// last segment base (the one a clean close writes at the log end) and
// except keep (a segment recovery point the offsets checkpoint names;
// -1 for none). Kafka: ProducerStateManager.removeStraySnapshots.
func RemoveStraySnapshots(fsys vfs.FS, dir string, segmentBases []int64, keep int64) ([]int64, error) {
	offsets, err := ListSnapshotOffsets(fsys, dir)
	if err != nil {
		return nil, err
	}
	isBase := make(map[int64]bool, len(segmentBases))
	maxBase := int64(-1)
	for _, b := range segmentBases {
		isBase[b] = true
		maxBase = max(maxBase, b)
	}
	var strays []int64
	for _, o := range offsets {
		if !isBase[o] && o != keep {
			strays = append(strays, o)
		}
	}
	if n := len(strays); n > 0 && strays[n-1] >= maxBase {
		strays = strays[:n-1] // the largest stray, as Kafka keeps it
	}
	for _, o := range strays {
		if err := DeleteSnapshot(fsys, dir, o); err != nil {
			return nil, err
		}
	}
	return strays, nil
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

// DeleteSnapshot removes the snapshot at offset and then its batches
// file; a missing file is not an error. The removals are not fsynced: a
// snapshot that reappears after a crash is deleted again by the same
// rule, or is harmless (see the package comment); one that reappears
// without its batches file loads with Kafka's window (the last batch).
func DeleteSnapshot(fsys vfs.FS, dir string, offset int64) error {
	if err := removeIfExists(fsys, fsys.PathJoin(dir, SnapshotFileName(offset))); err != nil {
		return err
	}
	return removeIfExists(fsys, fsys.PathJoin(dir, BatchesFileName(offset)))
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
	// Batches says whether the loaded snapshot's batches file restored
	// the producers' whole dedup windows.
	Batches BatchesUse
	// Corrupt lists the snapshots that failed to decode (or whose
	// batches file did) and were deleted, newest first, with the reason.
	Corrupt []CorruptSnapshot
}

// CorruptSnapshot is a snapshot file that failed to decode.
type CorruptSnapshot struct {
	Offset int64
	Err    error
}

// LoadLatestSnapshotFile replaces the state with the newest snapshot in
// dir at or below maxOffset, with the dedup windows of its batches file
// (LoadSnapshotWithBatches). A snapshot that fails to decode (bad CRC,
// version or size), or whose batches file does, is deleted with its
// batches file and the next older one tried, as Kafka's loadFromSnapshot
// does for a corrupt snapshot. Without a usable snapshot the state is emptied
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
		batches, err := ReadBatchesFile(fsys, dir, off)
		if err != nil {
			return res, err
		}
		use, err := m.LoadSnapshotWithBatches(data, batches, off)
		if err == nil {
			res.Loaded, res.Offset, res.Batches = true, off, use
			if use == BatchesStale {
				// Best effort: the next snapshot at off rewrites it.
				_ = removeIfExists(fsys, fsys.PathJoin(dir, BatchesFileName(off)))
			}
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
// truncateAndReload): snapshots above logEnd and below floor are deleted
// (floor <= logStart: the log keeps the snapshot at the base of the
// segment holding the log start, from which that segment's state is
// rebuilt; never above logEnd); if the state was not already known exactly up to logEnd it
// is reloaded from the newest remaining snapshot (or emptied at floor),
// otherwise only OnLogStartOffsetIncremented(logStart) applies. The
// caller then replays [MapEndOffset(), logEnd) with Replay.
func (m *Manager) TruncateAndReload(fsys vfs.FS, dir string, floor, logStart, logEnd int64) (SnapshotLoad, error) {
	// A recovery may start below the log start's segment (the offsets
	// checkpoint's recovery point lags the log start, or the epochs are
	// rebuilt from the first segment): keep what it loads from.
	floor = min(floor, logStart, logEnd)
	if _, err := DeleteSnapshotsAbove(fsys, dir, logEnd); err != nil {
		return SnapshotLoad{}, err
	}
	if _, err := DeleteSnapshotsBelow(fsys, dir, floor); err != nil {
		return SnapshotLoad{}, err
	}
	if logEnd == m.mapEndOffset {
		m.OnLogStartOffsetIncremented(logStart)
		return SnapshotLoad{}, nil
	}
	return m.LoadLatestSnapshotFile(fsys, dir, logEnd, floor)
}
