package pgcp

// SetTestHookAfterEmptinessCheck sets the hook run between markEmptied's
// emptiness check and the transaction's commit.
func SetTestHookAfterEmptinessCheck(f func()) { testHookAfterEmptinessCheck = f }

// SetTestHookBeforeCommit sets the hook run before a CommitFile's COMMIT.
func SetTestHookBeforeCommit(f func()) { testHookBeforeCommit = f }
