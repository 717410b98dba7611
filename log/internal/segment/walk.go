package segment

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

// Batch header fields the segment reads without framing the whole batch
// (the batch v2 header of KIP-98; log/record keeps its offsets private).
const (
	hdrLength          = 8
	hdrMagic           = 16
	hdrLastOffsetDelta = 23
	hdrMaxTimestamp    = 35
	// minBatchLength is the smallest Length field: the header after it.
	minBatchLength = record.HeaderSize - record.LogOverhead
)

// walkChunkBytes bounds the memory of a whole-file pass (Recover, index
// rebuilds, TruncateTo's copy): the file is read this much at a time,
// more only for a single batch larger than it.
const walkChunkBytes = 1 << 20

// batchHeader is what reads need of a batch: where it is and what it spans.
type batchHeader struct {
	pos          int64
	size         int64
	baseOffset   int64
	lastOffset   int64
	maxTimestamp int64
}

func (h batchHeader) end() int64 { return h.pos + h.size }

// headerBuf is a pooled buffer for one batch header, so that concurrent
// readers scanning headers allocate nothing per call.
type headerBuf [record.HeaderSize]byte

var headerPool = sync.Pool{New: func() any { return new(headerBuf) }}

// readHeader reads the header of the batch at pos with one pread. It
// returns ok = false, and no error, when the batch does not fit below end
// (a torn tail, or the end of the data a reader may see); a header that
// cannot be a batch (bad magic, impossible length) is corruption.
func readHeader(f vfs.File, path string, pos, end int64, buf *headerBuf) (h batchHeader, ok bool, err error) {
	if end-pos < record.HeaderSize {
		return h, false, nil
	}
	if n, err := f.ReadAt(buf[:], pos); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, false, ioErr("read", path, err)
	}
	return parseHeader(buf[:], path, pos, end)
}

// parseHeader decodes the header at the start of b, the bytes of the .log
// at pos (at least record.HeaderSize of them), with readHeader's answers.
func parseHeader(b []byte, path string, pos, end int64) (h batchHeader, ok bool, err error) {
	length := int32(binary.BigEndian.Uint32(b[hdrLength:]))
	delta := int32(binary.BigEndian.Uint32(b[hdrLastOffsetDelta:]))
	h = batchHeader{
		pos:          pos,
		size:         record.LogOverhead + int64(length),
		baseOffset:   int64(binary.BigEndian.Uint64(b)),
		maxTimestamp: int64(binary.BigEndian.Uint64(b[hdrMaxTimestamp:])),
	}
	h.lastOffset = h.baseOffset + int64(delta)
	switch {
	case length < minBatchLength:
		return h, false, corruptionf(path, pos, "batch length %d below the minimum %d", length, minBatchLength)
	case b[hdrMagic] != record.Magic:
		return h, false, corruptionf(path, pos, "batch magic %d, want %d", int8(b[hdrMagic]), record.Magic)
	case delta < 0:
		return h, false, corruptionf(path, pos, "negative last offset delta %d", delta)
	case h.end() > end:
		return h, false, nil
	}
	return h, true, nil
}

// errStopWalk, returned (wrapped in a *TailError) by a walkBatches
// callback, ends the walk at the current batch as if it were invalid.
type stopWalk struct{ err error }

func (e *stopWalk) Error() string { return e.err.Error() }
func (e *stopWalk) Unwrap() error { return e.err }

// walkOptions configures walkBatches.
type walkOptions struct {
	from, end     int64 // the range of the file to walk
	maxBatchBytes int   // a larger declared size is corruption
	validate      bool  // check each batch's CRC (Batch.Validate)
	// onBatch is called for each batch in order, with its position. It may
	// return a *stopWalk to end the walk there (the batch counts as
	// invalid) or another error to abort it.
	onBatch func(pos int64, b record.Batch) error
	// onChunk, if set, is called with the bytes of whole batches read,
	// in order, after their onBatch calls; it may modify them.
	onChunk func(pos int64, chunk []byte) error
	// mapped, if set, is the segment's read-only mapping covering
	// [0, end): the walk reads its chunks there instead of copying them
	// with pread (a recovery's CRC pass then reads the page cache once,
	// not twice). Not with onChunk, which may modify the chunk.
	mapped []byte
}

// walkBatches reads [from, end) of f in bounded chunks and calls back for
// each batch that frames (and validates, if asked). It returns the
// position after the last good batch and, if it stopped before end, why:
// a *record.TornTailError, a *record.CorruptBatchError or the cause of a
// *stopWalk, all with file positions. err is an I/O error or a callback's
// error.
func walkBatches(f vfs.File, path string, buf *[]byte, o walkOptions) (stop int64, tail error, err error) {
	if o.mapped != nil {
		if o.onChunk != nil || int64(len(o.mapped)) < o.end {
			panic("segment: walkBatches: mapping shorter than the walk, or with onChunk")
		}
		return walkMapped(path, o)
	}
	return walkLoop(f, path, buf, o)
}

// walkLoop is walkBatches' loop, reading through readChunk.
func walkLoop(f vfs.File, path string, buf *[]byte, o walkOptions) (stop int64, tail error, err error) {
	pos, want := o.from, walkChunkBytes
	for pos < o.end {
		n := int(min(int64(want), o.end-pos))
		chunk, err := readChunk(f, path, buf, pos, n, o.mapped)
		if err != nil {
			return pos, nil, err
		}
		off := 0
		for off < len(chunk) {
			b, more, terr := frameBatch(chunk[off:], pos+int64(off), o)
			if more > 0 {
				// The batch continues past this chunk but within end:
				// read again from its start, with room for all of it.
				want = max(walkChunkBytes, more)
				break
			}
			if terr != nil {
				return pos + int64(off), terr, nil
			}
			if cerr := o.onBatch(pos+int64(off), b); cerr != nil {
				var sw *stopWalk
				if errors.As(cerr, &sw) {
					return pos + int64(off), sw.err, nil
				}
				return pos + int64(off), nil, cerr
			}
			off += b.Size()
		}
		if off > 0 && o.onChunk != nil {
			if err := o.onChunk(pos, chunk[:off]); err != nil {
				return pos, nil, err
			}
		}
		pos += int64(off)
	}
	return pos, nil, nil
}

// readChunk returns the n bytes of the .log at pos: a slice of mapped
// when set, else read with one pread into buf (grown as needed).
func readChunk(f vfs.File, path string, buf *[]byte, pos int64, n int, mapped []byte) ([]byte, error) {
	if mapped != nil {
		return mapped[pos : pos+int64(n) : pos+int64(n)], nil
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	chunk := (*buf)[:n]
	if got, err := f.ReadAt(chunk, pos); got < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, ioErr("read", path, err)
	}
	return chunk, nil
}

// walkMapped is walkBatches over o.mapped under faultGuard: a fault is an
// I/O error that stops the walk, never a torn tail or corruption (which
// would make recovery cut the file).
func walkMapped(path string, o walkOptions) (stop int64, tail error, err error) {
	stop = o.from
	err = faultGuard(path, o.from, func() error {
		var werr error
		stop, tail, werr = walkLoop(nil, path, nil, o)
		return werr
	})
	if err != nil {
		tail = nil
	}
	return stop, tail, err
}

// frameBatch frames the batch at the start of rest, found at file
// position pos. more > 0 means the batch needs more bytes than rest holds
// (more in all) and they exist before o.end; terr is a torn or corrupt
// batch.
func frameBatch(rest []byte, pos int64, o walkOptions) (b record.Batch, more int, terr error) {
	avail := o.end - pos
	if len(rest) >= record.LogOverhead {
		length := int32(binary.BigEndian.Uint32(rest[hdrLength:]))
		// Check the limit before the torn-tail check, as record.Scanner
		// does: an absurd length is garbage even when it also runs past
		// the end.
		if declared := record.LogOverhead + int64(length); declared > int64(o.maxBatchBytes) {
			return b, 0, &record.CorruptBatchError{Pos: pos, BaseOffset: int64(binary.BigEndian.Uint64(rest)),
				Reason: "declared size exceeds the maximum batch size"}
		} else if length >= minBatchLength && declared > int64(len(rest)) && declared <= avail {
			return b, int(declared), nil
		}
	} else if int64(len(rest)) < avail {
		return b, record.HeaderSize, nil // the length field itself straddles the chunk
	}
	b, err := record.ReadBatch(rest)
	if err == nil && o.validate {
		err = b.Validate()
	}
	if err != nil {
		var torn *record.TornTailError
		var corrupt *record.CorruptBatchError
		switch {
		case errors.As(err, &torn):
			torn.Pos, torn.Available = pos, int(avail)
		case errors.As(err, &corrupt):
			corrupt.Pos = pos
		}
		return b, 0, err
	}
	return b, 0, nil
}

// writeFileAtomic replaces path with data: write path.tmp, fsync it,
// rename it over path. The caller fsyncs the directory (once for several
// files). A crash leaves the old or the new file, plus maybe a .tmp the
// loader deletes. data may be modified (vfs.File.Write may).
func writeFileAtomic(fs vfs.FS, path string, data []byte) error {
	tmp := tempName(path)
	if err := writeSynced(fs, tmp, data); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		_ = fs.Remove(tmp)
		return ioErr("rename", tmp, err)
	}
	return nil
}

// writeSynced creates path with data and fsyncs and closes it. On error it
// removes the file (best effort: the loader removes .tmp files anyway).
func writeSynced(fs vfs.FS, path string, data []byte) (err error) {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return ioErr("create", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = fs.Remove(path)
		}
	}()
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			return ioErr("write", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return ioErr("sync", path, err)
	}
	if err := f.Close(); err != nil {
		f = nopCloser{f}
		return ioErr("close", path, err)
	}
	return nil
}

// nopCloser keeps writeSynced's cleanup from closing a file twice.
type nopCloser struct{ vfs.File }

func (nopCloser) Close() error { return nil }

// syncDir fsyncs a directory, making renames, creates and removes in it
// durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return ioErr("open dir", dir, err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return ioErr("sync dir", dir, err)
	}
	return ioErr("close dir", dir, d.Close())
}
