package main

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// tierlogImpl drives log.UnifiedLog as a Kafka leader would: one
// AppendAsLeader per produce batch, Read for fetches.
type tierlogImpl struct {
	l   *log.UnifiedLog
	buf []byte // reused fetch buffer
}

func (t *tierlogImpl) Name() string { return "tierlog" }

func (t *tierlogImpl) Durability(sync bool) string {
	if sync {
		return "FlushMessages=1: fdatasync of the segment (and epoch checkpoint) before Append returns"
	}
	return "page cache; Kafka's default (flush.messages unset, durability by replication)"
}

func (t *tierlogImpl) Unsupported(workloadKind) string { return "" }

func (t *tierlogImpl) Open(dir string, sync bool) error {
	o := log.Options{FS: vfs.Default}
	if sync {
		o.FlushMessages = 1
	}
	l, err := log.Open(dir, o)
	if err != nil {
		return err
	}
	t.l = l
	return nil
}

func (t *tierlogImpl) Append(b *batch) error {
	if _, err := t.l.AppendAsLeader(b.kafka, 0, log.OriginClient); err != nil {
		return err
	}
	// AppendAsLeader stamped the base offset into the buffer; a client
	// sends 0, so reset it before the buffer is sent again.
	kb, err := record.ReadBatch(b.kafka)
	if err != nil {
		return err
	}
	kb.SetBaseOffset(0)
	return nil
}

func (t *tierlogImpl) Close() error {
	if t.l == nil {
		return nil
	}
	err := t.l.Close()
	t.l = nil
	return err
}

// Abandon releases the log without the clean-close work (used to tear
// down the partitions workload quickly).
func (t *tierlogImpl) Abandon() error {
	if t.l == nil {
		return nil
	}
	err := t.l.Delete()
	t.l = nil
	return err
}

// fetchBytes is the Kafka fetch size used for the sequential read
// (fetch.max.bytes-like: one Read returns up to this many bytes).
const fetchBytes = 1 << 20

func (t *tierlogImpl) ReadAll() (bytes, records int64, err error) {
	if cap(t.buf) < 2*fetchBytes {
		t.buf = make([]byte, 0, 2*fetchBytes)
	}
	offset := t.l.LogStartOffset()
	end := t.l.LogEndOffset()
	for offset < end {
		info, err := t.l.Read(t.buf, offset, fetchBytes, log.IsolationLogEnd, true)
		if err != nil {
			return bytes, records, err
		}
		if len(info.Records) == 0 {
			return bytes, records, fmt.Errorf("tierlog: empty read at %d below log end %d", offset, end)
		}
		bytes += int64(len(info.Records))
		for rest := info.Records; len(rest) > 0; {
			kb, err := record.ReadBatch(rest)
			if err != nil {
				return bytes, records, err
			}
			records += kb.NextOffset() - max(kb.BaseOffset(), offset)
			offset = kb.NextOffset()
			rest = rest[kb.Size():]
		}
		t.buf = info.Records[:0]
	}
	return bytes, records, nil
}

// ReadRecord fetches offset i with maxBytes 1 and minOneMessage: Kafka's
// answer is the whole batch holding the offset. It asks ReadSlice, the
// broker's zero-copy fetch path: on vfs.Default the segments are mapped,
// so the batch comes back as a slice of the mapping (FileSlice.Data, no
// system call, no copy), which a broker writes to its socket. Without a
// mapping it falls back to Read, which copies the batch with one pread.
func (t *tierlogImpl) ReadRecord(i int64) (int, error) {
	sl, err := t.l.ReadSlice(i, 1, log.IsolationLogEnd, true)
	if err != nil {
		return 0, err
	}
	n := len(sl.Data)
	sl.Release()
	if n > 0 {
		return n, nil
	}
	if cap(t.buf) < 2*fetchBytes {
		t.buf = make([]byte, 0, 2*fetchBytes)
	}
	info, err := t.l.Read(t.buf, i, 1, log.IsolationLogEnd, true)
	if err != nil {
		return 0, err
	}
	if len(info.Records) == 0 {
		return 0, fmt.Errorf("tierlog: offset %d: no records", i)
	}
	t.buf = info.Records[:0]
	return len(info.Records), nil
}
