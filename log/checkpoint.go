package log

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

// File names in a log directory besides the segment files.
const (
	// OffsetsCheckpointFileName holds the log start offset and the
	// recovery point. Kafka keeps them in two per-log-directory files
	// (log-start-offset-checkpoint, recovery-point-offset-checkpoint)
	// keyed by topic and partition; a tierlog log owns its directory, so
	// it keeps both in one file of the same text format:
	//
	//	0                      version
	//	2                      number of entries
	//	log-start-offset 5
	//	recovery-point 17
	//	segment-recovery-point 12
	//
	// The third key is tierlog's: a recovery point inside a segment at
	// which the segment's index files, its transaction index and a
	// producer snapshot were made durable (DESIGN.md 5.2); absent when
	// there is none. Older versions of this file have two entries.
	OffsetsCheckpointFileName = "offsets-checkpoint"
	// CleanShutdownFileName exists while the log is closed cleanly: Close
	// writes it as its last step, Open removes it (durably) before it
	// accepts writes. Kafka: .kafka_cleanshutdown.
	CleanShutdownFileName = ".kafka_cleanshutdown"
)

const (
	keyLogStartOffset = "log-start-offset"
	keyRecoveryPoint  = "recovery-point"
	keySegmentPoint   = "segment-recovery-point"
)

// offsetsCheckpoint is the content of the offsets checkpoint.
type offsetsCheckpoint struct {
	logStartOffset int64
	recoveryPoint  int64
	// segmentPoint is the segment recovery point, 0 if none: an offset
	// strictly inside a segment, at or below recoveryPoint, whose
	// segment's files were made durable up to it (see Flush).
	segmentPoint int64
}

func (c offsetsCheckpoint) encode() []byte {
	var b []byte
	if c.segmentPoint > 0 {
		b = append(b, "0\n3\n"...)
	} else {
		b = append(b, "0\n2\n"...)
	}
	b = append(b, keyLogStartOffset+" "...)
	b = strconv.AppendInt(b, c.logStartOffset, 10)
	b = append(b, "\n"+keyRecoveryPoint+" "...)
	b = strconv.AppendInt(b, c.recoveryPoint, 10)
	if c.segmentPoint > 0 {
		b = append(b, "\n"+keySegmentPoint+" "...)
		b = strconv.AppendInt(b, c.segmentPoint, 10)
	}
	return append(b, '\n')
}

// CheckpointError reports an offsets checkpoint that cannot be parsed.
// It unwraps to ErrCorruption.
type CheckpointError struct {
	Path   string
	Line   int
	Reason string
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("log: corrupt checkpoint %s line %d: %s", e.Path, e.Line, e.Reason)
}

func (e *CheckpointError) Unwrap() error { return ErrCorruption }

// parseOffsetsCheckpoint parses the text; missing keys stay 0.
func parseOffsetsCheckpoint(path string, data []byte) (offsetsCheckpoint, error) {
	var c offsetsCheckpoint
	lines := bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
	bad := func(line int, format string, args ...any) error {
		return &CheckpointError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return c, bad(1, "empty file")
	}
	if string(lines[0]) != "0" {
		return c, bad(1, "unsupported version %q", lines[0])
	}
	if len(lines) < 2 {
		return c, bad(2, "missing entry count")
	}
	n, err := strconv.Atoi(string(lines[1]))
	if err != nil || n != len(lines)-2 {
		return c, bad(2, "entry count %q does not match %d entry lines", lines[1], len(lines)-2)
	}
	for i, line := range lines[2:] {
		fields := bytes.Fields(line)
		if len(fields) != 2 {
			return c, bad(i+3, "want \"<key> <offset>\", got %q", line)
		}
		v, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil || v < 0 {
			return c, bad(i+3, "malformed offset %q", fields[1])
		}
		switch string(fields[0]) {
		case keyLogStartOffset:
			c.logStartOffset = v
		case keyRecoveryPoint:
			c.recoveryPoint = v
		case keySegmentPoint:
			c.segmentPoint = v
		default:
			return c, bad(i+3, "unknown key %q", fields[0])
		}
	}
	return c, nil
}

// readOffsetsCheckpoint reads the checkpoint in dir; found is false if it
// does not exist (a new log).
func readOffsetsCheckpoint(fsys vfs.FS, dir string) (c offsetsCheckpoint, found bool, err error) {
	path := fsys.PathJoin(dir, OffsetsCheckpointFileName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	} else if err != nil {
		return c, false, fmt.Errorf("log: open %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return c, false, fmt.Errorf("log: read %s: %w", path, err)
	}
	c, err = parseOffsetsCheckpoint(path, data)
	return c, true, err
}

// writeOffsetsCheckpoint replaces the checkpoint atomically (commit point:
// the directory fsync inside atomicfile.Write).
func writeOffsetsCheckpoint(fsys vfs.FS, dir string, c offsetsCheckpoint) error {
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, OffsetsCheckpointFileName), c.encode()); err != nil {
		return fmt.Errorf("log: write offsets checkpoint: %w", err)
	}
	return nil
}
