//go:build !tierlog_mutation

package mutation

import "testing"

// Without the tag nothing can be disabled: Disabled is false for every
// guard whatever the environment says, and Disable skips the test that
// asked for a mutant.
func TestNothingDisabledWithoutTag(t *testing.T) {
	t.Setenv(EnvVar, "pruner-cap")
	for _, g := range Guards() {
		if Disabled(g) {
			t.Fatalf("%v disabled without -tags tierlog_mutation", g)
		}
	}
	var f fakeTB
	Disable(&f, PrunerCap)
	if !f.skipped || Disabled(PrunerCap) {
		t.Fatalf("Disable without the tag: skipped=%v disabled=%v", f.skipped, Disabled(PrunerCap))
	}
}

// The guarded branch costs what the bare branch costs: Disabled is
// inlined as the constant false (go build -gcflags=-m reports
// "inlining call to mutation.Disabled"). Compare with
// BenchmarkBareBranch; both are a loop increment.
func BenchmarkGuardedBranch(b *testing.B) {
	n := 0
	for i := 0; i < b.N; i++ {
		if !Disabled(PrunerCap) {
			n++
		}
	}
	if n != b.N {
		b.Fatal("guard disabled")
	}
}

func BenchmarkBareBranch(b *testing.B) {
	n := 0
	for i := 0; i < b.N; i++ {
		n++
	}
	if n != b.N {
		b.Fatal("lost an increment")
	}
}
