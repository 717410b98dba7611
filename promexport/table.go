package promexport

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// row is one exported metric read from a snapshot of type M: one line of
// a table below per snapshot field, so a new field is one new line (and
// TestTablesCoverSnapshots fails until it has one).
type row[M any] struct {
	name string // full Prometheus name
	help string // ends with the Kafka name it mirrors, if any
	kind prometheus.ValueType
	// constLabels, for rows that split one family by a fixed label
	// (the rebuild errors by action).
	constLabels prometheus.Labels
	value       func(*M) float64
}

// table is a snapshot type's rows with their descriptors, built once.
type table[M any] struct {
	rows  []row[M]
	descs []*prometheus.Desc
}

func newTable[M any](labels []string, rows []row[M]) *table[M] {
	t := &table[M]{rows: rows}
	for _, r := range rows {
		t.descs = append(t.descs, prometheus.NewDesc(r.name, r.help, labels, r.constLabels))
	}
	return t
}

func (t *table[M]) describe(ch chan<- *prometheus.Desc) {
	for _, d := range t.descs {
		ch <- d
	}
}

// collect emits every row of snapshot m with the label values.
func (t *table[M]) collect(ch chan<- prometheus.Metric, m *M, labelValues ...string) {
	for i, r := range t.rows {
		ch <- prometheus.MustNewConstMetric(t.descs[i], r.kind, r.value(m), labelValues...)
	}
}

// Helpers that turn snapshot fields into Prometheus values: base units
// (seconds, bytes), booleans as 0 and 1.
func count(v int64) float64           { return float64(v) }
func seconds(d time.Duration) float64 { return d.Seconds() }

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unixSeconds converts a timestamp in milliseconds, keeping -1 (none).
func unixSeconds(ms int64) float64 {
	if ms < 0 {
		return -1
	}
	return float64(ms) / 1000
}
