//go:build race

package main

// The record counts of TestKgoIdempotentCodecs and TestClientsCrossRead,
// lowered under -race: its instrumentation of the clients' codecs and
// protocol code as much as the broker's makes the normal run's 100,000
// and 10,000 records cost about a minute each on CI's two cores.
const (
	kgoRecordsPerCodec = 10_000
	crossRecords       = 2_000
)
