package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

// batchReader reads the batches of a .log file one at a time with
// positioned reads, so a segment of any size needs only one batch in
// memory. It frames each batch (size and magic) and leaves the CRC to the
// caller, so a batch with a bad CRC can be reported and skipped: its
// length field still says where the next one starts.
type batchReader struct {
	t    *tool
	path string
	f    vfs.File
	size int64
	pos  int64
	buf  []byte
	// nextProgress is the position after which the next progress line is
	// printed.
	nextProgress int64
}

func (t *tool) openBatches(path string) (*batchReader, error) {
	f, err := t.fs.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &batchReader{t: t, path: path, f: f, size: st.Size(), nextProgress: t.progressBytes}, nil
}

func (r *batchReader) close() { _ = r.f.Close() }

// frameError says why the batches stop being readable at Pos: nothing
// after it can be framed. Torn is true for a batch cut short by the end of
// the file (what a crash during an append leaves; recovery truncates it).
type frameError struct {
	Pos    int64
	Torn   bool
	Reason string
}

func (e *frameError) Error() string {
	if e.Torn {
		return fmt.Sprintf("torn tail at position %d: %s", e.Pos, e.Reason)
	}
	return fmt.Sprintf("corrupt batch at position %d: %s", e.Pos, e.Reason)
}

// next returns the batch at the current position and that position, and
// advances past it. It returns io.EOF at the end of the file, a
// *frameError where no batch can be framed, and other errors for I/O.
func (r *batchReader) next() (record.Batch, int64, error) {
	pos := r.pos
	remaining := r.size - pos
	if remaining == 0 {
		return record.Batch{}, pos, io.EOF
	}
	if remaining < record.LogOverhead {
		return record.Batch{}, pos, &frameError{Pos: pos, Torn: true,
			Reason: fmt.Sprintf("%d bytes left, a batch header needs %d", remaining, record.HeaderSize)}
	}
	var hdr [record.LogOverhead]byte
	if _, err := r.f.ReadAt(hdr[:], pos); err != nil {
		return record.Batch{}, pos, fmt.Errorf("read %s at %d: %w", r.path, pos, err)
	}
	total := int64(record.LogOverhead) + int64(int32(binary.BigEndian.Uint32(hdr[8:])))
	if total < record.HeaderSize {
		return record.Batch{}, pos, &frameError{Pos: pos, Reason: fmt.Sprintf("declared size %d below the header size %d", total, record.HeaderSize)}
	}
	if total > remaining {
		return record.Batch{}, pos, &frameError{Pos: pos, Torn: true,
			Reason: fmt.Sprintf("batch declares %d bytes, %d left in the file", total, remaining)}
	}
	if int64(cap(r.buf)) < total {
		r.buf = make([]byte, total)
	}
	buf := r.buf[:total]
	if _, err := r.f.ReadAt(buf, pos); err != nil {
		return record.Batch{}, pos, fmt.Errorf("read %s at %d: %w", r.path, pos, err)
	}
	b, err := record.ReadBatch(buf)
	if err != nil {
		return record.Batch{}, pos, &frameError{Pos: pos, Reason: reasonOf(err)}
	}
	r.pos = pos + total
	r.progress()
	return b, pos, nil
}

// progress prints a line on stderr each time the scan passes another
// progressBytes, so a scan of a large segment shows it is alive.
func (r *batchReader) progress() {
	if r.t.progressBytes <= 0 || r.pos < r.nextProgress || r.pos == r.size {
		return
	}
	fmt.Fprintf(r.t.stderr, "tierlog: %s: read %d of %d bytes (%d%%)\n", r.path, r.pos, r.size, r.pos*100/r.size)
	for r.nextProgress <= r.pos {
		r.nextProgress += r.t.progressBytes
	}
}

// reasonOf returns the reason of a record error without its package
// prefix and position (the tool prints its own).
func reasonOf(err error) string {
	var ce *record.CorruptBatchError
	if errors.As(err, &ce) {
		if ce.Err != nil {
			return ce.Reason + ": " + ce.Err.Error()
		}
		return ce.Reason
	}
	return err.Error()
}
