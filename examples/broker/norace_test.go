//go:build !race

package main

const (
	// kgoRecordsPerCodec is how many records TestKgoIdempotentCodecs
	// produces with each codec (race_test.go lowers it under -race).
	kgoRecordsPerCodec = 100_000
	// crossRecords is how many records each writer produces per codec in
	// TestClientsCrossRead (race_test.go lowers it under -race).
	crossRecords = 10_000
)
