package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tierlog/tierlog/log"
)

// plainFiles is the compare command's baseline (Options.BaselinePlainFile):
// Produce appends each partition's batches to a plain file, assigning
// offsets by rewriting the batches' base offsets, and nothing else: no
// validation, no index, no producer state, no fsync. The broker around
// it (framing, kmsg, the connection loop) is the same, so a run against
// it beside a run against the library measures what the library's
// append costs a broker. Fetch still reads the logs, which stay empty.
type plainFiles struct {
	dir string
	mu  sync.Mutex // guards files
	// files maps a log's directory name (<topic>-<partition>) to its file.
	files map[string]*plainFile
}

type plainFile struct {
	mu   sync.Mutex // guards f's end and next
	f    *os.File
	next int64 // the offset the next record gets
}

// v2 batch header fields the baseline reads (Kafka's DefaultRecordBatch).
const lastOffsetDeltaOffset = 23

// append writes records to the partition's file and returns the base
// offset, as appendAndCommit does for a log.
func (p *plainFiles) append(l *log.UnifiedLog, records []byte) (base, logStart int64, code int16) {
	name := filepath.Base(l.Dir())
	p.mu.Lock()
	pf, ok := p.files[name]
	if !ok {
		f, err := os.OpenFile(filepath.Join(p.dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			p.mu.Unlock()
			return -1, -1, kerr.KafkaStorageError.Code
		}
		pf = &plainFile{f: f}
		p.files[name] = pf
	}
	p.mu.Unlock()

	pf.mu.Lock()
	defer pf.mu.Unlock()
	base = pf.next
	next := base
	for b := records; len(b) >= lastOffsetDeltaOffset+4; {
		n := int64(int32(binary.BigEndian.Uint32(b[lengthOffset:])))
		if n <= 0 || n > int64(len(b)-12) {
			return -1, -1, kerr.CorruptMessage.Code
		}
		binary.BigEndian.PutUint64(b, uint64(next))
		next += int64(int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:]))) + 1
		b = b[12+n:]
	}
	if _, err := pf.f.Write(records); err != nil {
		return -1, -1, kerr.KafkaStorageError.Code
	}
	pf.next = next
	return base, 0, 0
}

// close closes the files.
func (p *plainFiles) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pf := range p.files {
		_ = pf.f.Close()
	}
}
