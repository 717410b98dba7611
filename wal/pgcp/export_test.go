package pgcp

// SetTestHookAfterFileLock sets the hook run between markEmptied's file
// lock and its emptiness check.
func SetTestHookAfterFileLock(f func()) { testHookAfterFileLock = f }
