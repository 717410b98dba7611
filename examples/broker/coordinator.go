package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator key types of FindCoordinator (KIP-98 added the type).
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// findCoordinator answers that this broker coordinates every group and
// every transactional id: it is the only broker. Versions 0 to 3 ask for
// one key, 4 and later for a list (KIP-699). Library: none.
func (s *Server) findCoordinator(r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := s.hostPort()
	code := func(t int8) int16 {
		if t != coordinatorGroup && t != coordinatorTransaction {
			return kerr.InvalidRequest.Code
		}
		return 0
	}
	if r.GetVersion() < 4 {
		resp.ErrorCode = code(r.CoordinatorType)
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = nodeID, host, port
		}
		return resp
	}
	for _, key := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode = code(r.CoordinatorType)
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = nodeID, host, port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
