// Package wal is the diskless write-ahead log: brokers write the Kafka v2
// batches of many partitions into one shared object, and a control plane
// assigns each partition's offsets when the object is committed (KIP-1150,
// KIP-1163; the control plane is KIP-1164's batch coordinator).
//
// # Model
//
// The control plane keeps, per partition, a row
//
//	W   WAL start (Kafka: log start offset of the diskless log), inclusive
//	HW  high watermark = log end offset, exclusive: the next offset to assign
//	S   diskless start offset (the seal of a switched partition)
//	X   cross-tier log start (remote + local + WAL), inclusive, -1 if unknown
//
// and the batches with W <= offset < HW, each pointing at a byte range of
// one object:
//
//	offsets   W=0            10             20=HW
//	          [ batch 0..9  ][ batch 10..19 ]
//	objects    obj-a@0+123    obj-b@456+99
//
// CommitFile (and CommitFiles, a list of them decided one after the
// other) is the only call that assigns offsets: per partition, in the
// order of the request's list, each accepted batch gets [HW, HW+n) and
// advances HW by n. Rejected batches (unknown partition, duplicate,
// out-of-order sequence, fenced producer epoch) keep their bytes in the
// object but consume no offsets. All partitions of one object commit
// atomically, and the same object key committed again returns the first
// commit's answer.
//
// An object whose last live batch goes (DeleteRecords, PruneDisklessLogs,
// DeleteTopics, or no batch accepted at commit) is marked for deletion;
// FilesToDelete hands it to the cleaner after a grace period. Keys are
// reserved before their upload (ReserveObject) so that objects of a writer
// that crashed between upload and commit are found (ExpireReservations)
// rather than leaked. A reaped key is never registered afterwards: a
// writer slower than the reaper gets ErrObjectReaped from CommitFile.
//
// The pure rules every control plane shares live here: the idempotent
// producer check (CheckSequence), the WAL start after a prune
// (PrunedLogStart), retention (RetentionScan), the fetch budgets
// (FindBudget), the commit request's own checks
// (CommitFileRequest.Validate, InitDisklessLogRequest.Validate), the
// ListOffsets answers the row alone decides (FixedListOffset) and the
// stored commit answer (BatchStatus, StoredBatchResult, RejectedResult,
// CommitAnswer), so that a retried commit answers as the first did. So does the object format (object.go):
// batches grouped by partition and a footer from which ParseObject
// rebuilds an object's commit coordinates.
//
// The data path: Writer buffers produce requests of many partitions into
// one object, reserves its key, uploads it and commits objects in the
// order it sealed them, those uploaded while a commit was in flight
// together in one ControlPlane.CommitFiles call (decided in list order,
// written by the plane's group commit in one durable step), answering
// each request only once its object is
// durable and committed, or with a retriable error at the latest when the
// object's deadline (WriterOptions.ObjectTimeout) passes. Reader serves fetches from objects through
// FindBatches (one ranged GET per object, or per group of nearby
// partitions' ranges of it: ReaderOptions.MaxCoalesceGap, read straight
// into the partitions' answers; or the write-through ObjectCache),
// checking every batch against its
// coordinates, the offsets before it and, where the control plane stored
// one, the binding committed for it (see FetchResult). A caller done
// with an answer gives its buffer back (Reader.Release): later answers
// are read into it, not into fresh memory (ReaderOptions.AnswerPoolBytes
// bounds what the Reader keeps). Cleaner
// deletes objects the control plane marked, after a grace period, and
// reaps orphans (objects uploaded but never committed).
//
// Control planes: package wal/pebblecp (embedded, on Pebble) and package
// wal/pgcp (on PostgreSQL, shared by many brokers). Both store
// contiguous batches of one partition in one object, committed together,
// as one row, a run (run.go: JoinRun, SplitRun, CutRun), and answer
// FindBatches, ListOffsets and retention batch by batch from it, so a
// run is never seen outside a plane. Package
// wal/controlplanetest is the conformance suite each runs.
package wal
