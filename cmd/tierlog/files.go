package main

import (
	"flag"
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
)

// inDir returns path, or name inside it when path is a directory.
func (t *tool) inDir(path, name string) (string, error) {
	st, err := t.fs.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return t.fs.PathJoin(path, name), nil
	}
	return path, nil
}

type epochJSON struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

type epochsJSON struct {
	File    string      `json:"file"`
	Entries []epochJSON `json:"entries"`
}

func setupEpochs(*flag.FlagSet) func(*tool, []string, *output) error {
	return func(t *tool, args []string, out *output) error {
		path, err := t.inDir(args[0], epochcache.CheckpointFileName)
		if err != nil {
			return err
		}
		entries, err := t.readEpochs(path)
		if err != nil {
			return err
		}
		doc := epochsJSON{File: path, Entries: toEpochJSON(entries)}
		out.printf("%s: %d entries (epoch@startOffset)", path, len(entries))
		if len(entries) > 0 {
			out.printf("%s", epochcache.FormatEntries(entries))
		}
		out.setJSON(doc)
		return nil
	}
}

func (t *tool) readEpochs(path string) ([]epochcache.Entry, error) {
	data, err := t.readFile(path)
	if err != nil {
		return nil, err
	}
	return epochcache.ParseCheckpoint(path, data)
}

func toEpochJSON(entries []epochcache.Entry) []epochJSON {
	out := make([]epochJSON, len(entries))
	for i, e := range entries {
		out[i] = epochJSON{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

type snapshotEntryJSON struct {
	ProducerID            int64 `json:"producerId"`
	ProducerEpoch         int16 `json:"producerEpoch"`
	LastSequence          int32 `json:"lastSequence"`
	LastOffset            int64 `json:"lastOffset"`
	OffsetDelta           int32 `json:"offsetDelta"`
	Timestamp             int64 `json:"timestamp"`
	CoordinatorEpoch      int32 `json:"coordinatorEpoch"`
	CurrentTxnFirstOffset int64 `json:"currentTxnFirstOffset"`
}

type snapshotJSON struct {
	File string `json:"file"`
	// Offset is the offset in the file name: the snapshot holds the state
	// of every batch below it.
	Offset    int64               `json:"offset"`
	Producers []snapshotEntryJSON `json:"producers"`
}

func setupSnapshot(*flag.FlagSet) func(*tool, []string, *output) error {
	return func(t *tool, args []string, out *output) error {
		path := args[0]
		offset, kind, ok := log.ParseSegmentFileName(baseName(path))
		if !ok || kind != "snapshot" {
			return usagef("%s: want a producer snapshot file name (<20-digit offset>.snapshot)", path)
		}
		data, err := t.readFile(path)
		if err != nil {
			return err
		}
		entries, err := log.DecodeProducerSnapshot(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		doc := snapshotJSON{File: path, Offset: offset, Producers: []snapshotEntryJSON{}}
		out.printf("%s: producer state below offset %d, %d producers", path, offset, len(entries))
		for _, e := range entries {
			doc.Producers = append(doc.Producers, snapshotEntryJSON(e))
			out.printf("producer=%d epoch=%d lastSequence=%d lastOffset=%d offsetDelta=%d timestamp=%d coordinatorEpoch=%d txnFirstOffset=%d",
				e.ProducerID, e.ProducerEpoch, e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp, e.CoordinatorEpoch, e.CurrentTxnFirstOffset)
		}
		out.setJSON(doc)
		return nil
	}
}

type checkpointJSON struct {
	File           string `json:"file"`
	LogStartOffset int64  `json:"logStartOffset"`
	RecoveryPoint  int64  `json:"recoveryPoint"`
}

func setupCheckpoint(*flag.FlagSet) func(*tool, []string, *output) error {
	return func(t *tool, args []string, out *output) error {
		path, err := t.inDir(args[0], log.OffsetsCheckpointFileName)
		if err != nil {
			return err
		}
		c, err := t.readOffsetsCheckpoint(path)
		if err != nil {
			return err
		}
		out.printf("%s: log-start-offset=%d recovery-point=%d", path, c.LogStartOffset, c.RecoveryPoint)
		out.setJSON(checkpointJSON{File: path, LogStartOffset: c.LogStartOffset, RecoveryPoint: c.RecoveryPoint})
		return nil
	}
}

func (t *tool) readOffsetsCheckpoint(path string) (log.OffsetsCheckpoint, error) {
	data, err := t.readFile(path)
	if err != nil {
		return log.OffsetsCheckpoint{}, err
	}
	return log.ParseOffsetsCheckpoint(path, data)
}

// epochEntries is the directory's leader-epoch-checkpoint as cache
// entries.
func (d *describeJSON) epochEntries() []epochcache.Entry {
	out := make([]epochcache.Entry, len(d.Epochs))
	for i, e := range d.Epochs {
		out[i] = epochcache.Entry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}
