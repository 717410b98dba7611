//go:build race

package main

// kgoRecordsPerCodec is TestKgoIdempotentCodecs' record count per codec:
// lowered under -race, whose instrumentation makes the 100,000 of the
// normal run take too long on CI's two cores.
const kgoRecordsPerCodec = 20_000
