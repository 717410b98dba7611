package pebblecp

import (
	"context"

	"github.com/tierlog/tierlog/wal"
)

// CommitGroup writes reqs as one group commit, in order, as the commit
// queue's leader would had they arrived together, and returns each
// request's answer.
func (cp *ControlPlane) CommitGroup(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFileResult, []error) {
	group := make([]*commitCall, len(reqs))
	for i := range reqs {
		req := reqs[i]
		if err := req.Validate(); err != nil {
			panic(err)
		}
		group[i] = &commitCall{ctx: ctx, req: &req, digest: req.Digest()}
	}
	entries := make([][]*commitCall, len(group))
	for i, c := range group {
		entries[i] = []*commitCall{c}
	}
	cp.commitGroup(entries)
	res, errs := make([]wal.CommitFileResult, len(reqs)), make([]error, len(reqs))
	for i, c := range group {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs
}
