package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"

	"github.com/tierlog/tierlog/log"
)

type indexEntryJSON struct {
	Offset    int64  `json:"offset"`
	Position  *int64 `json:"position,omitempty"`
	Timestamp *int64 `json:"timestamp,omitempty"`
	// Problem says why the entry does not match the .log.
	Problem string `json:"problem,omitempty"`
}

type dumpIndexJSON struct {
	File       string           `json:"file"`
	Kind       string           `json:"kind"`
	BaseOffset int64            `json:"baseOffset"`
	Verified   bool             `json:"verified"`
	Entries    []indexEntryJSON `json:"entries"`
	Problems   []string         `json:"problems,omitempty"`
}

func setupDumpIndex(fl *flag.FlagSet) func(*tool, []string, *output) error {
	noVerify := fl.Bool("no-verify", false, "do not check the entries against the .log beside the index")
	return func(t *tool, args []string, out *output) error {
		return t.dumpIndex(args[0], !*noVerify, out)
	}
}

// logBatch is what index verification needs of one batch of the .log.
type logBatch struct {
	position     int64
	lastOffset   int64
	maxTimestamp int64
}

// segmentBatches scans a .log and returns its batches by position and by
// last offset. A batch that fails its CRC still counts (the index was
// written for it); where framing fails the scan stops and the error is
// returned with what was read.
func (t *tool) segmentBatches(path string) (byPos map[int64]logBatch, byLast map[int64]logBatch, size int64, err error) {
	r, err := t.openBatches(path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer r.close()
	byPos, byLast = map[int64]logBatch{}, map[int64]logBatch{}
	for {
		b, pos, err := r.next()
		if err == io.EOF {
			return byPos, byLast, r.size, nil
		}
		if err != nil {
			return byPos, byLast, r.size, err
		}
		lb := logBatch{position: pos, lastOffset: b.LastOffset(), maxTimestamp: b.MaxTimestamp()}
		byPos[pos], byLast[lb.lastOffset] = lb, lb
	}
}

func (t *tool) dumpIndex(path string, verify bool, out *output) error {
	name := baseName(path)
	base, kind, ok := log.ParseSegmentFileName(name)
	if !ok || (kind != "index" && kind != "timeindex") {
		return usagef("%s: want a segment index file name (<20-digit base offset>.index or .timeindex)", path)
	}
	data, err := t.readFile(path)
	if err != nil {
		return err
	}
	doc := dumpIndexJSON{File: path, Kind: kind, BaseOffset: base, Entries: []indexEntryJSON{}}
	var probs problems
	problem := func(format string, args ...any) string {
		msg := probs.addf("%s: "+format, append([]any{path}, args...)...)
		out.printf("PROBLEM %s", msg)
		return msg
	}
	out.printf("dumping %s (%s of segment %d, %d bytes)", path, kind, base, len(data))

	var byPos, byLast map[int64]logBatch
	var logSize int64
	if verify {
		logPath := strings.TrimSuffix(path, "."+kind) + ".log"
		byPos, byLast, logSize, err = t.segmentBatches(logPath)
		var fe *frameError
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			out.printf("not verified: no %s beside it", baseName(logPath))
			verify = false
		case errors.As(err, &fe):
			problem("%s: %v (entries past it cannot match)", baseName(logPath), fe)
		case err != nil:
			return err
		}
	}
	doc.Verified = verify
	if kind == "index" {
		entries, derr := log.DecodeOffsetIndex(path, base, data)
		for i, e := range entries {
			ej := indexEntryJSON{Offset: e.Offset, Position: &e.Position}
			if verify {
				ej.Problem = checkOffsetEntry(e, byPos, logSize)
			}
			out.printf("offset=%d position=%d%s", e.Offset, e.Position, mark(ej.Problem))
			if ej.Problem != "" {
				problem("entry %d: %s", i, ej.Problem)
			}
			doc.Entries = append(doc.Entries, ej)
		}
		if derr != nil {
			out.printf("PROBLEM %s", probs.addf("%s", oneLine(derr))) // names the file
		}
	} else {
		entries, derr := log.DecodeTimeIndex(path, base, data)
		for i, e := range entries {
			ej := indexEntryJSON{Offset: e.Offset, Timestamp: &e.Timestamp}
			if verify {
				ej.Problem = checkTimeEntry(e, byLast)
			}
			out.printf("timestamp=%d offset=%d%s", e.Timestamp, e.Offset, mark(ej.Problem))
			if ej.Problem != "" {
				problem("entry %d: %s", i, ej.Problem)
			}
			doc.Entries = append(doc.Entries, ej)
		}
		if derr != nil {
			out.printf("PROBLEM %s", probs.addf("%s", oneLine(derr))) // names the file
		}
	}
	out.printf("%d entries", len(doc.Entries))
	doc.Problems = probs.list
	out.setJSON(doc)
	return probs.err()
}

func mark(problem string) string {
	if problem == "" {
		return ""
	}
	return "  <- " + problem
}

// checkOffsetEntry: an offset index entry names a batch's last offset and
// the position where that batch starts (Kafka's OffsetIndex).
func checkOffsetEntry(e log.IndexEntry, byPos map[int64]logBatch, logSize int64) string {
	if e.Position >= logSize {
		return fmt.Sprintf("position %d at or past the end of the .log (%d bytes)", e.Position, logSize)
	}
	b, ok := byPos[e.Position]
	if !ok {
		return fmt.Sprintf("no batch starts at position %d", e.Position)
	}
	if b.lastOffset != e.Offset {
		return fmt.Sprintf("the batch at position %d ends at offset %d, not %d", e.Position, b.lastOffset, e.Offset)
	}
	return ""
}

// checkTimeEntry: a time index entry names the batch holding the largest
// timestamp so far by its last offset, and that timestamp (Kafka's
// TimeIndex, checked as DumpLogSegments does).
func checkTimeEntry(e log.TimeIndexEntry, byLast map[int64]logBatch) string {
	b, ok := byLast[e.Offset]
	if !ok {
		return fmt.Sprintf("no batch ends at offset %d", e.Offset)
	}
	if b.maxTimestamp != e.Timestamp {
		return fmt.Sprintf("the batch ending at offset %d has max timestamp %d, not %d", e.Offset, b.maxTimestamp, e.Timestamp)
	}
	return ""
}

// readFile reads a whole (small) file: indexes, checkpoints, snapshots.
func (t *tool) readFile(path string) ([]byte, error) {
	f, err := t.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
