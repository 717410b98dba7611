package epochcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
)

// CheckpointFileName is the name Kafka gives the checkpoint inside a
// partition's log directory.
const CheckpointFileName = "leader-epoch-checkpoint"

// checkpointVersion is the only version of the checkpoint format.
const checkpointVersion = 0

// tmpSuffix is appended to the checkpoint path to name the file a write
// goes through before it is renamed into place.
const tmpSuffix = atomicfile.TempSuffix

// CheckpointError reports a checkpoint file that exists but cannot be
// parsed. errors.Is(err, ErrCorruption) reports true for it. I/O failures
// while reading are never a CheckpointError.
type CheckpointError struct {
	Path   string // the checkpoint file
	Line   int    // 1-based line number of the offending line
	Reason string // what is wrong with it
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("epochcache: corrupt checkpoint %s line %d: %s", e.Path, e.Line, e.Reason)
}

// Unwrap returns ErrCorruption.
func (e *CheckpointError) Unwrap() error { return ErrCorruption }

// appendCheckpoint appends the checkpoint text for entries to b:
//
//	0\n<N>\n<epoch> <startOffset>\n ... (N lines)
func appendCheckpoint(b []byte, entries []Entry) []byte {
	b = strconv.AppendInt(b, checkpointVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// parseCheckpoint parses leader-epoch-checkpoint text (Kafka's
// LeaderEpochCheckpointFile: a version line, a count line, then one
// "epoch startOffset" line per entry). It returns the entries
// in file order, without normalising them; path only labels errors.
//
// Like Kafka's CheckpointFile reader it accepts an empty file and a file
// that ends after the version line as "no entries", splits entry lines on
// runs of blank characters, and requires exactly N entry lines. Line ends
// may be "\n" or "\r\n"; the final newline may be missing.
func parseCheckpoint(path string, data []byte) ([]Entry, error) {
	corrupt := func(line int, format string, args ...any) error {
		return &CheckpointError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	lineNo := 0
	nextLine := func() ([]byte, bool) {
		if len(data) == 0 {
			return nil, false
		}
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		return bytes.TrimSuffix(line, []byte{'\r'}), true
	}

	line, ok := nextLine()
	if !ok {
		return nil, nil // empty file
	}
	if v, err := strconv.Atoi(string(line)); err != nil {
		return nil, corrupt(lineNo, "malformed version %q", line)
	} else if v != checkpointVersion {
		return nil, corrupt(lineNo, "unsupported version %d, want %d", v, checkpointVersion)
	}
	line, ok = nextLine()
	if !ok {
		return nil, nil // no count line
	}
	countLine := lineNo
	count, err := strconv.Atoi(string(line))
	if err != nil || count < 0 {
		return nil, corrupt(lineNo, "malformed entry count %q", line)
	}
	// Cap the preallocation: the count comes from the file.
	entries := make([]Entry, 0, min(count, 1024))
	for {
		line, ok = nextLine()
		if !ok {
			break
		}
		fields := bytes.Fields(line)
		if len(fields) != 2 {
			return nil, corrupt(lineNo, "want 2 fields \"<epoch> <startOffset>\", got %d in %q", len(fields), line)
		}
		epoch, err := strconv.ParseInt(string(fields[0]), 10, 32)
		if err != nil {
			return nil, corrupt(lineNo, "malformed epoch %q", fields[0])
		}
		offset, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil {
			return nil, corrupt(lineNo, "malformed start offset %q", fields[1])
		}
		if epoch < 0 || offset < 0 {
			return nil, corrupt(lineNo, "negative epoch or start offset in %q", line)
		}
		entries = append(entries, Entry{Epoch: int32(epoch), StartOffset: offset})
		if len(entries) > count {
			return nil, corrupt(countLine, "header says %d entries, file has more", count)
		}
	}
	if len(entries) != count {
		return nil, corrupt(countLine, "header says %d entries, file has %d", count, len(entries))
	}
	return entries, nil
}

// readCheckpoint reads and parses the checkpoint at path. A missing file
// reads as no entries (found = false).
func readCheckpoint(fsys vfs.FS, path string) (entries []Entry, found bool, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("epochcache: open %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, true, fmt.Errorf("epochcache: read %s: %w", path, err)
	}
	entries, err = parseCheckpoint(path, data)
	return entries, true, err
}

// writeCheckpointFile replaces the checkpoint at path with data through
// atomicfile.Write: temp file, fsync, rename, directory fsync (the commit
// point). A crash leaves the old or the new file, never a torn one; a
// leftover temp file is removed by Open.
func writeCheckpointFile(fsys vfs.FS, path string, data []byte) error {
	if err := atomicfile.Write(fsys, path, data); err != nil {
		return fmt.Errorf("epochcache: %w", err)
	}
	return nil
}

// removeLeftoverTmp removes <path>.tmp if a crashed write left it behind.
func removeLeftoverTmp(fsys vfs.FS, path string) error {
	if err := atomicfile.RemoveTemp(fsys, path); err != nil {
		return fmt.Errorf("epochcache: %w", err)
	}
	return nil
}

// AppendCheckpoint appends the leader-epoch-checkpoint text of entries to
// b: the bytes Kafka's file holds, which the remote tier also uploads with
// every segment (KIP-405's RemoteStorageManager.copyLogSegmentData).
func AppendCheckpoint(b []byte, entries []Entry) []byte { return appendCheckpoint(b, entries) }

// ParseCheckpoint parses leader-epoch-checkpoint text with the rules of
// Kafka's LeaderEpochCheckpointFile, returning the entries in text order, not
// normalised. Malformed text is a *CheckpointError wrapping ErrCorruption
// whose Path is name.
func ParseCheckpoint(name string, data []byte) ([]Entry, error) { return parseCheckpoint(name, data) }
