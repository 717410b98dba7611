package promexport_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

var walTopic = wal.TopicID{0xD1}

// walEnv is a broker's diskless WAL built with the public APIs: a writer
// that fills an object cache, a reader on that cache and a cleaner, on
// the memory object store and a Pebble control plane on a memory FS.
type walEnv struct {
	cp      *pebblecp.ControlPlane
	writer  *wal.Writer
	reader  *wal.Reader
	cache   *wal.ObjectCache
	cleaner *wal.Cleaner
}

func newWALEnv() (*walEnv, error) {
	ctx := context.Background()
	store := mem.New(mem.Options{})
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
	if err != nil {
		return nil, err
	}
	e := &walEnv{cp: cp, cache: wal.NewObjectCache(1 << 20)}
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: walTopic, Topic: "events", NumPartitions: 1}}); err != nil {
		return nil, errors.Join(err, e.close())
	}
	// MaxBytes 1: every call is an object of its own, answered without
	// waiting for the commit interval.
	if e.writer, err = wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, MaxBytes: 1, Cache: e.cache}); err != nil {
		return nil, errors.Join(err, e.close())
	}
	if e.reader, err = wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: cp, Cache: e.cache}); err != nil {
		return nil, errors.Join(err, e.close())
	}
	if e.cleaner, err = wal.NewCleaner(wal.CleanerOptions{Store: store, ControlPlane: cp}); err != nil {
		return nil, errors.Join(err, e.close())
	}
	return e, nil
}

// produce sends n good one-record batches to partition 0, one call each,
// then one corrupt batch and one batch for a partition that does not
// exist; it fetches partition 0 from offset 0 and runs the cleaner once.
func (e *walEnv) produce(n int) error {
	ctx := context.Background()
	tp := wal.TopicIDPartition{TopicID: walTopic}
	good := func(i int) ([]byte, error) {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(nowMs, nil, fmt.Appendf(nil, "v%d", i))
		return b.Build()
	}
	for i := range n {
		buf, err := good(i)
		if err != nil {
			return err
		}
		if _, err := e.writer.Produce(ctx, []wal.ProduceRequest{{Partition: tp, Batches: buf}}); err != nil {
			return err
		}
	}
	corrupt, err := good(n)
	if err != nil {
		return err
	}
	corrupt[len(corrupt)-1] ^= 0xFF // outside the header: the CRC fails
	unknown, err := good(n + 1)
	if err != nil {
		return err
	}
	res, err := e.writer.Produce(ctx, []wal.ProduceRequest{
		{Partition: tp, Batches: corrupt},
		{Partition: wal.TopicIDPartition{TopicID: walTopic, Partition: 9}, Batches: unknown},
	})
	if err != nil {
		return err
	}
	if !errors.Is(res[0].Err, wal.ErrCorruption) || !errors.Is(res[1].Batches[0].Err, wal.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("want a corrupt request and an unknown partition, got %+v", res)
	}
	if _, err := e.reader.Fetch(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: tp, Offset: 0, MaxPartitionBytes: 1 << 20}}}); err != nil {
		return err
	}
	_, err = e.cleaner.Run(ctx)
	return err
}

func (e *walEnv) close() error {
	var err error
	if e.writer != nil {
		err = e.writer.Close()
	}
	return errors.Join(err, e.cp.Close())
}
