//go:build tierlog_mutation

package mutation

import (
	"os"
	"testing"
)

// Disable switches one guard off for the test that asked, and only that
// guard; the cleanup restores what was there before.
func TestDisableRestores(t *testing.T) {
	before := Disabled(PrunerCap)
	var f fakeTB
	Disable(&f, PrunerCap)
	if f.skipped || !Disabled(PrunerCap) {
		t.Fatalf("Disable: skipped=%v disabled=%v", f.skipped, Disabled(PrunerCap))
	}
	if os.Getenv(EnvVar) == "" && Disabled(TruncationFence) {
		t.Fatal("disabling pruner-cap disabled truncation-fence too")
	}
	for _, fn := range f.cleanups {
		fn()
	}
	if Disabled(PrunerCap) != before {
		t.Fatalf("after cleanup Disabled = %v, want %v", Disabled(PrunerCap), before)
	}
}
