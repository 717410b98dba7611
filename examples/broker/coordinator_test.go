package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFindCoordinator: the one broker coordinates groups and
// transactional ids, in the single-key versions and the batched ones
// (KIP-699); an unknown key type is INVALID_REQUEST.
func TestFindCoordinator(t *testing.T) {
	s := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b := rawBroker(ctx, t, s)
	host, port := s.hostPort()

	// kgo asks at the highest version both sides serve; the single-key
	// versions are asked of the handler directly.
	for _, v := range []int16{0, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g"
		resp := s.findCoordinator(req)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		require.Equal(t, []any{int32(nodeID), host, port}, []any{resp.NodeID, resp.Host, resp.Port}, "v%d", v)
	}

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorType = coordinatorTransaction
	req.CoordinatorKeys = []string{"t1", "t2"}
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Len(t, resp.Coordinators, 2)
	for i, c := range resp.Coordinators {
		require.Equal(t, req.CoordinatorKeys[i], c.Key)
		require.Zero(t, c.ErrorCode)
		require.Equal(t, []any{int32(nodeID), host, port}, []any{c.NodeID, c.Host, c.Port})
	}

	req.CoordinatorType = 7
	resp, err = req.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Coordinators[0].ErrorCode)
}
