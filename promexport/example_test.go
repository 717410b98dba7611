package promexport_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/promexport"
)

// A broker registers each partition's log as it opens it (and removes it
// before closing it), then serves the registry, for instance with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) on /metrics.
func ExampleCollector() {
	l, err := log.Open("orders-0", log.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for range 3 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(1_700_000_000_000, []byte("key"), []byte("value"))
		batch, err := b.Build()
		if err != nil {
			panic(err)
		}
		if _, err := l.AppendAsLeader(batch, 0, log.OriginClient); err != nil {
			panic(err)
		}
	}

	c := promexport.NewCollector()
	if err := c.AddLog("orders", 0, l); err != nil {
		panic(err)
	}
	defer c.RemoveLog("orders", 0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	// What a scrape of /metrics shows, for two of the log's metrics.
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain,
		"tierlog_log_log_end_offset", "tierlog_log_appended_batches_total")
	if err != nil {
		panic(err)
	}
	fmt.Print(string(text))
	// Output:
	// # HELP tierlog_log_appended_batches_total Record batches appended since the log was opened.
	// # TYPE tierlog_log_appended_batches_total counter
	// tierlog_log_appended_batches_total{partition="0",topic="orders"} 3
	// # HELP tierlog_log_log_end_offset Offset the next appended record receives. Kafka: kafka.log:type=Log,name=LogEndOffset.
	// # TYPE tierlog_log_log_end_offset gauge
	// tierlog_log_log_end_offset{partition="0",topic="orders"} 3
}
