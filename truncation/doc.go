// Package truncation holds what the log and the remote tier share about
// truncations: the count of truncations that changed a log, and the fence
// that stops progress computed before a truncation from being installed
// after it (the Inkless truncation counter of
// https://github.com/aiven/inkless/pull/857).
//
// # Why a fence
//
// Remote-log tasks compute progress without the log lock: the follower
// task looks up the highest offset in remote storage for the epochs in
// the log's epoch cache, the copy task uploads a segment and then reports
// its end offset. A truncation can run in between and remove the very
// offsets that progress describes. If the task then installed it, the log
// would claim remote storage covers records it no longer has, and local
// retention or the WAL pruner would act on that claim.
//
//	task:  count := log.TruncationCount()   // c, read under the log lock
//	task:  offset := lookup(log epochs)     // no log lock held
//	log:   TruncateTo(t)                    // count becomes c+1
//	task:  log.UpdateHighestOffsetInRemoteStorage(offset, c)  // refused
//
// A truncation that changes the log increments the count inside the same
// critical section that changes the log, so a reader of the count sees
// either the old count with the old log or the new count with the new log.
// A value is installed only together with the count it was computed
// under, and only if the log's count has not moved since.
//
// # Plans
//
// PlanDivergence decides where a follower cuts its log after the leader's
// OffsetsForLeaderEpoch answer, and PlanOutOfRangeReset what it does after
// OFFSET_OUT_OF_RANGE. Both are pure functions of plain values.
//
// This package decides; package log keeps the count and executes.
package truncation
