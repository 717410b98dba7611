package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/remote"
)

type remoteSegmentJSON struct {
	SegmentID        string      `json:"segmentId"`
	State            string      `json:"state"`
	StartOffset      int64       `json:"startOffset"`
	EndOffset        int64       `json:"endOffset"`
	Epochs           []epochJSON `json:"epochs"`
	SizeBytes        int64       `json:"sizeBytes"`
	MaxTimestampMs   int64       `json:"maxTimestampMs"`
	BrokerID         int32       `json:"brokerId"`
	EventTimestampMs int64       `json:"eventTimestampMs"`
	TxnIndexEmpty    bool        `json:"txnIndexEmpty"`
	CustomMetadata   []byte      `json:"customMetadata,omitempty"`
}

type remotePartitionJSON struct {
	TopicID     string              `json:"topicId"`
	Topic       string              `json:"topic"`
	Partition   int32               `json:"partition"`
	DeleteState string              `json:"deleteState,omitempty"`
	Segments    []remoteSegmentJSON `json:"segments"`
}

type remoteJSON struct {
	Dir        string                `json:"dir"`
	Partitions []remotePartitionJSON `json:"partitions"`
}

// partitionFilter selects partitions by topic id and partition number;
// unset fields match all.
type partitionFilter struct {
	topicID   string
	partition int
}

func (f *partitionFilter) declare(fl *flag.FlagSet, required bool) {
	what := "only this topic id (Kafka's base64 form, 22 characters)"
	if required {
		what = "the topic id (Kafka's base64 form, 22 characters)"
	}
	fl.StringVar(&f.topicID, "topic-id", "", what)
	fl.IntVar(&f.partition, "partition", -1, "the partition number")
}

// topic parses --topic-id; ok is false when it is unset.
func (f *partitionFilter) topic() (id remote.UUID, ok bool, err error) {
	if f.topicID == "" {
		return id, false, nil
	}
	id, err = remote.ParseUUID(f.topicID)
	if err != nil {
		return id, false, usagef("--topic-id %q: want Kafka's 22-character base64 topic id", f.topicID)
	}
	return id, true, nil
}

func (f *partitionFilter) matches(tp remote.TopicIDPartition) bool {
	id, ok, _ := f.topic()
	return (!ok || tp.TopicID == id) && (f.partition < 0 || tp.Partition == int32(f.partition))
}

func setupRemoteSegments(fl *flag.FlagSet) func(*tool, []string, *output) error {
	var f partitionFilter
	f.declare(fl, false)
	return func(t *tool, args []string, out *output) error {
		if _, _, err := f.topic(); err != nil {
			return err
		}
		m, err := remote.Open(t.fs, args[0], remote.MetadataOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		parts, err := m.Partitions()
		if err != nil {
			return err
		}
		doc := remoteJSON{Dir: args[0], Partitions: []remotePartitionJSON{}}
		for _, tp := range parts {
			if !f.matches(tp) {
				continue
			}
			pj, err := remotePartition(m, tp)
			if err != nil {
				return err
			}
			printRemotePartition(&pj, out)
			doc.Partitions = append(doc.Partitions, pj)
		}
		if len(doc.Partitions) == 0 {
			out.printf("no partitions with remote metadata match")
		}
		out.setJSON(doc)
		return nil
	}
}

func remotePartition(m *remote.MetadataManager, tp remote.TopicIDPartition) (remotePartitionJSON, error) {
	pj := remotePartitionJSON{TopicID: tp.TopicID.String(), Topic: tp.Topic, Partition: tp.Partition, Segments: []remoteSegmentJSON{}}
	ds, err := m.PartitionDeleteState(tp)
	if err != nil {
		return pj, err
	}
	if ds != remote.NoPartitionDeleteState {
		pj.DeleteState = ds.String()
	}
	segs, err := m.ListSegments(tp)
	if err != nil {
		return pj, err
	}
	for _, s := range segs {
		pj.Segments = append(pj.Segments, remoteSegmentJSON{
			SegmentID: s.SegmentID.ID.String(), State: s.State.String(),
			StartOffset: s.StartOffset, EndOffset: s.EndOffset, Epochs: toEpochJSON(s.SegmentLeaderEpochs),
			SizeBytes: s.SizeBytes, MaxTimestampMs: s.MaxTimestampMs, BrokerID: s.BrokerID,
			EventTimestampMs: s.EventTimestampMs, TxnIndexEmpty: s.TxnIndexEmpty, CustomMetadata: s.CustomMetadata,
		})
	}
	return pj, nil
}

func printRemotePartition(p *remotePartitionJSON, out *output) {
	del := ""
	if p.DeleteState != "" {
		del = " delete-state=" + p.DeleteState
	}
	out.printf("partition %s-%d (topic id %s): %d segments%s", p.Topic, p.Partition, p.TopicID, len(p.Segments), del)
	for _, s := range p.Segments {
		var epochs []string
		for _, e := range s.Epochs {
			epochs = append(epochs, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
		}
		out.printf("  segment %s %s offsets=[%d, %d] epochs=%s size=%d maxTimestamp=%d broker=%d event=%d txnIndexEmpty=%t",
			s.SegmentID, s.State, s.StartOffset, s.EndOffset, strings.Join(epochs, ","), s.SizeBytes,
			s.MaxTimestampMs, s.BrokerID, s.EventTimestampMs, s.TxnIndexEmpty)
	}
}
