package segment

import (
	"bytes"
	"errors"
)

// indexFile is what an index file held when recovery read it: its whole
// entries, and whether the file holds exactly them (false for a missing,
// oversized or unreadable file, or one ending in a torn partial entry).
type indexFile struct {
	entries []byte
	exact   bool
}

// readIndexFile reads x's file for adoptFile. A missing or garbage file
// is an inexact one, replaced later as a rebuilt index would be; an I/O
// error is returned.
func (s *Segment) readIndexFile(x *index) (indexFile, error) {
	entries, torn, err := x.readFile(s.fs)
	if err != nil && !errors.Is(err, errMissingIndex) && !errors.Is(err, errBadIndex) {
		return indexFile{}, err
	}
	return indexFile{entries: entries, exact: err == nil && !torn}, nil
}

// adoptFile installs the entries recovery rebuilt, against the file f
// read before: the prefix of entries the file already holds stays as
// written (fileLen) and the rest is pending, appended in place by the next
// index write (a flush, the roll, Close), which fsyncs it. Recovery thus
// writes no index file and fsyncs nothing when the file holds a prefix of
// the rebuilt entries, which is what a crash leaves in the common case:
// the entries written by the last index write point at batches that were
// durable before it (FlushIndexes runs after the .log's fdatasync).
//
// A file holding anything else (an entry the rebuilt set does not hold,
// because the .log lost bytes it pointed at or the index interval
// changed; a torn entry; garbage; no file) is marked stale: the next
// index write replaces it whole (temp, fsync, rename, directory fsync),
// never in place. Until then the file stays as the crash left it, which a
// recovery after another crash reads exactly as this one did: a resumed
// recovery keeps only its entries below the segment recovery point, a
// whole-segment recovery none.
func (x *index) adoptFile(entries []byte, f indexFile) {
	n := 0
	if f.exact && len(f.entries) <= len(entries) && bytes.Equal(f.entries, entries[:len(f.entries)]) {
		n = len(f.entries)
	}
	// The handle, if any, was opened for the old file state.
	_ = x.closeFile()
	x.install(entries, n, n != len(f.entries) || !f.exact)
}
