package mutation

import "testing"

// Every guard has a name, and Parse reads it back; a name that is no
// guard's is an error, never a silent no-op (a misspelt mutant would run
// the intact code).
func TestGuardNames(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range Guards() {
		name := g.String()
		if name == "" || seen[name] {
			t.Fatalf("guard %d: name %q empty or repeated", g, name)
		}
		seen[name] = true
		back, err := Parse(name)
		if err != nil || back != g {
			t.Fatalf("Parse(%q) = %v, %v; want %v", name, back, err, g)
		}
	}
	if len(seen) != int(numGuards)-1 {
		t.Fatalf("%d names for %d guards", len(seen), numGuards-1)
	}
	if _, err := Parse("no-such-guard"); err == nil {
		t.Fatal("Parse accepted an unknown name")
	}
	if got := Guard(0).String(); got != "Guard(0)" {
		t.Fatalf("Guard(0).String() = %q", got)
	}
}

func TestParseList(t *testing.T) {
	gs, err := ParseList(" pruner-cap, ,truncation-fence ")
	if err != nil || len(gs) != 2 || gs[0] != PrunerCap || gs[1] != TruncationFence {
		t.Fatalf("ParseList = %v, %v", gs, err)
	}
	if gs, err := ParseList(""); err != nil || len(gs) != 0 {
		t.Fatalf("ParseList(\"\") = %v, %v", gs, err)
	}
	if _, err := ParseList("pruner-cap,prunercap"); err == nil {
		t.Fatal("ParseList accepted a misspelt name")
	}
}

// fakeTB records what Disable asks of a test.
type fakeTB struct {
	cleanups []func()
	skipped  bool
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Skip(...any)       { f.skipped = true }

// A guard's backups are other guards of the table, each named once, and
// Backups hands out a copy (a caller appending to it changes no table).
func TestBackups(t *testing.T) {
	for _, g := range Guards() {
		bs := Backups(g)
		seen := map[Guard]bool{}
		for _, b := range bs {
			if b == g || b <= 0 || b >= numGuards || seen[b] {
				t.Fatalf("%v: backup %v is itself, no guard or repeated", g, b)
			}
			seen[b] = true
		}
		if len(bs) > 0 {
			bs[0] = g
			if Backups(g)[0] == g {
				t.Fatalf("%v: Backups returned the table itself", g)
			}
		}
	}
	if len(Backups(ReplicaRemoteProgress)) == 0 {
		t.Fatal("replica-remote-progress has no backup")
	}
}
