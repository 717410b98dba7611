package main

import (
	"fmt"
	"io"
	"strings"
)

// printPointReadPeers puts tierlog's point reads beside the NATS JetStream
// file store's and the raw file's, the figures the point-read goal is
// judged on (p99 at most 2 µs, and at least NATS's reads per second), with
// what one read returns, since that differs.
func printPointReadPeers(w io.Writer, res *results) {
	metrics := []string{"p50 µs", "p99 µs", "ops/s", "allocs/op", "KiB returned/op"}
	fmt.Fprintf(w, "### %s: tierlog beside the NATS JetStream file store\n\n", secPointRead)
	fmt.Fprintf(w, "Each cell: median (ratio to the NATS file store's). tierlog returns the whole 16 KiB batch "+
		"holding the offset, as a Kafka fetch does; the NATS file store returns the one 1 KiB message, from its "+
		"in-memory block cache once the warm-up has loaded the block.\n\n")
	fmt.Fprintf(w, "| implementation | %s |\n|%s\n", strings.Join(metrics, " | "), strings.Repeat("---|", len(metrics)+1))
	for _, name := range []string{tierlogName, natsName, rawName} {
		row := []string{name}
		for _, m := range metrics {
			v, ok := res.median(secPointRead, name, m)
			if !ok {
				row = append(row, "–")
				continue
			}
			ref, okRef := res.median(secPointRead, natsName, m)
			row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}
