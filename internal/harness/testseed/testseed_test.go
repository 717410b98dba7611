package testseed

import "testing"

func TestSeed(t *testing.T) {
	t.Setenv("TIERLOG_SEED", "")
	t.Setenv("TIERLOG_RANDOM_SEED", "")
	if got := Seed(t, 7); got != 7 {
		t.Fatalf("default seed %d, want the fixed 7", got)
	}
	t.Setenv("TIERLOG_SEED", "42")
	if got := Seed(t, 7); got != 42 {
		t.Fatalf("TIERLOG_SEED=42 gave %d", got)
	}
	t.Setenv("TIERLOG_SEED", "")
	t.Setenv("TIERLOG_RANDOM_SEED", "1")
	a := Seed(t, 7)
	if a == 7 {
		t.Fatalf("TIERLOG_RANDOM_SEED=1 kept the fixed seed")
	}
}
