// Command broker is a minimal single-node Kafka broker on tierlog: real
// Kafka clients (franz-go's kgo in its tests) produce to it and consume
// from it. It shows which library call serves each request; each
// handler's comment names the call that does the work.
//
// Run it with:
//
//	go run ./examples/broker -addr 127.0.0.1:9092 -dir /tmp/tierlog-broker [-partitions N] [-flush-messages N]
//	    [-segment-bytes N] [-local-retention-ms MS] [-local-retention-bytes N]
//	    [-remote=false | -s3-endpoint host:port -s3-bucket B [-s3-region R] [-s3-insecure]]
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
//     PartitionMaxBytes; below the local log start from the remote tier
//     (below); no fetch sessions;
//   - ListOffsets: earliest (the log start, the remote tier's start),
//     earliest-local (v8), latest-tiered (v9), latest (the high watermark
//     or the last stable offset), MAX_TIMESTAMP and timestamps (looked up
//     in the remote tier first when it holds offsets below the local log
//     start: remote.Manager.FindOffsetByTimestamp);
//   - InitProducerId: ids from blocks of 1000 reserved durably in
//     DIR/producer-id-block, so they never repeat across restarts;
//   - transactions (KIP-98, transaction version 1), a coordinator in the
//     broker (txn.go): InitProducerId with a transactional id (its
//     producer id and epoch durable in DIR/transaction-state; a new
//     InitProducerId bumps the epoch, fencing the older producers, and
//     aborts the id's open transaction), AddPartitionsToTxn v0-3 and EndTxn
//     v0-4; EndTxn makes its decision durable, then writes a COMMIT or
//     ABORT marker to each partition through log.UnifiedLog.AppendAsLeader
//     (log.OriginCoordinator, record.AppendEndTxnBatch), and the log keeps
//     the last stable offset and the aborted-transaction index that
//     read_committed fetches return. A transactional batch must belong to
//     the current epoch and to a partition added to the open transaction
//     (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE). Transactions older than
//     TransactionTimeoutMillis are aborted by a background check, which
//     fences their producers. At start, before serving, every transaction
//     a log holds open (log.UnifiedLog.OngoingTransactions) is ended: a
//     decided commit is completed, anything else aborted, including the
//     transactions of producers the state file does not know (lost), so
//     that no last stable offset stays behind;
//   - FindCoordinator: this broker coordinates every group and every
//     transactional id;
//   - OffsetCommit and OffsetFetch for simple consumer groups (consumers
//     that assign partitions themselves and commit in generation -1):
//     each partition's offset, leader epoch and metadata, kept in one
//     file per group in DIR/consumer-offsets, replaced atomically and
//     fsynced before the commit is answered, so an acknowledged commit
//     survives a kill of the process and a crash of the machine; fetched
//     by partition, for a whole group, or for several groups at once
//     (v8+); -1 for what was never committed. A commit in a generation is
//     answered as Kafka answers one for a group with no members
//     (GROUP_ID_NOT_FOUND, ILLEGAL_GENERATION before v9,
//     UNKNOWN_MEMBER_ID);
//   - OffsetForLeaderEpoch: the end offset of a leader epoch
//     (log.UnifiedLog.EndOffsetForEpoch, from the leader-epoch cache),
//     after the CurrentLeaderEpoch check; consumers ask it to validate a
//     position (a committed one, or after a leader change) and detect a
//     truncated log. The broker leads every partition in epoch 0, the
//     epoch Metadata announces: it records epoch 0 at the log end of each
//     log it serves, as Kafka's Partition.makeLeader does;
//   - shutdown on SIGINT or SIGTERM: no new connections or requests, the
//     requests in flight answered (long polls end early), then
//     logmanager.Manager.Close checkpoints the high watermarks and marks
//     the directory clean.
//
// The remote tier (KIP-405) is on by default (-remote=false turns it
// off): the objects go to DIR/remote (a directory object store,
// remote/objstore/fs) or to S3 (-s3-endpoint, -s3-bucket; credentials
// from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), their metadata to a
// Pebble database in DIR/remote-metadata (remote.MetadataManager). Every
// partition is registered with a remote.Manager as its leader (at start,
// and when a request first uses it): its copy task uploads each rolled
// segment below the last stable offset (never the active one) every
// -remote-task-interval, and its expiration task applies retention.ms to
// local plus remote data. Local retention (-local-retention-ms,
// -local-retention-bytes: Kafka's local.retention.*, default following
// retention.ms) runs every -retention-check-interval and deletes only
// segments already copied, so the log start offset stays at the remote
// tier's start while the local log start moves up. A fetch below the
// local log start (the log answers ErrOffsetMovedToTieredStorage) is
// served by remote.Manager.Read: the batches as the producer sent them,
// each CRC-checked, and for read_committed the aborted transactions of
// the remote transaction indexes; the seal and lineage checks are the
// library's. Close stops the remote tasks before the logs close.
//
// Errors are answered with kafkaerr.ErrorCode of the library's typed
// errors; an I/O error takes the log directory offline
// (logmanager.Manager.ReportError) and its partitions then answer
// KAFKA_STORAGE_ERROR. The logs live in DIR/logs (a logmanager
// directory). A remote read's errors map the same way (a corrupt remote
// batch is CORRUPT_MESSAGE, a segment expired meanwhile
// OFFSET_OUT_OF_RANGE); they never take the log directory offline.
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
// shutdown during one. Transactions: kgo runs 30 of 100 records, every
// third aborted, read back read_committed (the committed ones exactly)
// and read_uncommitted (all); a second producer with the same
// transactional id fences the first; the id's producer id and epoch
// survive a restart; a transaction open at a SIGKILL (its records
// acknowledged) is aborted at the restart, and read_committed consumers
// read past it. Committed offsets are read back after a clean restart,
// after a SIGKILL of the broker process, and from a crash clone of an
// in-memory file system that keeps only what was fsynced; a consumer
// resumes from a committed offset and epoch, kgo validating it with
// OffsetForLeaderEpoch, and a position past its epoch's end is reported
// as kgo.ErrDataLoss. The tiered tests
// (tiered_test.go) roll 8 KiB segments, wait until the remote tier holds
// them and local retention deleted them, and consume from offset 0 with
// kgo and kcat: the fetched batches are byte for byte the ones the local
// log held, the aborted transactions come from the remote transaction
// indexes, ListOffsets by timestamp finds records in the remote tier, and
// a clean restart keeps it all.
//
// What a real broker must still add: replication between brokers
// (followers fetching, the ISR, a high watermark that follows the
// replicas, leader epochs from the controller), the controller and its
// metadata log (topics here are rebuilt from the directories at start),
// security (TLS, SASL, ACLs), the group membership protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, KIP-848's ConsumerGroupHeartbeat:
// consumers here assign partitions themselves), ListGroups,
// DescribeGroups, DeleteGroups and OffsetDelete, the expiry of committed
// offsets (offsets.retention.minutes: they are kept forever), fetch
// sessions, per-topic configs, quotas, DeleteRecords and the admin APIs,
// topic ids in Produce v13 and Fetch v13+, and of transactions: offsets
// committed in a transaction (AddOffsetsToTxn, TxnOffsetCommit), KIP-890
// (AddPartitionsToTxn v4+, the broker-to-broker verification, is not
// served: the leader asks the coordinator in its own process; nor part
// 2's epoch bump per transaction, Produce v12 and EndTxn v5), a
// coordinator that moves to another broker (Kafka's replicated
// __transaction_state log; here one JSON file rewritten whole at each
// change, and a transaction open across a restart is aborted, not
// resumed), transactional id expiration, and DescribeTransactions,
// ListTransactions and DescribeProducers.
package main
