package wal

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func digestRequest() CommitFileRequest {
	return CommitFileRequest{ObjectKey: "wal/before-bindings", ObjectSize: 300, BrokerID: 11, BrokerEpoch: 1,
		Batches: []CommitBatch{
			{Partition: TopicIDPartition{TopicID: TopicID{0x11, 1}}, ByteOffset: 0, Size: 100, BaseOffset: 0, LastOffset: 9,
				RecordCount: 10, MaxTimestamp: 1000, TimestampType: CreateTime, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0,
				CRC: 0xdeadbeef, PartitionLeaderEpoch: 4},
			{Partition: TopicIDPartition{TopicID: TopicID{0x22, 2}}, ByteOffset: 100, Size: 200, BaseOffset: 0, LastOffset: 4,
				RecordCount: 5, MaxTimestamp: 2000, TimestampType: LogAppendTime, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
				CRC: 0x01020304, PartitionLeaderEpoch: 4},
		}}
}

// The two encodings are pinned: control planes store them, and a retry
// must match what was stored, also by code from before the bindings
// entered the digest. A request that differs in any field, binding
// included, is another object.
func TestDigest(t *testing.T) {
	req := digestRequest()
	d := req.Digest()
	require.Equal(t, "6480589e7c040293064b4c94ae4f208ec93b795a38c39d724d40219ecd0c49a3", hex.EncodeToString(d[:]))
	old := req.digestWithoutBinding()
	require.Equal(t, "9b87e65c2c5e85cdb90b330f7ce2e31f8d5d8e0bccc0c5ca000d2e8b1bc77dfe", hex.EncodeToString(old[:]))
	require.True(t, req.MatchesDigest(d))
	require.True(t, req.MatchesDigest(old), "a retry across the upgrade")

	for name, change := range map[string]func(r *CommitFileRequest){
		"crc":          func(r *CommitFileRequest) { r.Batches[1].CRC ^= 1 },
		"leader epoch": func(r *CommitFileRequest) { r.Batches[0].PartitionLeaderEpoch = -1 },
		"sequence":     func(r *CommitFileRequest) { r.Batches[0].BaseSequence++ },
		"broker epoch": func(r *CommitFileRequest) { r.BrokerEpoch++ },
	} {
		other := digestRequest()
		change(&other)
		require.False(t, other.MatchesDigest(d), name)
		require.NotEqual(t, d, other.Digest(), name)
		binding := name == "crc" || name == "leader epoch"
		// The first encoding never covered the bindings.
		require.Equal(t, binding, other.MatchesDigest(old), name)
	}
}
