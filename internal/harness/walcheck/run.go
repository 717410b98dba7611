package walcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/wal"
)

// Environment variables of Run.
const (
	// EnvSeed replays from one seed: TIERLOG_WALCHECK_SEED=n with
	// TIERLOG_WALCHECK_ITERS=1 reruns the iteration a failure names.
	EnvSeed = "TIERLOG_WALCHECK_SEED"
	// EnvIterations sets the iteration count (more for a soak run).
	EnvIterations = "TIERLOG_WALCHECK_ITERS"
)

// Options configure Run.
type Options struct {
	// Seed is the first iteration's seed unless EnvSeed is set;
	// iteration i runs on Seed+i.
	Seed uint64
	// Iterations unless EnvIterations is set.
	Iterations int
	// NewPlane returns an empty control plane for one iteration.
	NewPlane func(t testing.TB) wal.ControlPlane
	// Fetch reads req through the read path under test, whose control
	// plane is w.Liar and whose store is w.Store, and checks the answer:
	// it returns the violations it saw (CheckFetch's, for a reader).
	Fetch func(ctx context.Context, w *World, req wal.FindBatchesRequest) []Violation
	// Rounds is the number of random requests per iteration after the
	// damage. Default 3.
	Rounds int
}

// envInt reads a non-negative integer variable.
func envInt(t testing.TB, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// Run runs the iterations: each builds a World on a new plane, checks
// one fetch before any damage, applies zero to two store damages and
// zero to two lies (at least one of either), and checks Rounds random
// fetches. It reports each class of Violation once, with its count and
// the first iteration's seed, damage and detail, so one run lists every
// promise the read path breaks.
func Run(t *testing.T, opts Options) {
	t.Helper()
	seen, iters := Collect(t, opts)
	seen.Report(t, iters)
}

// Tally counts violations by class and keeps each class's first.
type Tally map[string]*First

// Add counts vs, seen in the iteration of seed on w.
func (ta Tally) Add(seed uint64, w *World, vs []Violation) {
	for _, v := range vs {
		f := ta[v.Class]
		if f == nil {
			f = &First{Seed: seed, Damage: strings.Join(w.Damage, "; "), Detail: v.Detail}
			ta[v.Class] = f
		}
		f.Count++
	}
}

// Report fails t once per class, with its count and first instance.
func (ta Tally) Report(t testing.TB, iters int) {
	t.Helper()
	classes := make([]string, 0, len(ta))
	for c := range ta {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		f := ta[c]
		t.Errorf("%s: %d times in %d iterations; first at %s=%d %s=1: %s\n\tdamage: %s",
			c, f.Count, iters, EnvSeed, f.Seed, EnvIterations, f.Detail, f.Damage)
	}
}

// Seeds returns the first seed and the iteration count: opts' unless
// EnvSeed or EnvIterations say otherwise. It logs how to replay.
func Seeds(t testing.TB, seed uint64, iters int) (uint64, int) {
	t.Helper()
	seed = envInt(t, EnvSeed, seed)
	iters = int(envInt(t, EnvIterations, uint64(iters)))
	t.Logf("seeds %d to %d (replay one with %s=n %s=1)", seed, seed+uint64(iters)-1, EnvSeed, EnvIterations)
	return seed, iters
}

// NewRand is the random source of the iteration of seed.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }

// First is the first Violation of a class in a run, and the class's count.
type First struct {
	Count  int
	Seed   uint64
	Damage string
	Detail string
}

// Collect runs the iterations as Run does and returns the violations by
// class, and the iteration count.
func Collect(t testing.TB, opts Options) (Tally, int) {
	t.Helper()
	seed, iters := Seeds(t, opts.Seed, opts.Iterations)
	if opts.Rounds == 0 {
		opts.Rounds = 3
	}
	seen := Tally{}
	ctx := context.Background()
	for i := range iters {
		s := seed + uint64(i)
		rng := NewRand(s)
		w, err := NewWorld(ctx, rng, opts.NewPlane(t))
		if err != nil {
			t.Fatalf("seed %d: building the world: %v", s, err)
		}
		report := func(vs []Violation) { seen.Add(s, w, vs) }
		report(fetch(ctx, opts, w, wal.FindBatchesRequest{MaxBytes: 1 << 30, Partitions: allFrom0(w)}))
		if err := w.RandomDamage(ctx); err != nil {
			t.Fatalf("seed %d: damaging the store: %v", s, err)
		}
		for range opts.Rounds {
			report(fetch(ctx, opts, w, w.RandomRequest()))
		}
	}
	return seen, iters
}

// RandomDamage applies zero to two store damages and zero to two lies,
// at least one of either.
func (w *World) RandomDamage(ctx context.Context) error {
	damages, lies := w.Rand.IntN(3), w.Rand.IntN(3)
	if damages+lies == 0 {
		damages = 1
	}
	for range damages {
		if _, err := w.DamageStore(ctx); err != nil {
			return err
		}
	}
	for range lies {
		w.AddLie()
	}
	return nil
}

func allFrom0(w *World) []wal.FindPartition {
	var out []wal.FindPartition
	for _, tp := range w.Parts {
		out = append(out, wal.FindPartition{Partition: tp, MaxPartitionBytes: 1 << 30})
	}
	return out
}

// fetch runs opts.Fetch and turns a panic into a Violation.
func fetch(ctx context.Context, opts Options, w *World, req wal.FindBatchesRequest) (vs []Violation) {
	defer func() {
		if r := recover(); r != nil {
			vs = append(vs, Violation{Class: ClassPanic, Detail: fmt.Sprint(r)})
		}
	}()
	return opts.Fetch(ctx, w, req)
}

// ReadFetch is the Fetch of Options for a wal.Reader over w.Store and
// w.Liar: it fetches req and checks every FindBatches answer the reader
// got with CheckFetch.
func ReadFetch(ctx context.Context, w *World, req wal.FindBatchesRequest) []Violation {
	r, err := wal.NewReader(wal.ReaderOptions{Store: w.Store, ControlPlane: w.Liar})
	if err != nil {
		return []Violation{{Class: ClassWholeCall, Detail: err.Error()}}
	}
	w.Liar.TakeAnswers()
	res, err := r.Fetch(ctx, req)
	answers := w.Liar.TakeAnswers()
	if err != nil || len(answers) != 1 {
		return []Violation{{Class: ClassWholeCall, Detail: fmt.Sprintf("error %v after %d FindBatches calls", err, len(answers))}}
	}
	return w.CheckFetch(answers[0], res)
}
