package invariants

import "testing"

func TestAssertf(t *testing.T) {
	// A true condition never panics.
	Assertf(true, "never")

	defer func() {
		r := recover()
		if Enabled && r == nil {
			t.Fatal("Assertf(false) did not panic with invariants enabled")
		}
		if !Enabled && r != nil {
			t.Fatalf("Assertf(false) panicked with invariants disabled: %v", r)
		}
	}()
	Assertf(false, "value %d", 7)
}
