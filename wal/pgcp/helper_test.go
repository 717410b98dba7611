package pgcp_test

// helperMain runs a child process's role when the test binary is
// re-executed as one; it reports whether it did.
func helperMain() bool { return false }
