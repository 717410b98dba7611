package pgcp

import "context"

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
