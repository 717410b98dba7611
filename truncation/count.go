package truncation

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/mutation"
)

// Count is the number of truncations that changed one log instance (and
// of remote-progress fences, which a role change sets: progress computed
// before one is stale as if the log had been truncated). It starts at 0
// when the log is opened or created and only grows. It is not
// persisted: a reopened or recreated log is a new instance, and progress
// computed against the old instance must be recomputed anyway.
type Count uint64

// Fenced is a value computed while the log's truncation count was Count.
// It may be installed only if the count is still the same (Valid).
type Fenced[T any] struct {
	Value T
	// Count is the truncation count read, under the log lock, before the
	// state the value was computed from was read.
	Count Count
}

// Fence pairs v with the count it was computed under.
func Fence[T any](v T, c Count) Fenced[T] { return Fenced[T]{Value: v, Count: c} }

// Valid reports whether the value may be installed on a log whose count
// is now current: no truncation changed the log since the value's count
// was read. The caller must hold the log lock while checking and
// installing, so no truncation can slip in between.
func (f Fenced[T]) Valid(current Count) bool {
	return f.Count == current || mutation.Disabled(mutation.TruncationFence)
}

// String formats the value with its count, as tests print it: "119@c2".
func (f Fenced[T]) String() string { return fmt.Sprintf("%v@c%d", f.Value, f.Count) }
