package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"sort"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
)

// segmentFilesJSON is one segment of a partition directory. A size of -1
// means the file is absent.
type segmentFilesJSON struct {
	BaseOffset     int64 `json:"baseOffset"`
	LogBytes       int64 `json:"logBytes"`
	IndexBytes     int64 `json:"indexBytes"`
	TimeIndexBytes int64 `json:"timeIndexBytes"`
	TxnIndexBytes  int64 `json:"txnIndexBytes"`
}

type describeJSON struct {
	Dir string `json:"dir"`
	// LogStartOffset and RecoveryPoint come from the offsets checkpoint;
	// -1 without one (a log never flushed).
	LogStartOffset int64 `json:"logStartOffset"`
	RecoveryPoint  int64 `json:"recoveryPoint"`
	// LocalLogStartOffset is max(log start, first segment's base), as
	// log.Open sets it.
	LocalLogStartOffset int64 `json:"localLogStartOffset"`
	// LogEndOffset is the offset after the last readable batch of the
	// last segment.
	LogEndOffset      int64              `json:"logEndOffset"`
	CleanShutdown     bool               `json:"cleanShutdown"`
	Epochs            []epochJSON        `json:"epochs"`
	ProducerSnapshots []int64            `json:"producerSnapshots"`
	Segments          []segmentFilesJSON `json:"segments"`
	// OtherFiles are names no part of the log owns, and temporary files
	// a crash left (Open deletes those).
	OtherFiles []string `json:"otherFiles,omitempty"`
	Problems   []string `json:"problems,omitempty"`

	// offsetsDamaged and epochsDamaged say that the checkpoint exists
	// but could not be parsed (its problem is listed).
	offsetsDamaged, epochsDamaged bool
}

func setupDescribe(*flag.FlagSet) func(*tool, []string, *output) error {
	return func(t *tool, args []string, out *output) error {
		d, err := t.describeDir(args[0])
		if err != nil {
			return err
		}
		printDescribe(d, out)
		out.setJSON(d)
		var probs problems
		probs.list = d.Problems
		return probs.err()
	}
}

// describeDir reads a partition directory file by file. It never opens
// the log: log.Open would recover segments, delete temporary files and
// remove the clean-shutdown marker, changing what is being inspected.
func (t *tool) describeDir(dir string) (*describeJSON, error) {
	names, err := t.fs.List(dir)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	d := &describeJSON{Dir: dir, LogStartOffset: -1, RecoveryPoint: -1, LogEndOffset: -1,
		Epochs: []epochJSON{}, ProducerSnapshots: []int64{}, Segments: []segmentFilesJSON{}}
	var probs problems
	segs := map[int64]*segmentFilesJSON{}
	seg := func(base int64) *segmentFilesJSON {
		if segs[base] == nil {
			segs[base] = &segmentFilesJSON{BaseOffset: base, LogBytes: -1, IndexBytes: -1, TimeIndexBytes: -1, TxnIndexBytes: -1}
		}
		return segs[base]
	}
	for _, name := range names {
		path := t.fs.PathJoin(dir, name)
		offset, kind, ok := log.ParseSegmentFileName(name)
		if !ok || kind == "tmp" {
			switch name {
			case log.OffsetsCheckpointFileName, epochcache.CheckpointFileName:
			case log.CleanShutdownFileName:
				d.CleanShutdown = true
			default:
				d.OtherFiles = append(d.OtherFiles, name)
			}
			continue
		}
		if kind == "snapshot" {
			d.ProducerSnapshots = append(d.ProducerSnapshots, offset)
			continue
		}
		if kind == "producerbatches" {
			continue // the dedup windows of the snapshot at the same offset
		}
		st, err := t.fs.Stat(path)
		if err != nil {
			return nil, err
		}
		s := seg(offset)
		switch kind {
		case "log":
			s.LogBytes = st.Size()
		case "index":
			s.IndexBytes = st.Size()
		case "timeindex":
			s.TimeIndexBytes = st.Size()
		case "txnindex":
			s.TxnIndexBytes = st.Size()
		}
	}
	sort.Slice(d.ProducerSnapshots, func(i, j int) bool { return d.ProducerSnapshots[i] < d.ProducerSnapshots[j] })
	for _, s := range segs {
		if s.LogBytes < 0 {
			probs.addf("%s: segment %d has index files but no .log", dir, s.BaseOffset)
		}
		d.Segments = append(d.Segments, *s)
	}
	sort.Slice(d.Segments, func(i, j int) bool { return d.Segments[i].BaseOffset < d.Segments[j].BaseOffset })

	c, err := t.readOffsetsCheckpoint(t.fs.PathJoin(dir, log.OffsetsCheckpointFileName))
	switch {
	case err == nil:
		d.LogStartOffset, d.RecoveryPoint = c.LogStartOffset, c.RecoveryPoint
	case !errors.Is(err, iofs.ErrNotExist):
		probs.addf("%s", oneLine(err))
		d.offsetsDamaged = true
	}
	entries, err := t.readEpochs(t.fs.PathJoin(dir, epochcache.CheckpointFileName))
	switch {
	case err == nil:
		d.Epochs = toEpochJSON(entries)
	case !errors.Is(err, iofs.ErrNotExist):
		probs.addf("%s", oneLine(err))
		d.epochsDamaged = true
	}
	if err := t.describeOffsets(d, &probs); err != nil {
		return nil, err
	}
	d.Problems = probs.list
	return d, nil
}

// describeOffsets sets the local log start and the log end offset: the
// end of the last readable batch of the last segment with a .log.
func (t *tool) describeOffsets(d *describeJSON, probs *problems) error {
	last := -1
	for i, s := range d.Segments {
		if s.LogBytes >= 0 {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	d.LocalLogStartOffset = max(d.LogStartOffset, d.Segments[0].BaseOffset)
	s := d.Segments[last]
	d.LogEndOffset = s.BaseOffset
	path := t.fs.PathJoin(d.Dir, fmt.Sprintf("%020d.log", s.BaseOffset))
	r, err := t.openBatches(path)
	if err != nil {
		return err
	}
	defer r.close()
	for {
		b, pos, err := r.next()
		if err == io.EOF {
			return nil
		}
		var fe *frameError
		if errors.As(err, &fe) {
			probs.addf("%s: %v (the log end offset is where the readable batches end)", path, fe)
			return nil
		}
		if err != nil {
			return err
		}
		if err := b.Validate(); err != nil {
			probs.addf("%s: batch at position %d (base offset %d): %s", path, pos, b.BaseOffset(), reasonOf(err))
			return nil
		}
		d.LogEndOffset = b.NextOffset()
	}
}

func printDescribe(d *describeJSON, out *output) {
	orNone := func(v int64, what string) string {
		if d.offsetsDamaged {
			return "unknown (offsets-checkpoint damaged, see below)"
		}
		if v < 0 {
			return "none (no offsets-checkpoint: the log was never flushed)"
		}
		return fmt.Sprintf("%d (%s)", v, what)
	}
	out.printf("partition directory %s (files read one by one; the log is not opened)", d.Dir)
	out.printf("log start offset:        %s", orNone(d.LogStartOffset, "offsets-checkpoint"))
	if len(d.Segments) == 0 {
		out.printf("segments:                none")
	} else {
		out.printf("local log start offset:  %d (max of log start and first segment base)", d.LocalLogStartOffset)
		out.printf("log end offset:          %d (end of the last readable batch)", d.LogEndOffset)
	}
	out.printf("recovery point:          %s", orNone(d.RecoveryPoint, "offsets-checkpoint"))
	out.printf("high watermark:          not kept in the partition directory (the broker checkpoints it)")
	if d.CleanShutdown {
		out.printf("clean shutdown marker:   present (the next Open skips recovery)")
	} else {
		out.printf("clean shutdown marker:   absent (the next Open recovers from the recovery point)")
	}
	epochs := "none"
	if d.epochsDamaged {
		epochs = "unknown (leader-epoch-checkpoint damaged, see below)"
	}
	if len(d.Epochs) > 0 {
		var list []string
		for _, e := range d.Epochs {
			list = append(list, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
		}
		epochs = strings.Join(list, " ") + " (epoch@startOffset)"
	}
	out.printf("leader epochs:           %s", epochs)
	var snaps []string
	for _, o := range d.ProducerSnapshots {
		snaps = append(snaps, fmt.Sprint(o))
	}
	out.printf("producer snapshots:      [%s]", strings.Join(snaps, " "))
	for i, s := range d.Segments {
		active := ""
		if i == len(d.Segments)-1 {
			active = " (active)"
		}
		out.printf("segment %d: log=%s index=%s timeindex=%s txnindex=%s%s", s.BaseOffset,
			size(s.LogBytes), size(s.IndexBytes), size(s.TimeIndexBytes), size(s.TxnIndexBytes), active)
	}
	if len(d.OtherFiles) > 0 {
		out.printf("other files:             %s", strings.Join(d.OtherFiles, " "))
	}
	for _, p := range d.Problems {
		out.printf("PROBLEM %s", p)
	}
}

func size(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("%dB", n)
}
