package wal

import "time"

// UploadBackoffForTesting returns a draw of the wait before retry
// attempt+1 of a Put.
func (w *Writer) UploadBackoffForTesting(attempt int) time.Duration { return w.uploadBackoff(attempt) }

// SetBeforeBuildForTesting makes every upload goroutine call f(key) after
// it takes its upload slot and before it builds the object. Call it before
// the first Produce.
func (w *Writer) SetBeforeBuildForTesting(f func(key string)) { w.beforeBuildForTesting = f }

// SetAfterUploadForTesting makes every upload goroutine call f(key) once
// its object's upload answered, as the committer sees it. Call it before
// the first Produce.
func (w *Writer) SetAfterUploadForTesting(f func(key string)) { w.afterUploadForTesting = f }

// SetPoisonReleasedForTesting makes Release overwrite every buffer it
// pools with PoisonByteForTesting (on in invariants builds anyway); the
// returned func restores the setting.
func SetPoisonReleasedForTesting(on bool) (restore func()) {
	was := poisonReleased
	poisonReleased = on
	return func() { poisonReleased = was }
}

// PoisonByteForTesting is the byte released buffers are poisoned with.
const PoisonByteForTesting = poisonByte

// AnswerPoolHeldForTesting is the bytes of free answer buffers r keeps.
func (r *Reader) AnswerPoolHeldForTesting() int64 { return r.answers.heldBytes() }
