package sim

import (
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
)

// trace is a run's record: one line per step (step number, action,
// broker, what it did with the offsets and epochs), with the details
// of the step (deltas, commits) appended to its line.
type trace struct {
	lines   []string
	details []string
	sink    func(string)
}

// detail adds a note to the step being run.
func (t *trace) detail(format string, args ...any) {
	t.details = append(t.details, fmt.Sprintf(format, args...))
}

func (t *trace) dropDetails() { t.details = nil }

func (t *trace) line(step int, action string, broker int32, summary string) {
	who := "  "
	if broker >= 0 {
		who = fmt.Sprintf("b%d", broker)
	}
	s := fmt.Sprintf("%4d %-12s %s %s", step, action, who, summary)
	if len(t.details) > 0 {
		s += " | " + strings.Join(t.details, " | ")
		t.details = nil
	}
	t.lines = append(t.lines, s)
	if t.sink != nil {
		t.sink(s)
	}
}

// Trace returns every line written so far.
func (c *Cluster) Trace() []string { return append([]string(nil), c.trace.lines...) }

// TraceTail returns the last n lines, joined.
func (c *Cluster) TraceTail(n int) string {
	l := c.trace.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func formatEpochs(e []epochcache.Entry) string { return epochcache.FormatEntries(e) }
