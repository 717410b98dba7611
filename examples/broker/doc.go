// Command broker is a minimal single-node Kafka broker on tierlog: real
// Kafka clients (franz-go's kgo in its tests) produce to it and consume
// from it. It shows which library call serves each request; each
// handler's comment names the call that does the work.
//
// Run it with:
//
//	go run ./examples/broker -addr 127.0.0.1:9092 -dir /tmp/tierlog-broker [-partitions N] [-flush-messages N]
//
// Acknowledged records are in the page cache, as Kafka's: with one
// replica, a crash of the machine can lose them unless -flush-messages 1
// fsyncs every append before its answer; a kill of the process loses
// nothing. At start every log's high watermark moves to its log end (one
// replica: everything on the log is committed), since after a crash the
// checkpointed one can be older than acknowledged records.
//
// What it serves (one goroutine per connection, requests answered in
// order, framing and the request header v1/v2 parsed by hand, bodies by
// franz-go's kmsg):
//
//   - ApiVersions: only the versions the handlers implement (versions.go);
//   - Metadata: this broker as node 0, leader of every partition, with
//     auto-creation of topics (-partitions, default 1); CreateTopics with
//     a partition count. A topic's id is generated at creation and kept
//     in each partition's partition.metadata by logmanager;
//   - Produce: acks 0, 1 and -1 (the same on one node), magic v2 batches
//     only, idempotent producers (log.UnifiedLog.AppendAsLeader checks
//     their sequences against the log's producer state), any of Kafka's
//     compression codecs (the log decompresses to validate);
//   - Fetch: read_uncommitted and read_committed, MaxWaitMillis and
//     MinBytes through log.UnifiedLog.WaitFor, MaxBytes and
//     PartitionMaxBytes; no fetch sessions;
//   - ListOffsets: earliest, latest (the high watermark or the last stable
//     offset), MAX_TIMESTAMP and timestamps;
//   - InitProducerId: ids from blocks of 1000 reserved durably in
//     DIR/producer-id-block, so they never repeat across restarts;
//   - shutdown on SIGINT or SIGTERM: no new connections or requests, the
//     requests in flight answered (long polls end early), then
//     logmanager.Manager.Close checkpoints the high watermarks and marks
//     the directory clean.
//
// Errors are answered with kafkaerr.ErrorCode of the library's typed
// errors; an I/O error takes the log directory offline
// (logmanager.Manager.ReportError) and its partitions then answer
// KAFKA_STORAGE_ERROR. The logs live in DIR/logs (a logmanager
// directory).
//
// The tests start the broker in-process on 127.0.0.1:0: franz-go's kgo
// produces 10,000 records (idempotent, acks=all) to three partitions and
// consumes them back byte for byte, also across a clean restart (high
// watermarks, topic ids and producer ids survive), 100,000 with each of
// its compression codecs, and across a SIGKILL of the broker process (the
// test binary re-executed) with a Produce request written but not
// answered: the same kgo client's retry is answered as a duplicate, and
// every acknowledged record is read back once; kgo, IBM/sarama and
// segmentio/kafka-go each produce 10,000 records with their default codec
// and with a compressed one, and each client reads back what every one of
// them wrote; kcat (librdkafka) produces and consumes with every codec;
// raw requests check the refusals, ListOffsets, the long poll and the
// shutdown during one.
//
// What a real broker must still add: replication between brokers
// (followers fetching, the ISR, a high watermark that follows the
// replicas, leader epochs from the controller), the controller and its
// metadata log (topics here are rebuilt from the directories at start),
// security (TLS, SASL, ACLs), consumer groups and committed offsets
// (FindCoordinator, JoinGroup, OffsetCommit: consumers here assign
// partitions themselves), transactions (the coordinator, markers;
// transactional ids are refused), fetch sessions, per-topic configs,
// quotas, DeleteRecords and the admin APIs, and topic ids in Produce v13
// and Fetch v13+.
package main
