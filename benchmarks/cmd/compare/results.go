package main

// results collects every figure of a run: one value per repetition for
// each (section, implementation, metric), plus notes.
type results struct {
	vals  map[cellKey][]float64
	notes map[rowKey][]string
}

type rowKey struct{ section, impl string }

type cellKey struct {
	rowKey
	metric string
}

func newResults() *results {
	return &results{vals: map[cellKey][]float64{}, notes: map[rowKey][]string{}}
}

func (r *results) add(section string, im impl, metric string, v float64) {
	k := cellKey{rowKey{section, im.Name()}, metric}
	r.vals[k] = append(r.vals[k], v)
}

// addRow is add for a row that is not an impl (the producer rows).
func (r *results) addRow(section, name, metric string, v float64) {
	k := cellKey{rowKey{section, name}, metric}
	r.vals[k] = append(r.vals[k], v)
}

// note records a remark shown in the row's notes, once.
func (r *results) note(section, impl, text string) {
	k := rowKey{section, impl}
	for _, t := range r.notes[k] {
		if t == text {
			return
		}
	}
	r.notes[k] = append(r.notes[k], text)
}

// median returns the median over repetitions and whether there is any.
func (r *results) median(section, impl, metric string) (float64, bool) {
	v := r.vals[cellKey{rowKey{section, impl}, metric}]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}
