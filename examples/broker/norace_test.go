//go:build !race

package main

// kgoRecordsPerCodec is TestKgoIdempotentCodecs' record count per codec
// (race_test.go lowers it under -race).
const kgoRecordsPerCodec = 100_000
