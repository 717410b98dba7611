package pgcp

import (
	"context"

	"github.com/tierlog/tierlog/wal"
)

// OpenAtSchemaVersionForTesting opens a control plane that migrates the
// schema only up to version (an earlier schema, as earlier code left it).
// Only its schema is of use: the code's statements need the newest.
func OpenAtSchemaVersionForTesting(ctx context.Context, opts Options, version int) (*ControlPlane, error) {
	return open(ctx, opts, version)
}

// SetTestHookAfterEmptinessCheck sets the hook run between markEmptied's
// emptiness check and the transaction's commit.
func SetTestHookAfterEmptinessCheck(f func()) { testHookAfterEmptinessCheck = f }

// SetTestHookBeforeCommit sets the hook run before a CommitFile's COMMIT.
func SetTestHookBeforeCommit(f func()) { testHookBeforeCommit = f }

// CommitGroup writes reqs as one group of the commit queue, in order, as
// its leader would had they arrived together, and returns each request's
// answer.
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
		if errs[i] = c.err; c.err == nil {
			res[i] = wal.CommitAnswer(group[i].req, c.results)
		}
	}
	return res, errs
}

// FindPagedForTesting answers req as FindBatches does when its one-round-
// trip pipeline is not enough: page after page in one transaction.
func (cp *ControlPlane) FindPagedForTesting(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	return cp.findPaged(ctx, req)
}
