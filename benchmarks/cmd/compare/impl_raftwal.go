package main

import (
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// raftwalImpl stores each record as one raft.Log entry of
// github.com/hashicorp/raft-wal, one StoreLogs per batch. Index i+1 holds
// record i.
//
// raft-wal always fsyncs StoreLogs; it has no option to skip it. The
// no-fsync rows therefore inject, through its public WithSegmentFiler and
// types.VFS, a file system whose Sync does nothing. Its metadata store
// (bbolt) still syncs, but only on segment rotation.
type raftwalImpl struct {
	w *raftwal.WAL
	// meta is passed in (WithMetaStore) because raft-wal's Close does not
	// close the metadata store it creates itself: its bbolt file lock
	// would outlive Close and block the next Open of the same directory.
	meta *metadb.BoltMetaDB
	logs []*raft.Log
	next uint64
	// segmentBytes overrides the 64 MiB default (which raft-wal
	// preallocates per log) for the many-partitions workload.
	segmentBytes int
	log          raft.Log // reused by reads
}

func (r *raftwalImpl) Name() string { return "hashicorp/raft-wal" }

func (r *raftwalImpl) Durability(sync bool) string {
	if sync {
		return "fsync per StoreLogs (its only mode)"
	}
	return "page cache (Sync made a no-op through its VFS interface)"
}

func (r *raftwalImpl) Unsupported(workloadKind) string { return "" }

func (r *raftwalImpl) Open(dir string, sync bool) error {
	if err := mkdirAll(dir); err != nil {
		return err
	}
	// raft-wal's option type is unexported: pass each option as a func
	// value, with a no-op where an option does not apply.
	noop := func(*raftwal.WAL) {}
	filer, size := noop, noop
	if !sync {
		filer = raftwal.WithSegmentFiler(segment.NewFiler(dir, noSyncVFS{fs.New()}))
	}
	if r.segmentBytes > 0 {
		size = raftwal.WithSegmentSize(r.segmentBytes)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithLogger(hclog.NewNullLogger()), raftwal.WithMetaStore(meta), filer, size)
	if err != nil {
		_ = meta.Close()
		return err
	}
	r.w, r.meta = w, meta
	last, err := w.LastIndex()
	if err != nil {
		_ = r.Close()
		return err
	}
	r.next = last + 1
	return nil
}

func (r *raftwalImpl) Append(b *batch) error {
	if cap(r.logs) < len(b.values) {
		r.logs = make([]*raft.Log, len(b.values))
		for i := range r.logs {
			r.logs[i] = &raft.Log{Type: raft.LogCommand, Term: 1}
		}
	}
	logs := r.logs[:len(b.values)]
	for i, v := range b.values {
		logs[i].Index, logs[i].Data = r.next, v
		r.next++
	}
	return r.w.StoreLogs(logs)
}

func (r *raftwalImpl) Close() error {
	if r.w == nil {
		return nil
	}
	err := errors.Join(r.w.Close(), r.meta.Close())
	r.w, r.meta = nil, nil
	return err
}

func (r *raftwalImpl) ReadAll() (bytes, records int64, err error) {
	first, err := r.w.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	last, err := r.w.LastIndex()
	if err != nil {
		return 0, 0, err
	}
	for i := first; i <= last && i > 0; i++ {
		if err := r.w.GetLog(i, &r.log); err != nil {
			return bytes, records, err
		}
		bytes += int64(len(r.log.Data))
		records++
	}
	return bytes, records, nil
}

func (r *raftwalImpl) ReadRecord(i int64) (int, error) {
	if err := r.w.GetLog(uint64(i)+1, &r.log); err != nil {
		return 0, err
	}
	return len(r.log.Data), nil
}

// noSyncVFS is raft-wal's own file system with Sync removed.
type noSyncVFS struct{ *fs.FS }

func (v noSyncVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (v noSyncVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }
