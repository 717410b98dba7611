package kafkaerr

// notAnswers are the exported sentinels that are not Kafka answers, each
// with the reason: Code answers UNKNOWN_SERVER_ERROR for them, as for any
// error it does not know. A sentinel is listed here only if no request a
// broker answers can fail with it alone, or if it reaches a broker only
// inside an error that a rule maps.
var notAnswers = map[string]string{
	// log
	"log.ErrSegmentNotFound":        "OpenSegment's answer (inspection and tools), never a request's",
	"log.ErrUnexpectedAppendOffset": "a follower append below the log end: the replica fetcher's own failure (Kafka's UnexpectedAppendOffsetException is no ApiException)",
	"log.ErrOffsetsOutOfOrder":      "a follower append out of order: the replica fetcher's own failure (Kafka's OffsetsOutOfOrderException is no ApiException)",
	"log.ErrHighWatermarkBeyondEnd": "a caller bug: the leader moved the high watermark past its log end",

	// logmanager: refusals at a broker's start or of an operator's move
	"logmanager.ErrDuplicateLog": "Open's refusal of a partition in two log directories: the broker does not start (as Kafka)",
	"logmanager.ErrFutureExists": "a log directory move already under way elsewhere: the broker's AlterReplicaLogDirs handling, before any log",

	// remote: the background tasks and the metadata manager
	"remote.ErrTaskCancelled":          "a copy, follower or expiration task stopped by a leadership change or shutdown: no request waits on it",
	"remote.ErrCustomMetadataTooLarge": "the copy task's refusal of a storage manager's metadata (Kafka cancels the copy task)",
	"remote.ErrNoLeaderEpoch":          "the copy task's refusal of a segment without an epoch",
	"remote.ErrCopyStalled":            "the copy task's state at a corrupt local segment",
	"remote.ErrInvalidSegmentMetadata": "the metadata manager's validation of the copy task's own metadata (a caller bug; it also matches ErrInvalidArgument)",
	"remote.ErrInvalidTransition":      "the metadata manager's refusal of a segment state change by the tasks (Kafka's cache logs and drops it)",
	"remote.ErrSegmentNotFound":        "the metadata manager's refusal of an update for an unknown segment id (the tasks')",
	"remote.ErrSegmentIDReused":        "the metadata manager's refusal of a reused segment id (the copy task's)",
	"remote.ErrIndexNotFound":          "FetchIndex of a transaction index a segment does not have: the remote read handles it as no aborted transactions",

	// remote/objstore and its stores
	"remote/objstore.ErrPreconditionFailed": "a put with if-none-match found the key: the writers' idempotence check, handled by them",
	"remote/objstore.ErrInvalidRange":       "a caller bug: a ranged get outside the object",
	"remote/objstore.ErrInvalidKey":         "a caller bug: an object key the store refuses",
	"remote/objstore.ErrInvalidArgument":    "a caller bug: a value the store's API refuses",
	"remote/objstore/mem.ErrInjected":       "the test store's injected fault",
	"remote/objstore/mem.ErrLostResponse":   "the test store's injected lost response",
	"remote/objstore/s3.ErrChecksum":        "the S3 adapter's cause: kafkaerr does not import the adapter (minio-go); the remote tier reports a failed read with its own sentinels",

	// replica
	"replica.ErrNoMove": "a log directory move the driver was not configured for: the broker's AlterReplicaLogDirs handling, before any log",

	// tierstate: the follower's rebuild and the operator tool
	"tierstate.ErrRemoteStorageNotEnabled":      "a follower's rebuild step: the fetcher backs off (Kafka's RemoteStorageException), it answers no request",
	"tierstate.ErrRemoteStorageNotReady":        "a follower's rebuild step or an operator check's reason: the fetcher backs off",
	"tierstate.ErrRemoteSegmentNotFound":        "a follower's rebuild step: the fetcher backs off until the copy finishes",
	"tierstate.ErrRemoteEpochsInconsistent":     "a follower's rebuild step: nothing is restored from inconsistent remote data",
	"tierstate.ErrRecoveryRefused":              "the operator tool's refusal (kafka-topic-switch.sh), before any request",
	"tierstate.ErrHighWatermarkNotAtSeal":       "the operator tool's refusal (kafka-topic-switch.sh elect), before any request",
	"tierstate.ErrClassicPrefixGap":             "the operator tool's refusal (kafka-topic-switch.sh elect), before any request",
	"tierstate.ErrSealLineageMismatch":          "the operator tool's refusal (kafka-topic-switch.sh elect), before any request",
	"tierstate.ErrSealOutOfRange":               "the operator tool's refusal (kafka-topic-switch.sh seal), before any request",
	"tierstate.ErrSealInsideBatch":              "the operator tool's refusal (kafka-topic-switch.sh seal), before any request",
	"tierstate.ErrForcedSealBelowLogEnd":        "the operator tool's refusal (kafka-topic-switch.sh seal while the seal is pending), before any request",
	"tierstate.ErrForcedSealAboveHighWatermark": "the operator tool's refusal (kafka-topic-switch.sh seal above the leader's high watermark while the seal is pending), before any request",
	"tierstate.ErrNoLeader":                     "the operator tool's refusal (kafka-topic-switch.sh seal without a leader), before any request",
	"tierstate.ErrReplicaHoldsClassicPrefix":    "the operator tool's refusal (kafka-topic-switch.sh start-phase-2), before any request",
	"tierstate.ErrDataLossNotAccepted":          "the operator tool's refusal (kafka-topic-switch.sh start-phase-2), before any request",
	"tierstate.ErrReplicaNotDescribed":          "the operator tool's refusal: no broker answered the description",

	// consolidate
	"consolidate.ErrLogPastSeal": "the leader's switch step (InitDisklessLog) on a log that does not end at the seal: the driver retries it",
	"consolidate.ErrNotAtLogEnd": "the consolidation fetcher's refusal to append a batch with a hole: it backs off and fetches again",

	// wal
	"wal.ErrObjectKeyReused": "the control plane's refusal of a reused object key: the writer's own, which fails the produce with ErrCommitFailed",
	"wal.ErrObjectReaped":    "the control plane's refusal of a reaped object key: the writer's own, which fails the produce with ErrCommitFailed",

	// wal/pgcp
	"wal/pgcp.ErrUnreachable":    "the PostgreSQL adapter's cause: kafkaerr does not import it (pgx); the writer wraps it in ErrCommitFailed (KAFKA_STORAGE_ERROR)",
	"wal/pgcp.ErrOutcomeUnknown": "the PostgreSQL adapter's cause: kafkaerr does not import it (pgx); the writer wraps it in ErrCommitFailed (KAFKA_STORAGE_ERROR)",
	"wal/pgcp.ErrSchemaTooNew":   "Open's refusal of a newer schema, at startup",

	// promexport
	"promexport.ErrDuplicate":       "registering the same collector twice: a broker's setup bug",
	"promexport.ErrInvalidArgument": "a broker's setup bug: a value the exporter refuses",
}
