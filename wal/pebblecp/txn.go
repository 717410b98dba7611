package pebblecp

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/wal"
)

// txn is one mutating call: an indexed batch plus decoded rows the call
// changed, written back by flush. Reads of rows not cached go through the
// batch, so they see the call's own earlier writes.
type txn struct {
	b     *pebble.Batch
	now   time.Time
	nowMs int64
	// db is the database b belongs to (for a step's own batch).
	db *pebble.DB
	// parent, if set, is the group transaction this one is a step of
	// (see step): rows this step has not touched yet are copied from the
	// parent's, so a step that fails leaves the parent as it was, and b
	// is a write-only batch that merge applies to the parent's.
	parent *txn

	logs      map[wal.TopicIDPartition]*logEntry
	files     map[string]*fileEntry
	producers map[producerKeyT]*wal.ProducerState
	// dirtyProducers are the producer states to write back.
	dirtyProducers map[producerKeyT]bool
}

type logEntry struct {
	row   logRow
	found bool
	dirty bool
}

type fileEntry struct {
	row   fileRow
	found bool
	dirty bool
	// markedBefore is the mark time when loaded (to move its queue key).
	loadedState uint8
}

type producerKeyT struct {
	tp  wal.TopicIDPartition
	pid int64
}

func newTxn(b *pebble.Batch, now time.Time) *txn {
	return &txn{b: b, now: now, nowMs: millis(now),
		logs:           map[wal.TopicIDPartition]*logEntry{},
		files:          map[string]*fileEntry{},
		producers:      map[producerKeyT]*wal.ProducerState{},
		dirtyProducers: map[producerKeyT]bool{},
	}
}

// reader is what reads of tx go through: the group's indexed batch for a
// step, which sees the earlier steps merged into it.
func (tx *txn) reader() pebble.Reader {
	if tx.parent != nil {
		return tx.parent.reader()
	}
	return tx.b
}

// step starts a step of tx: a transaction over tx's state whose changes
// reach tx only through merge. The caller closes the step's batch.
func (tx *txn) step() *txn {
	c := newTxn(tx.db.NewBatch(), tx.now)
	c.db, c.parent = tx.db, tx
	return c
}

// merge makes a step's changes part of tx. An error leaves tx unusable
// (the group fails as a whole).
func (tx *txn) merge(c *txn) error {
	if err := tx.b.Apply(c.b, nil); err != nil {
		return fmt.Errorf("pebblecp: merge a commit into its group: %w", err)
	}
	for k, e := range c.logs {
		tx.logs[k] = e
	}
	for k, e := range c.files {
		tx.files[k] = e
	}
	for k, st := range c.producers {
		tx.producers[k] = st
	}
	for k := range c.dirtyProducers {
		tx.dirtyProducers[k] = true
	}
	return nil
}

// get reads key through r; found is false if absent. decode gets the
// value before the buffer is released.
func get(r pebble.Reader, key []byte, decode func(v []byte) error) (bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pebblecp: get %x: %w", key, err)
	}
	defer closer.Close()
	return true, decode(v)
}

func readLog(r pebble.Reader, tp wal.TopicIDPartition) (logRow, bool, error) {
	var row logRow
	key := logKey(tp)
	found, err := get(r, key, func(v []byte) (err error) { row, err = decodeLog(key, v); return })
	return row, found, err
}

// log returns the partition's row (found false if none). The entry is
// cached: change row and set dirty to write it back.
func (tx *txn) log(tp wal.TopicIDPartition) (*logEntry, error) {
	if e, ok := tx.logs[tp]; ok {
		return e, nil
	}
	if tx.parent != nil {
		e, err := tx.parent.log(tp)
		if err != nil {
			return nil, err
		}
		if !mutation.Disabled(mutation.GroupCommitStepUndo) {
			c := *e
			e = &c
		}
		tx.logs[tp] = e
		return e, nil
	}
	e := &logEntry{}
	if tp.Partition >= 0 {
		row, found, err := readLog(tx.b, tp)
		if err != nil {
			return nil, err
		}
		e.row, e.found = row, found
	}
	tx.logs[tp] = e
	return e, nil
}

// knownLog returns tp's log entry in tx, with known false for a
// partition the control plane does not have: no row, or the zero topic
// id (as lookupLog treats reads).
func (tx *txn) knownLog(tp wal.TopicIDPartition) (l *logEntry, known bool, err error) {
	l, err = tx.log(tp)
	if err != nil {
		return nil, false, err
	}
	return l, l.found && !tp.TopicID.IsZero(), nil
}

func readFile(r pebble.Reader, objectKey string) (fileRow, bool, error) {
	var row fileRow
	key := fileKey(objectKey)
	found, err := get(r, key, func(v []byte) (err error) { row, err = decodeFile(key, v); return })
	return row, found, err
}

func (tx *txn) file(objectKey string) (*fileEntry, error) {
	if e, ok := tx.files[objectKey]; ok {
		return e, nil
	}
	if tx.parent != nil {
		pe, err := tx.parent.file(objectKey)
		if err != nil {
			return nil, err
		}
		e := *pe
		tx.files[objectKey] = &e
		return &e, nil
	}
	row, found, err := readFile(tx.b, objectKey)
	if err != nil {
		return nil, err
	}
	e := &fileEntry{row: row, found: found, loadedState: row.State}
	tx.files[objectKey] = e
	return e, nil
}

func readProducer(r pebble.Reader, tp wal.TopicIDPartition, pid int64) (*wal.ProducerState, error) {
	var st *wal.ProducerState
	key := producerKey(tp, pid)
	_, err := get(r, key, func(v []byte) error {
		s, err := decodeProducer(key, v)
		st = &s
		return err
	})
	return st, err
}

// producer returns the producer's state, nil if none.
func (tx *txn) producer(tp wal.TopicIDPartition, pid int64) (*wal.ProducerState, error) {
	k := producerKeyT{tp, pid}
	if st, ok := tx.producers[k]; ok {
		return st, nil
	}
	if tx.parent != nil {
		// States are replaced (setProducer), never changed in place, so
		// the parent's may be shared.
		st, err := tx.parent.producer(tp, pid)
		if err != nil {
			return nil, err
		}
		tx.producers[k] = st
		return st, nil
	}
	st, err := readProducer(tx.b, tp, pid)
	if err != nil {
		return nil, err
	}
	tx.producers[k] = st
	return st, nil
}

func (tx *txn) setProducer(tp wal.TopicIDPartition, st wal.ProducerState) {
	k := producerKeyT{tp, st.ProducerID}
	tx.producers[k] = &st
	tx.dirtyProducers[k] = true
}

// dropPartitionProducers deletes every producer state of tp.
func (tx *txn) dropPartitionProducers(tp wal.TopicIDPartition) error {
	for k := range tx.producers {
		if k.tp == tp {
			delete(tx.producers, k)
			delete(tx.dirtyProducers, k)
		}
	}
	p := partitionPrefix(tagProducer, tp)
	return tx.b.DeleteRange(p, prefixEnd(p), nil)
}

// addBatch stores an accepted batch and counts it in its object.
func (tx *txn) addBatch(tp wal.TopicIDPartition, lastOffset int64, row *batchRow, f *fileEntry) error {
	f.row.LiveBatches++
	f.dirty = true
	return tx.b.Set(batchKey(tp, lastOffset), encodeBatch(row), nil)
}

// deleteBatch removes a batch and uncounts it in its object, which is
// marked for deletion when its last batch goes.
func (tx *txn) deleteBatch(tp wal.TopicIDPartition, lastOffset int64, row *batchRow) error {
	f, err := tx.file(row.ObjectKey)
	if err != nil {
		return err
	}
	if !f.found || f.row.LiveBatches <= 0 {
		return &CorruptionError{Key: batchKey(tp, lastOffset),
			Reason: fmt.Sprintf("batch in object %q, which has no live batch on record", row.ObjectKey)}
	}
	f.row.LiveBatches--
	f.dirty = true
	if f.row.LiveBatches == 0 {
		f.row.State, f.row.MarkedAt = fileDeleting, tx.nowMs
	}
	return tx.b.Delete(batchKey(tp, lastOffset), nil)
}

// eachBatch calls fn for the batches of tp with start <= lastOffset <
// end, in offset order, as this call sees them. fn must not write.
func eachBatch(r pebble.Reader, tp wal.TopicIDPartition, start, end int64, fn func(lastOffset int64, row *batchRow) (bool, error)) error {
	return eachBatchScan(r, tp, start, end, nil, fn)
}

// eachBatchScan is eachBatch decoding with scan (decodeBatchWith; nil:
// decodeBatch). With scan.aliasRun, a row's Run is valid only during fn.
// fn's row is one variable for the whole scan (one allocation, not one
// per row): a later row overwrites it once fn asks for more.
func eachBatchScan(r pebble.Reader, tp wal.TopicIDPartition, start, end int64, scan *batchScan, fn func(lastOffset int64, row *batchRow) (bool, error)) error {
	p := partitionPrefix(tagBatch, tp)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: batchKey(tp, start), UpperBound: batchKeyEnd(tp, end, p)})
	if err != nil {
		return fmt.Errorf("pebblecp: iterate batches of %s: %w", tp, err)
	}
	var row batchRow
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(p)+8 {
			_ = it.Close()
			return &CorruptionError{Key: append([]byte(nil), k...), Reason: "batch key of the wrong length"}
		}
		last := int64(beUint64(k[len(p):]))
		row, err = decodeBatchWith(k, it.Value(), scan)
		if err == nil && (row.BaseOffset > last) {
			err = &CorruptionError{Key: append([]byte(nil), k...), Reason: fmt.Sprintf("base offset %d after last offset %d", row.BaseOffset, last)}
		}
		if err != nil {
			_ = it.Close()
			return err
		}
		more, err := fn(last, &row)
		if err != nil || !more {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblecp: iterate batches of %s: %w", tp, err)
	}
	return nil
}

func batchKeyEnd(tp wal.TopicIDPartition, end int64, prefix []byte) []byte {
	if end < 0 {
		return prefixEnd(prefix)
	}
	return batchKey(tp, end)
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// flush writes back the changed rows.
func (tx *txn) flush() error {
	for tp, e := range tx.logs {
		if e.dirty {
			if err := tx.b.Set(logKey(tp), encodeLog(&e.row), nil); err != nil {
				return err
			}
		}
	}
	for k := range tx.dirtyProducers {
		if st := tx.producers[k]; st != nil {
			if err := tx.b.Set(producerKey(k.tp, k.pid), encodeProducer(st), nil); err != nil {
				return err
			}
		}
	}
	for key, e := range tx.files {
		if !e.dirty {
			continue
		}
		if e.row.State == fileDeleting && e.loadedState != fileDeleting {
			if err := tx.b.Set(deleteQueueKey(e.row.MarkedAt, key), nil, nil); err != nil {
				return err
			}
		}
		if err := tx.b.Set(fileKey(key), encodeFile(&e.row), nil); err != nil {
			return err
		}
	}
	return nil
}
