package main

import (
	"context"
	"flag"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

type walProducerJSON struct {
	ProducerID    int64                  `json:"producerId"`
	ProducerEpoch int16                  `json:"producerEpoch"`
	Batches       []walProducerBatchJSON `json:"batches"`
}

type walProducerBatchJSON struct {
	BaseSequence   int32 `json:"baseSequence"`
	LastSequence   int32 `json:"lastSequence"`
	AssignedOffset int64 `json:"assignedOffset"`
	Timestamp      int64 `json:"timestamp"`
}

type walPartitionJSON struct {
	TopicID                 string            `json:"topicId"`
	Partition               int32             `json:"partition"`
	Topic                   string            `json:"topic"`
	LogStartOffset          int64             `json:"logStartOffset"`
	HighWatermark           int64             `json:"highWatermark"`
	DisklessStartOffset     int64             `json:"disklessStartOffset"`
	CrossTierLogStartOffset int64             `json:"crossTierLogStartOffset"`
	ByteSize                int64             `json:"byteSize"`
	Producers               []walProducerJSON `json:"producers"`
}

func setupWALPartition(fl *flag.FlagSet) func(*tool, []string, *output) error {
	var f partitionFilter
	f.declare(fl, true)
	return func(t *tool, args []string, out *output) error {
		id, ok, err := f.topic()
		switch {
		case err != nil:
			return err
		case !ok || f.partition < 0:
			return usagef("--topic-id and --partition are required")
		}
		cp, err := pebblecp.Open(t.fs, args[0], pebblecp.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer cp.Close()
		ctx := context.Background()
		tp := wal.TopicIDPartition{TopicID: wal.TopicID(id), Partition: int32(f.partition)}
		info, err := cp.LogInfo(ctx, tp)
		if err != nil {
			return err
		}
		states, err := cp.ProducerStates(ctx, tp)
		if err != nil {
			return err
		}
		doc := walPartitionJSON{TopicID: tp.TopicID.String(), Partition: tp.Partition, Topic: info.Topic,
			LogStartOffset: info.LogStartOffset, HighWatermark: info.HighWatermark,
			DisklessStartOffset: info.DisklessStartOffset, CrossTierLogStartOffset: info.CrossTierLogStartOffset,
			ByteSize: info.ByteSize, Producers: []walProducerJSON{}}
		out.printf("partition %s-%d (topic id %s) in the control plane %s", info.Topic, tp.Partition, tp.TopicID, args[0])
		out.printf("log start offset:            %d", info.LogStartOffset)
		out.printf("diskless start offset:       %d", info.DisklessStartOffset)
		out.printf("high watermark:              %d (the log end offset)", info.HighWatermark)
		out.printf("cross-tier log start offset: %d", info.CrossTierLogStartOffset)
		out.printf("live batch bytes:            %d", info.ByteSize)
		out.printf("producers:                   %d", len(states))
		for _, st := range states {
			pj := walProducerJSON{ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch, Batches: []walProducerBatchJSON{}}
			out.printf("  producer=%d epoch=%d batches=%d", st.ProducerID, st.ProducerEpoch, len(st.Batches))
			for _, b := range st.Batches {
				pj.Batches = append(pj.Batches, walProducerBatchJSON(b))
				out.printf("    seq=[%d, %d] offset=%d timestamp=%d", b.BaseSequence, b.LastSequence, b.AssignedOffset, b.Timestamp)
			}
			doc.Producers = append(doc.Producers, pj)
		}
		out.setJSON(doc)
		return nil
	}
}
