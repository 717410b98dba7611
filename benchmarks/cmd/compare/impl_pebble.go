package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/record"
)

// pebbleImpl uses pebble's record.LogWriter as a raw framed WAL: one
// record per entry, written to a new log file per open (as pebble starts
// a new WAL per DB open). A synced batch ends with SyncRecord and waits
// for the fsync; the others use WriteRecord, which the LogWriter's
// background flusher writes out. There is no index: reading means
// replaying the files with record.Reader.
type pebbleImpl struct {
	dir     string
	sync    bool
	w       *record.LogWriter
	f       *os.File
	nextNum int
	sem     chan struct{}
}

func (p *pebbleImpl) Name() string { return "pebble record.LogWriter" }

func (p *pebbleImpl) Durability(sync bool) string {
	if sync {
		return "SyncRecord on the batch's last record: fdatasync before Append returns"
	}
	return "WriteRecord: async write by its flusher goroutine (appends timed until written)"
}

func (p *pebbleImpl) Unsupported(w workloadKind) string {
	if w == kindPointRead {
		return "no index: records are found only by replaying the log"
	}
	return ""
}

// Open replays the existing log files (what pebble does on open, and what
// it would need to find anything in them); the writer is created at the
// first Append, on a new file.
func (p *pebbleImpl) Open(dir string, sync bool) error {
	if err := mkdirAll(dir); err != nil {
		return err
	}
	p.dir, p.sync = dir, sync
	names, err := p.logFiles()
	if err != nil {
		return err
	}
	p.nextNum = len(names) + 1
	_, _, err = p.replay(names)
	return err
}

func (p *pebbleImpl) logFiles() ([]string, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, filepath.Join(p.dir, e.Name()))
		}
	}
	slices.Sort(names)
	return names, nil
}

// pebbleLogNum is the log number stamped in every chunk; the reader checks
// it.
const pebbleLogNum = 1

func (p *pebbleImpl) replay(names []string) (bytes, records int64, err error) {
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return bytes, records, err
		}
		r := record.NewReader(f, pebbleLogNum)
		for {
			rr, err := r.Next()
			if err == io.EOF || record.IsInvalidRecord(err) {
				break // the end, or a torn tail: where pebble's replay stops
			}
			if err != nil {
				_ = f.Close()
				return bytes, records, err
			}
			n, err := io.Copy(io.Discard, rr)
			if err != nil && !record.IsInvalidRecord(err) {
				_ = f.Close()
				return bytes, records, err
			}
			bytes += n
			records++
		}
		_ = f.Close()
	}
	return bytes, records, nil
}

func (p *pebbleImpl) startWriter() error {
	f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("%06d.log", p.nextNum)))
	if err != nil {
		return err
	}
	p.nextNum++
	// record.SyncConcurrency bounds the queued syncs, as pebble's commit
	// pipeline does with the same semaphore.
	p.sem = make(chan struct{}, record.SyncConcurrency)
	cfg := record.LogWriterConfig{
		QueueSemChan:        p.sem,
		WriteWALSyncOffsets: func() bool { return false },
	}
	var w io.Writer = f
	if !p.sync {
		w = writeCloser{f} // without Sync, the LogWriter never fsyncs
	}
	p.f, p.w = f, record.NewLogWriter(w, pebbleLogNum, cfg)
	return nil
}

type writeCloser struct{ f *os.File }

func (w writeCloser) Write(b []byte) (int, error) { return w.f.Write(b) }
func (w writeCloser) Close() error                { return w.f.Close() }

func (p *pebbleImpl) Append(b *batch) error {
	if p.w == nil {
		if err := p.startWriter(); err != nil {
			return err
		}
	}
	last := len(b.values) - 1
	for _, v := range b.values[:last] {
		if _, err := p.w.WriteRecord(v); err != nil {
			return err
		}
	}
	if !p.sync {
		_, err := p.w.WriteRecord(b.values[last])
		return err
	}
	var wg sync.WaitGroup
	var syncErr error
	wg.Add(1)
	p.sem <- struct{}{}
	if _, err := p.w.SyncRecord(b.values[last], &wg, &syncErr); err != nil {
		return err
	}
	wg.Wait()
	return syncErr
}

// Finish closes the writer, which waits for its flusher to write every
// queued block (and fsyncs only when the file was given with Sync).
func (p *pebbleImpl) Finish() error {
	if p.w == nil {
		return nil
	}
	err := p.w.Close()
	p.w, p.f = nil, nil
	return err
}

func (p *pebbleImpl) Close() error { return p.Finish() }

func (p *pebbleImpl) ReadAll() (bytes, records int64, err error) {
	names, err := p.logFiles()
	if err != nil {
		return 0, 0, err
	}
	if len(names) == 0 {
		return 0, 0, errors.New("pebble: no log files")
	}
	return p.replay(names)
}
