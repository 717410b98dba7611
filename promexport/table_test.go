package promexport

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// TestTablesCoverSnapshots fails when a snapshot struct gains a field no
// row exports, or a row reads no field: for each field, a snapshot with
// only that field set must change at least one row's value, and each row
// must change for at least one field.
func TestTablesCoverSnapshots(t *testing.T) {
	t.Run("log.Metrics", func(t *testing.T) { checkCoverage(t, logTable) })
	t.Run("remote.ManagerMetrics", func(t *testing.T) {
		checkCoverage(t, remoteTable, "Partitions") // exported by remotePartitionTable
	})
	t.Run("remote.PartitionMetrics", func(t *testing.T) { checkCoverage(t, remotePartitionTable) })
	t.Run("tierstate.MachineMetrics", func(t *testing.T) { checkCoverage(t, rebuildTable) })
	t.Run("wal.WriterMetrics", func(t *testing.T) { checkCoverage(t, walWriterTable) })
	t.Run("wal.ReaderMetrics", func(t *testing.T) { checkCoverage(t, walReaderTable) })
	t.Run("wal.CacheMetrics", func(t *testing.T) { checkCoverage(t, walCacheTable) })
	t.Run("wal.CleanerMetrics", func(t *testing.T) { checkCoverage(t, walCleanerTable) })
	t.Run("pgcp.Metrics", func(t *testing.T) { checkCoverage(t, walPGTable) })
}

func checkCoverage[M any](t *testing.T, tab *table[M], elsewhere ...string) {
	var zero M
	base := rowValues(tab, &zero)
	typ := reflect.TypeFor[M]()
	rowsRead := make([]bool, len(tab.rows))
	for i := range typ.NumField() {
		f := typ.Field(i)
		if contains(elsewhere, f.Name) {
			continue
		}
		var m M
		setNonZero(t, reflect.ValueOf(&m).Elem().Field(i), f)
		read := false
		for j, v := range rowValues(tab, &m) {
			if v != base[j] {
				read, rowsRead[j] = true, true
			}
		}
		require.True(t, read, "%s.%s is exported by no row: add one to its table", typ, f.Name)
	}
	for j, ok := range rowsRead {
		require.True(t, ok, "row %s reads no field of %s", tab.rows[j].name, typ)
	}
}

func rowValues[M any](tab *table[M], m *M) []float64 {
	out := make([]float64, len(tab.rows))
	for i, r := range tab.rows {
		out[i] = r.value(m)
	}
	return out
}

func setNonZero(t *testing.T, v reflect.Value, f reflect.StructField) {
	switch {
	case f.Type == reflect.TypeFor[time.Duration]():
		v.SetInt(int64(7 * time.Second))
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64 || v.Kind() == reflect.Int32:
		v.SetInt(7)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case f.Type == reflect.TypeFor[map[string]int64]():
		// A count by cause (wal.WriterMetrics.Rejected): every cause the
		// wal package counts, each of which a row must export.
		m := map[string]int64{}
		for _, r := range walRejections {
			m[r.err.Error()] = 7
		}
		v.Set(reflect.ValueOf(m))
	case v.Kind() == reflect.Struct:
		// A group of values (pgcp.Metrics.CommitStages): each set, so
		// a row reading any of them counts.
		for i := range v.NumField() {
			setNonZero(t, v.Field(i), f.Type.Field(i))
		}
	default:
		t.Fatalf("field %s of type %s: teach setNonZero and the table its kind", f.Name, f.Type)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The tables read these types; a compile error here means a snapshot
// type moved.
var (
	_ *table[log.Metrics]              = logTable
	_ *table[remote.ManagerMetrics]    = remoteTable
	_ *table[remote.PartitionMetrics]  = remotePartitionTable
	_ *table[tierstate.MachineMetrics] = rebuildTable
	_ *table[wal.WriterMetrics]        = walWriterTable
	_ *table[wal.ReaderMetrics]        = walReaderTable
	_ *table[wal.CacheMetrics]         = walCacheTable
	_ *table[wal.CleanerMetrics]       = walCleanerTable
)
