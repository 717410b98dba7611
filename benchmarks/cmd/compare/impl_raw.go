package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// rawImpl is the machine's limit: the same Kafka batch bytes tierlog
// writes, written with write(2) to one file (and fdatasync'd per batch
// when sync), read back with pread(2). It has no framing, no index and no
// recovery: a point read computes the position from the fixed batch size.
type rawImpl struct {
	f    *os.File
	sync bool
	// batchBytes and perBatch describe the fixed layout of the last log
	// appended; they survive Close so the read workloads can use them.
	batchBytes int64
	perBatch   int64
	buf        []byte
}

func (r *rawImpl) Name() string { return "raw file" }

func (r *rawImpl) Durability(sync bool) string {
	if sync {
		return "write(2) + fdatasync(2) per batch"
	}
	return "write(2) to the page cache"
}

func (r *rawImpl) Unsupported(workloadKind) string { return "" }

func (r *rawImpl) Open(dir string, sync bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Stat(); err != nil { // what any log's open needs: its size
		_ = f.Close()
		return err
	}
	r.f, r.sync = f, sync
	return nil
}

func (r *rawImpl) Append(b *batch) error {
	if _, err := r.f.Write(b.kafka); err != nil {
		return err
	}
	r.batchBytes, r.perBatch = int64(len(b.kafka)), int64(b.records())
	if r.sync {
		return syscall.Fdatasync(int(r.f.Fd()))
	}
	return nil
}

func (r *rawImpl) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

func (r *rawImpl) ReadAll() (bytes, records int64, err error) {
	if cap(r.buf) < fetchBytes {
		r.buf = make([]byte, fetchBytes)
	}
	buf := r.buf[:fetchBytes]
	for pos := int64(0); ; {
		n, err := r.f.ReadAt(buf, pos)
		pos += int64(n)
		bytes += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return bytes, 0, err
		}
	}
	if r.batchBytes > 0 {
		records = bytes / r.batchBytes * r.perBatch
	}
	return bytes, records, nil
}

// ReadRecord preads the whole batch holding record i, as tierlog returns.
func (r *rawImpl) ReadRecord(i int64) (int, error) {
	if int64(cap(r.buf)) < r.batchBytes {
		r.buf = make([]byte, r.batchBytes)
	}
	buf := r.buf[:r.batchBytes]
	return r.f.ReadAt(buf, i/r.perBatch*r.batchBytes)
}
