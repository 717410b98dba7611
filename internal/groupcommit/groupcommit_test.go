package groupcommit

import (
	"sync"
	"testing"
)

// TestDo: every call is written exactly once, before its Do returns, in a
// group of at most max calls; one leader writes at a time; and the calls
// of one caller, made one after the other, are written in that order.
func TestDo(t *testing.T) {
	const callers, calls, maxGroup = 16, 200, 5
	type call struct {
		caller, seq int
		written     bool
	}
	var q Queue[*call]
	var mu sync.Mutex
	writing := false
	last := make([]int, callers)
	for i := range last {
		last[i] = -1
	}
	groups := 0
	write := func(group []*call) {
		mu.Lock()
		defer mu.Unlock()
		if writing {
			t.Error("two leaders write at once")
		}
		writing = true
		defer func() { writing = false }()
		if len(group) == 0 || len(group) > maxGroup {
			t.Errorf("group of %d calls", len(group))
		}
		groups++
		for _, c := range group {
			if c.written {
				t.Errorf("caller %d call %d written twice", c.caller, c.seq)
			}
			if c.seq != last[c.caller]+1 {
				t.Errorf("caller %d: call %d after %d", c.caller, c.seq, last[c.caller])
			}
			c.written, last[c.caller] = true, c.seq
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < calls; s++ {
				c := &call{caller: w, seq: s}
				q.Do(c, maxGroup, write)
				mu.Lock()
				ok := c.written
				mu.Unlock()
				if !ok {
					t.Errorf("caller %d call %d returned unwritten", w, s)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls in %d groups", callers*calls, groups)
}
