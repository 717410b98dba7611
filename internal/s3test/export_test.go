package s3test

import "testing"

// MainPrivate is Main without the shared server: this package's tests
// start and stop servers of their own.
func MainPrivate(m *testing.M) int { return runMain(m, false) }
