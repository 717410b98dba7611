package walcheck

import (
	"context"
	"fmt"
	"testing"

	"github.com/tierlog/tierlog/wal"
)

// referenceFetch checks a Reference reader's answers.
func referenceFetch(r Reference) func(ctx context.Context, w *World, req wal.FindBatchesRequest) []Violation {
	return func(ctx context.Context, w *World, req wal.FindBatchesRequest) []Violation {
		w.Liar.TakeAnswers()
		r.Store, r.ControlPlane = w.Store, w.Liar
		res, err := r.Fetch(ctx, req)
		answers := w.Liar.TakeAnswers()
		if err != nil || len(answers) != 1 {
			return []Violation{{Class: ClassWholeCall, Detail: fmt.Sprint(err)}}
		}
		return w.CheckFetch(answers[0], res)
	}
}

func modelPlane(testing.TB) wal.ControlPlane { return NewModelPlane() }

// TestReferenceReaderPasses: the checker finds no fault in a reader that
// keeps the contract, over more iterations than the reader's test runs
// (fewer with -short).
func TestReferenceReaderPasses(t *testing.T) {
	iters := 1500
	if testing.Short() {
		iters = 400
	}
	Run(t, Options{Seed: 1, Iterations: iters, NewPlane: modelPlane, Fetch: referenceFetch(Reference{})})
}

// TestReferenceReaderWithoutBindingFails: the same reader without the
// binding check serves valid but foreign batches (another partition's,
// another object version's, a flipped leader epoch), and the checker
// says so within the reader test's short iteration count: the
// wal-read-binding guard's catching test relies on it.
func TestReferenceReaderWithoutBindingFails(t *testing.T) {
	seen, _ := Collect(t, Options{Seed: 1, Iterations: 300, NewPlane: modelPlane, Fetch: referenceFetch(Reference{SkipBinding: true})})
	for _, c := range []string{ClassForeign, ClassForeignBytes, ClassEpoch} {
		if seen[c] == nil {
			t.Errorf("without the binding check no %q in 300 iterations", c)
		} else {
			t.Logf("%s: %d times", c, seen[c].Count)
		}
	}
	for c := range seen {
		if c != ClassForeign && c != ClassForeignBytes && c != ClassEpoch && c != ClassOtherBatch {
			t.Errorf("without the binding check: unexpected %q: %+v", c, *seen[c])
		}
	}
}

// TestReferenceReaderWithoutContiguityFails: the same reader without the
// contiguity check serves gaps and overlaps from lying answers, and the
// checker says so within the reader test's short iteration count: the
// wal-read-gap guard's catching test relies on it.
func TestReferenceReaderWithoutContiguityFails(t *testing.T) {
	seen, _ := Collect(t, Options{Seed: 1, Iterations: 300, NewPlane: modelPlane, Fetch: referenceFetch(Reference{SkipContiguity: true})})
	for _, c := range []string{ClassOffset, ClassOtherBatch} {
		if seen[c] == nil {
			t.Errorf("without the contiguity check no %q in 300 iterations", c)
		} else {
			t.Logf("%s: %d times", c, seen[c].Count)
		}
	}
	for c := range seen {
		if c != ClassOffset && c != ClassOtherBatch && c != ClassNotPrefix {
			t.Errorf("without the contiguity check: unexpected %q: %+v", c, *seen[c])
		}
	}
}
