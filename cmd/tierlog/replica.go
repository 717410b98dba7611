package main

import (
	"flag"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// fileLog is the tierstate.DescribeLog of a partition directory read by
// describeDir.
type fileLog struct {
	localStart, logEnd, highWatermark int64
	epochs                            []epochcache.Entry
}

func (l fileLog) LocalLogStartOffset() int64 { return l.localStart }
func (l fileLog) LogEndOffset() int64        { return l.logEnd }
func (l fileLog) HighWatermark() int64       { return l.highWatermark }

// EpochForOffset reads the directory's leader-epoch-checkpoint.
func (l fileLog) EpochForOffset(offset int64) (int32, bool) {
	return epochcache.EpochForOffsetIn(l.epochs, offset)
}

type replicaJSON struct {
	BrokerID                int32  `json:"brokerId"`
	Seal                    int64  `json:"seal"`
	LocalLogStartOffset     int64  `json:"localLogStartOffset"`
	LogEndOffset            int64  `json:"logEndOffset"`
	HighWatermark           int64  `json:"highWatermark"`
	HighWatermarkAssumed    bool   `json:"highWatermarkAssumed"`
	CrossTierLogStartOffset int64  `json:"crossTierLogStartOffset"`
	RemoteEndOffset         int64  `json:"remoteEndOffset"`
	RemoteEndEpoch          int32  `json:"remoteEndEpoch"`
	SealEpoch               *int32 `json:"sealEpoch,omitempty"`
	SealedEpochAtRemoteEnd  *int32 `json:"sealedEpochAtRemoteEnd,omitempty"`
	EpochBeforeSeal         *int32 `json:"epochBeforeSeal,omitempty"`
	HoldsClassicPrefix      bool   `json:"holdsClassicPrefix"`
	CoversClassicPrefix     bool   `json:"coversClassicPrefix"`
	Summary                 string `json:"summary"`
}

func setupDescribeReplica(fl *flag.FlagSet) func(*tool, []string, *output) error {
	var f partitionFilter
	f.declare(fl, true)
	metadata := fl.String("metadata", "", "the remote metadata directory (opened read-only)")
	seal := fl.Int64("seal", -1, "the committed seal S (the partition record's tag 100)")
	sealLineage := fl.String("seal-lineage", "", "the committed seal lineage (the partition record's tag 105) as E@S,E@S,..., empty when unknown")
	x := fl.Int64("cross-tier-start", -1, "X, the control plane's cross-tier log start offset")
	hw := fl.Int64("high-watermark", -1, "the replica's high watermark (not kept in the partition directory); default: the log end offset")
	broker := fl.Int("broker-id", 0, "the broker id to report")
	return func(t *tool, args []string, out *output) error {
		id, ok, err := f.topic()
		switch {
		case err != nil:
			return err
		case !ok || f.partition < 0:
			return usagef("--topic-id and --partition are required")
		case *metadata == "":
			return usagef("--metadata is required")
		case *seal < 0 || *x < 0:
			return usagef("--seal and --cross-tier-start are required (>= 0)")
		}
		d, err := t.describeDir(args[0])
		if err != nil {
			return err
		}
		var probs problems
		probs.list = d.Problems
		if err := probs.err(); err != nil {
			return err // the offsets would be those of a damaged log
		}
		m, err := remote.Open(t.fs, *metadata, remote.MetadataOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		tp := remote.TopicIDPartition{TopicID: id, Partition: int32(f.partition)}
		parts, err := m.Partitions()
		if err != nil {
			return err
		}
		for _, p := range parts {
			if p.TopicID == id && p.Partition == tp.Partition {
				tp = p // the stored topic name is part of the identity
			}
		}
		lineage, err := epochcache.ParseEntries(*sealLineage)
		if err != nil {
			return usagef("--seal-lineage: %v", err)
		}
		prop := tierstate.SealProposal{Seal: *seal, Lineage: lineage}
		state, err := tierstate.State{}.ArmSwitch()
		if err == nil {
			state, err = state.CommitSealProposal(prop)
		}
		if err != nil {
			return err
		}
		req := tierstate.DescribeRequest{Partition: tp, BrokerID: int32(*broker), State: state,
			CrossTierLogStartOffset: *x, Remote: m}
		assumed := *hw < 0
		if len(d.Segments) > 0 {
			l := fileLog{localStart: d.LocalLogStartOffset, logEnd: d.LogEndOffset, highWatermark: *hw,
				epochs: d.epochEntries()}
			if assumed {
				l.highWatermark = d.LogEndOffset
			}
			req.Log = l
		}
		desc, err := tierstate.Describe(req)
		if err != nil {
			return err
		}
		doc := replicaJSON{BrokerID: desc.BrokerID, Seal: desc.Seal, LocalLogStartOffset: desc.LocalLogStartOffset,
			LogEndOffset: desc.LogEndOffset, HighWatermark: desc.HighWatermark, HighWatermarkAssumed: assumed,
			CrossTierLogStartOffset: desc.CrossTierLogStartOffset, RemoteEndOffset: desc.RemoteEndOffset,
			RemoteEndEpoch: desc.RemoteEndEpoch, HoldsClassicPrefix: desc.HoldsClassicPrefix(), CoversClassicPrefix: desc.CoversClassicPrefix(), Summary: desc.String()}
		if f := desc.SealEpoch; f.Present {
			doc.SealEpoch = &f.Value
		}
		if f := desc.SealedEpochAtRemoteEnd; f.Present {
			doc.SealedEpochAtRemoteEnd = &f.Value
		}
		if f := desc.EpochBeforeSeal; f.Present {
			doc.EpochBeforeSeal = &f.Value
		}
		out.printf("%s", desc.String())
		if assumed {
			out.printf("(high watermark assumed to be the log end offset; pass --high-watermark)")
		}
		out.setJSON(doc)
		return nil
	}
}
