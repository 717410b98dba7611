package logmanager

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"regexp"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// The per-directory checkpoint files, in Kafka's names and text format
// (CheckpointFile with OffsetCheckpointFile's entries):
//
//	0                  version
//	2                  number of entries
//	orders 0 1200      <topic> <partition> <offset>
//	orders 3 877
//
// Entries are written sorted by topic and partition, each line ends in
// '\n'. Each file is replaced atomically (internal/atomicfile: temp file,
// fsync, rename, directory fsync; the rename is the commit point).
const (
	// HighWatermarkCheckpointFile holds each log's high watermark. Kafka:
	// ReplicaManager's replication-offset-checkpoint.
	HighWatermarkCheckpointFile = "replication-offset-checkpoint"
	// RecoveryPointCheckpointFile holds each log's recovery point. Kafka:
	// LogManager's recovery-point-offset-checkpoint.
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	// LogStartOffsetCheckpointFile holds each log's log start offset.
	// Kafka: LogManager's log-start-offset-checkpoint.
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// PartitionMetadataFile, in a partition's directory, holds its topic
	// id: "version: 0\ntopic_id: <id>" (Kafka's PartitionMetadataFile).
	PartitionMetadataFile = "partition.metadata"
	// CleanShutdownFile, in a log directory, exists while every log in it
	// is closed cleanly: Close writes it last, Open removes it (durably)
	// first and opens the logs as clean if it was there. Kafka:
	// .kafka_cleanshutdown (empty, as before Kafka 3.7 added a broker
	// epoch to it).
	CleanShutdownFile = log.CleanShutdownFileName
)

// CheckpointEntry is one line of a checkpoint file.
type CheckpointEntry struct {
	Topic     string
	Partition int32
	Offset    int64
}

// EncodeCheckpoint returns the file's bytes for entries, sorted. Pure.
func EncodeCheckpoint(entries []CheckpointEntry) []byte {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b CheckpointEntry) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	b := []byte("0\n")
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = append(b, e.Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Partition), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Offset, 10)
		b = append(b, '\n')
	}
	return b
}

// ParseCheckpoint parses a checkpoint file as Kafka's CheckpointFile.read
// does: version 0, then the entry count, then exactly that many lines of
// three whitespace-separated fields. Anything else is a *CheckpointError
// naming the line (Kafka: "Malformed line in checkpoint file", "Expected
// N entries"). tierlog also refuses a negative offset, a topic name Kafka
// would not accept and a partition listed twice. Pure.
func ParseCheckpoint(path string, data []byte) ([]CheckpointEntry, error) {
	bad := func(line int, format string, args ...any) error {
		return &CheckpointError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, bad(1, "empty file")
	}
	if data[len(data)-1] != '\n' {
		return nil, bad(bytes.Count(data, []byte{'\n'})+1, "last line not terminated (torn write)")
	}
	lines := bytes.Split(data[:len(data)-1], []byte{'\n'})
	if string(lines[0]) != "0" {
		return nil, bad(1, "unsupported version %q", lines[0])
	}
	if len(lines) < 2 {
		return nil, bad(2, "missing entry count")
	}
	n, err := strconv.Atoi(string(lines[1]))
	if err != nil || n < 0 {
		return nil, bad(2, "malformed entry count %q", lines[1])
	}
	if n != len(lines)-2 {
		return nil, bad(2, "expected %d entries, found %d", n, len(lines)-2)
	}
	out := make([]CheckpointEntry, 0, n)
	seen := make(map[key]bool, n)
	for i, line := range lines[2:] {
		f := bytes.Fields(line)
		if len(f) != 3 {
			return nil, bad(i+3, "malformed line %q (want \"<topic> <partition> <offset>\")", line)
		}
		p, perr := strconv.ParseInt(string(f[1]), 10, 32)
		o, oerr := strconv.ParseInt(string(f[2]), 10, 64)
		switch {
		case validTopic(string(f[0])) != "":
			return nil, bad(i+3, "%s", validTopic(string(f[0])))
		case perr != nil || p < 0:
			return nil, bad(i+3, "malformed partition %q", f[1])
		case oerr != nil || o < 0:
			return nil, bad(i+3, "malformed offset %q", f[2])
		}
		k := key{string(f[0]), int32(p)}
		if seen[k] {
			return nil, bad(i+3, "partition %s listed twice", k)
		}
		seen[k] = true
		out = append(out, CheckpointEntry{Topic: k.topic, Partition: k.partition, Offset: o})
	}
	return out, nil
}

// readFile returns the file's bytes; found is false if it does not exist.
func readFile(fsys vfs.FS, path string) (data []byte, found bool, err error) {
	f, err := fsys.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("logmanager: open %s: %w", path, err)
	}
	data, err = io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("logmanager: read %s: %w", path, err)
	}
	return data, true, nil
}

// readCheckpoint reads one checkpoint file of dir as a map; a missing
// file is an empty map. A temp file an interrupted write left is removed
// first.
func readCheckpoint(fsys vfs.FS, dir, name string) (map[key]int64, error) {
	path := fsys.PathJoin(dir, name)
	if err := atomicfile.RemoveTemp(fsys, path); err != nil {
		return nil, fmt.Errorf("logmanager: %w", err)
	}
	data, found, err := readFile(fsys, path)
	if err != nil || !found {
		return map[key]int64{}, err
	}
	entries, err := ParseCheckpoint(path, data)
	if err != nil {
		return nil, err
	}
	m := make(map[key]int64, len(entries))
	for _, e := range entries {
		m[key{e.Topic, e.Partition}] = e.Offset
	}
	return m, nil
}

// writeCheckpoint replaces one checkpoint file atomically.
func writeCheckpoint(fsys vfs.FS, dir, name string, entries []CheckpointEntry) error {
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, name), EncodeCheckpoint(entries)); err != nil {
		return fmt.Errorf("logmanager: write %s: %w", name, err)
	}
	return nil
}

// encodePartitionMetadata is Kafka's PartitionMetadataFileFormatter.
func encodePartitionMetadata(id remote.UUID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

var metadataLine = regexp.MustCompile(`^([a-z_]+):\s+(\S+)$`)

// parsePartitionMetadata parses partition.metadata as Kafka's
// PartitionMetadataReadBuffer does: "version: 0", then "topic_id: <id>".
func parsePartitionMetadata(path string, data []byte) (remote.UUID, error) {
	bad := func(line int, format string, args ...any) error {
		return &CheckpointError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
	want := []string{"version", "topic_id"}
	var vals [2]string
	if len(lines) != 2 {
		return remote.UUID{}, bad(len(lines), "want 2 lines, found %d", len(lines))
	}
	for i, line := range lines {
		m := metadataLine.FindSubmatch(line)
		if m == nil || string(m[1]) != want[i] {
			return remote.UUID{}, bad(i+1, "want \"%s: <value>\", got %q", want[i], line)
		}
		vals[i] = string(m[2])
	}
	if vals[0] != "0" {
		return remote.UUID{}, bad(1, "unsupported version %q", vals[0])
	}
	id, err := remote.ParseUUID(vals[1])
	if err != nil || id == (remote.UUID{}) {
		return remote.UUID{}, bad(2, "bad topic id %q", vals[1])
	}
	return id, nil
}

// readPartitionMetadata returns the topic id stored in a partition's
// directory, the zero UUID when it has none.
func readPartitionMetadata(fsys vfs.FS, dir string) (remote.UUID, error) {
	path := fsys.PathJoin(dir, PartitionMetadataFile)
	if err := atomicfile.RemoveTemp(fsys, path); err != nil {
		return remote.UUID{}, fmt.Errorf("logmanager: %w", err)
	}
	data, found, err := readFile(fsys, path)
	if err != nil || !found {
		return remote.UUID{}, err
	}
	return parsePartitionMetadata(path, data)
}

func writePartitionMetadata(fsys vfs.FS, dir string, id remote.UUID) error {
	if err := atomicfile.Write(fsys, fsys.PathJoin(dir, PartitionMetadataFile), encodePartitionMetadata(id)); err != nil {
		return fmt.Errorf("logmanager: write %s: %w", PartitionMetadataFile, err)
	}
	return nil
}
