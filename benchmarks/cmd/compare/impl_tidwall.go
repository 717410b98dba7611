package main

import (
	"errors"

	"github.com/tidwall/wal"
)

// tidwallImpl stores each record as one entry of github.com/tidwall/wal,
// one WriteBatch per batch. Index i+1 holds record i (indexes start at 1).
type tidwallImpl struct {
	l    *wal.Log
	b    wal.Batch
	next uint64 // index of the next entry
}

func (t *tidwallImpl) Name() string { return "tidwall/wal" }

func (t *tidwallImpl) Durability(sync bool) string {
	if sync {
		return "NoSync=false: fsync per WriteBatch"
	}
	return "NoSync=true: page cache"
}

func (t *tidwallImpl) Unsupported(workloadKind) string { return "" }

func (t *tidwallImpl) Open(dir string, sync bool) error {
	o := *wal.DefaultOptions // 20 MB segments, binary format, copy on read
	o.NoSync = !sync
	l, err := wal.Open(dir, &o)
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		_ = l.Close()
		return err
	}
	t.l, t.next = l, last+1
	return nil
}

func (t *tidwallImpl) Append(b *batch) error {
	for _, v := range b.values {
		t.b.Write(t.next, v)
		t.next++
	}
	return t.l.WriteBatch(&t.b)
}

func (t *tidwallImpl) Close() error {
	if t.l == nil {
		return nil
	}
	err := t.l.Close()
	t.l = nil
	return err
}

func (t *tidwallImpl) ReadAll() (bytes, records int64, err error) {
	first, err := t.l.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	last, err := t.l.LastIndex()
	if err != nil {
		return 0, 0, err
	}
	if first == 0 {
		return 0, 0, errors.New("tidwall/wal: empty log")
	}
	for i := first; i <= last; i++ {
		data, err := t.l.Read(i)
		if err != nil {
			return bytes, records, err
		}
		bytes += int64(len(data))
		records++
	}
	return bytes, records, nil
}

func (t *tidwallImpl) ReadRecord(i int64) (int, error) {
	data, err := t.l.Read(uint64(i) + 1)
	return len(data), err
}
