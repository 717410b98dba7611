package wal

import "time"

// Clock is the time source of a Writer and a Cleaner. Tests inject a fake
// one so that rotation by interval and grace periods run without sleeps.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// the returned Timer is stopped first (time.AfterFunc).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable AfterFunc (*time.Timer satisfies it).
type Timer interface {
	// Stop prevents the call if it has not started and reports whether
	// it did.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
