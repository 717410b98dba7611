package main

import (
	"errors"
	"io"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// etcdImpl stores each record as one raft entry of etcd's WAL, one Save
// per batch. etcd's WAL is write-only between opens: it must read
// everything (ReadAll) before it can append, and has no random access.
type etcdImpl struct {
	w    *wal.WAL
	dir  string
	ents []*raftpb.Entry
	// idx backs ents[i].Index: the protobuf fields are pointers, and
	// pointing them into a reused array keeps Append from allocating them.
	idx    []uint64
	next   uint64
	term   uint64
	commit uint64
	st     raftpb.HardState
}

func (e *etcdImpl) Name() string { return "etcd wal" }

func (e *etcdImpl) Durability(sync bool) string {
	if sync {
		return "fdatasync per Save with entries (its default)"
	}
	return "SetUnsafeNoFsync: page cache (its encoder buffers up to a page in user space)"
}

func (e *etcdImpl) Unsupported(w workloadKind) string {
	if w == kindPointRead {
		return "no random access: entries are read only by ReadAll from a snapshot"
	}
	return ""
}

var etcdLog = zap.NewNop()

func (e *etcdImpl) Open(dir string, sync bool) error {
	e.dir = dir
	var w *wal.WAL
	if !wal.Exist(dir) {
		var err error
		if w, err = wal.Create(etcdLog, dir, nil); err != nil {
			return err
		}
		e.next = 1
	} else {
		var err error
		if w, err = e.openAndReplay(dir); err != nil {
			return err
		}
	}
	if !sync {
		w.SetUnsafeNoFsync()
	}
	e.w = w
	return nil
}

// openAndReplay opens an existing WAL the way etcd's server does: ReadAll
// (required before appending), and after a torn tail Repair and again.
func (e *etcdImpl) openAndReplay(dir string) (*wal.WAL, error) {
	for attempt := 0; ; attempt++ {
		w, err := wal.Open(etcdLog, dir, &walpb.Snapshot{})
		if err != nil {
			return nil, err
		}
		_, st, ents, err := w.ReadAll()
		if err == nil {
			e.next = 1
			if len(ents) > 0 {
				e.next = ents[len(ents)-1].GetIndex() + 1
			}
			e.commit = st.GetCommit()
			return w, nil
		}
		_ = w.Close()
		if attempt > 0 || !errors.Is(err, io.ErrUnexpectedEOF) || !wal.Repair(etcdLog, dir) {
			return nil, err
		}
	}
}

func (e *etcdImpl) Append(b *batch) error {
	if cap(e.ents) < len(b.values) {
		e.ents = make([]*raftpb.Entry, len(b.values))
		e.idx = make([]uint64, len(b.values))
		e.term = 1
		for i := range e.ents {
			e.ents[i] = &raftpb.Entry{Term: &e.term, Type: raftpb.EntryNormal.Enum(), Index: &e.idx[i]}
		}
	}
	ents := e.ents[:len(b.values)]
	for i, v := range b.values {
		e.idx[i], ents[i].Data = e.next, v
		e.next++
	}
	e.commit = e.next - 1
	e.st.Term, e.st.Commit = &e.term, &e.commit
	return e.w.Save(&e.st, ents)
}

func (e *etcdImpl) Close() error {
	if e.w == nil {
		return nil
	}
	err := e.w.Close()
	e.w = nil
	return err
}

// ReadAll opens a second, read-only handle (no file locks) and replays
// every entry: etcd's only way to read its WAL.
func (e *etcdImpl) ReadAll() (bytes, records int64, err error) {
	w, err := wal.OpenForRead(etcdLog, e.dir, &walpb.Snapshot{})
	if err != nil {
		return 0, 0, err
	}
	defer w.Close()
	_, _, ents, err := w.ReadAll()
	if err != nil {
		return 0, 0, err
	}
	for _, en := range ents {
		bytes += int64(len(en.Data))
	}
	return bytes, int64(len(ents)), nil
}
