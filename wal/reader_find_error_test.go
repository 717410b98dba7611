package wal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// failingFindCP is a control plane whose FindBatches fails with err.
type failingFindCP struct {
	wal.ControlPlane
	err error
}

func (c failingFindCP) FindBatches(context.Context, wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	return nil, c.err
}

// TestReaderFindFailure: a control plane's own failure (a PostgreSQL
// outage, say) comes back as wal.ErrFindFailed wrapping it, retriable, so a
// broker maps it to a storage error; a canceled context, a closed plane
// and an invalid request come back as they are.
func TestReaderFindFailure(t *testing.T) {
	unreachable := errors.New("control plane unreachable")
	req := wal.FindBatchesRequest{Partitions: []wal.FindPartition{{Partition: bindTP(0), MaxPartitionBytes: 1 << 20}}, MaxBytes: 1 << 20}
	for _, c := range []struct {
		name      string
		err       error
		wrapped   bool
		retriable bool
	}{
		{"outage", unreachable, true, true},
		{"canceled", context.Canceled, false, false},
		{"closed", wal.ErrClosed, false, false},
		{"invalid", wal.ErrInvalidArgument, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := wal.NewReader(wal.ReaderOptions{Store: mem.New(mem.Options{}), ControlPlane: failingFindCP{err: c.err}})
			require.NoError(t, err)
			res, err := r.Fetch(context.Background(), req)
			require.Nil(t, res)
			require.ErrorIs(t, err, c.err)
			require.Equal(t, c.wrapped, errors.Is(err, wal.ErrFindFailed), "%v", err)
			require.Equal(t, c.retriable, wal.IsRetriable(err), "%v", err)
		})
	}
}
