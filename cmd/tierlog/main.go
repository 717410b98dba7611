// Command tierlog inspects the files of a tierlog partition: segments,
// indexes, checkpoints, producer snapshots, the remote segment metadata
// store and the diskless WAL control plane. It is to tierlog what Kafka's
// kafka-dump-log.sh (DumpLogSegments) is to a Kafka log directory.
//
// Usage:
//
//	tierlog dump-log [--deep] [--print-values] [--max-value-bytes N] <file.log>
//	tierlog dump-index [--no-verify] <file.index | file.timeindex>
//	tierlog epochs <partition dir | leader-epoch-checkpoint>
//	tierlog snapshot <file.snapshot>
//	tierlog checkpoint <partition dir | offsets-checkpoint>
//	tierlog describe <partition dir>
//	tierlog remote-segments [--topic-id ID] [--partition N] <metadata dir>
//	tierlog describe-replica --metadata DIR --topic-id ID --partition N
//	        --seal S --cross-tier-start X [--high-watermark H] [--seal-lineage E@S,...]
//	        <partition dir>
//	tierlog wal-partition --topic-id ID --partition N <control-plane dir>
//
// Every command takes --json to print one JSON document instead of text.
// Flags may come before or after the file.
//
// # Nothing is changed
//
// The tool never writes to what it inspects. Local files are read with
// plain reads and decoded by the public decoders of packages log, record
// and epochcache; the log itself is never opened, because log.Open
// recovers unflushed segments, deletes temporary files and removes the
// clean-shutdown marker. The Pebble stores (remote metadata, control
// plane) are opened with Pebble's read-only mode, which replays their
// write-ahead log in memory and writes nothing. Pebble still takes its
// directory lock in that mode, so a store a running broker holds open
// cannot be inspected (the open fails); inspect a copy, or stop the broker.
//
// # Exit status
//
// 0 when everything read was valid; 1 when the input is damaged (a CRC
// mismatch, a torn batch, an index entry that does not match the .log)
// or cannot be read, after printing what could be read and one line per
// problem; 2 for a usage error.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
