package record

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
)

// TestUndefinedConstants: the public names are the values every package
// uses internally, and Kafka's -1.
func TestUndefinedConstants(t *testing.T) {
	require.Equal(t, int64(-1), UndefinedOffset)
	require.Equal(t, int32(-1), UndefinedEpoch)
	require.Equal(t, int64(-1), NoProducerID)
	require.Equal(t, int16(-1), NoProducerEpoch)
	require.Equal(t, int32(-1), NoSequence)
	require.Equal(t, base.UndefinedOffset, UndefinedOffset)
	require.Equal(t, base.NoSequence, NoSequence)

	// A batch built without idempotence carries them.
	b := NewBuilder(BuilderOptions{ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch,
		BaseSequence: NoSequence, PartitionLeaderEpoch: UndefinedEpoch})
	b.Add(0, nil, []byte("v"))
	buf, err := b.Build()
	require.NoError(t, err)
	batch, err := ReadBatch(buf)
	require.NoError(t, err)
	require.Equal(t, NoProducerID, batch.ProducerID())
	require.Equal(t, NoSequence, batch.BaseSequence())
	require.Equal(t, UndefinedEpoch, batch.PartitionLeaderEpoch())
}
