package wal

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/remote/objstore"
)

// CleanerOptions configure a Cleaner. Zero values mean the defaults.
type CleanerOptions struct {
	// Store holds the objects. Required.
	Store objstore.Store
	// ControlPlane lists what to delete. Required.
	ControlPlane ControlPlane
	// GracePeriod is how long an object marked for deletion is kept, for
	// readers that still hold its coordinates. It must exceed twice any
	// coordinate-cache lifetime. Default 60 s. Inkless:
	// inkless.file.cleaner.retention.period.ms.
	GracePeriod time.Duration
	// ReservationTimeout is the age after which a reserved, uncommitted
	// key is an orphan (its writer crashed between upload and commit).
	// It must exceed the longest a live writer takes from a reservation
	// to its commit, which WriterOptions.CommitInterval (the object fills
	// after its key is reserved) plus ObjectTimeout bound (default 250 ms
	// + 30 s). Default 10 min.
	ReservationTimeout time.Duration
	// MaxFilesPerRun caps the deletions of one Run. Default 1000.
	// Inkless: inkless.file.cleaner.max.files.per.cycle.
	MaxFilesPerRun int
	// Cache, if non-nil, forgets the deleted objects.
	Cache *ObjectCache
	// Clock is the time source. Default SystemClock.
	Clock Clock
	// Logger; default zap.NewNop().
	Logger *zap.Logger
	// Listener receives events, on the goroutine calling Run.
	Listener CleanerListener
}

// CleanerListener receives a Cleaner's events. Nil fields are skipped.
type CleanerListener struct {
	// ObjectDeleted is called for every object the store confirmed
	// deleted; orphan says it was reaped (never committed).
	ObjectDeleted func(key string, orphan bool)
}

// Cleaner deletes WAL objects nobody references: those the control plane
// marked for deletion (after the grace period) and orphans (reserved but
// never committed). The broker calls Run periodically (Inkless runs its
// FileCleaner every two minutes on every broker); Runs on several brokers
// may overlap, because deleting a missing object succeeds and DeleteFiles
// ignores forgotten keys.
type Cleaner struct {
	opts    CleanerOptions
	metrics cleanerCounters
}

// NewCleaner returns a Cleaner.
func NewCleaner(opts CleanerOptions) (*Cleaner, error) {
	if opts.Store == nil || opts.ControlPlane == nil {
		return nil, invalidf("cleaner needs a Store and a ControlPlane")
	}
	setDefault(&opts.GracePeriod, 60*time.Second)
	setDefault(&opts.ReservationTimeout, 10*time.Minute)
	setDefault(&opts.MaxFilesPerRun, 1000)
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Cleaner{opts: opts}, nil
}

// CleanResult says what one Run did.
type CleanResult struct {
	// Deleted counts marked objects deleted and forgotten.
	Deleted int
	// OrphansReaped counts orphans deleted from the store (their rows,
	// marked for deletion, are forgotten by a later Run, after the grace
	// period, so that a very late commit of the key still fails).
	OrphansReaped int
	// DeleteErrors counts store deletes that failed; those objects stay
	// marked and the next Run retries them.
	DeleteErrors int
	// Saturated: more objects were due than MaxFilesPerRun.
	Saturated bool
}

// Run reaps the orphans, then deletes the objects marked for deletion
// longer than the grace period ago, and forgets in the control plane only
// the objects whose delete the store confirmed.
func (c *Cleaner) Run(ctx context.Context) (CleanResult, error) {
	var res CleanResult
	now := c.opts.Clock.Now()
	orphans, err := c.opts.ControlPlane.ExpireReservations(ctx, now.Add(-c.opts.ReservationTimeout), c.opts.MaxFilesPerRun)
	if err != nil {
		return res, err
	}
	for _, key := range orphans {
		if c.delete(ctx, key, true) {
			res.OrphansReaped++
		} else {
			res.DeleteErrors++
		}
	}
	// One more than the cap, as a probe for saturation.
	files, err := c.opts.ControlPlane.FilesToDelete(ctx, now.Add(-c.opts.GracePeriod), c.opts.MaxFilesPerRun+1)
	if err != nil {
		return res, err
	}
	if len(files) > c.opts.MaxFilesPerRun {
		res.Saturated = true
		files = files[:c.opts.MaxFilesPerRun]
	}
	var confirmed []string
	for _, f := range files {
		if c.delete(ctx, f.ObjectKey, false) {
			confirmed = append(confirmed, f.ObjectKey)
		} else {
			res.DeleteErrors++
		}
	}
	if len(confirmed) > 0 {
		if err := c.opts.ControlPlane.DeleteFiles(ctx, confirmed); err != nil {
			// The objects are gone but still listed: the next Run deletes
			// them again (a no-op) and forgets them then.
			return res, err
		}
	}
	res.Deleted = len(confirmed)
	c.metrics.filesAwaiting.Store(int64(len(files) - len(confirmed)))
	return res, nil
}

// delete removes one object from the store and reports whether the store
// confirmed it.
func (c *Cleaner) delete(ctx context.Context, key string, orphan bool) bool {
	if err := c.opts.Store.Delete(ctx, key); err != nil {
		c.metrics.deleteErrors.Add(1)
		c.opts.Logger.Warn("wal: object delete failed", zap.String("key", key), zap.Bool("orphan", orphan), zap.Error(err))
		return false
	}
	if c.opts.Cache != nil {
		c.opts.Cache.Remove(key)
	}
	if orphan {
		c.metrics.orphansReaped.Add(1)
		c.opts.Logger.Info("wal: orphan reaped", zap.String("key", key))
	} else {
		c.metrics.objectsDeleted.Add(1)
	}
	if f := c.opts.Listener.ObjectDeleted; f != nil {
		f(key, orphan)
	}
	return true
}

// CleanerMetrics is a snapshot of a Cleaner's counters.
type CleanerMetrics struct {
	ObjectsDeleted int64
	OrphansReaped  int64
	DeleteErrors   int64
	// FilesAwaitingDeletion is, as of the last Run, how many due objects
	// it could not delete (a gauge).
	FilesAwaitingDeletion int64
}

type cleanerCounters struct {
	objectsDeleted, orphansReaped, deleteErrors, filesAwaiting atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (c *Cleaner) Metrics() CleanerMetrics {
	m := &c.metrics
	return CleanerMetrics{ObjectsDeleted: m.objectsDeleted.Load(), OrphansReaped: m.orphansReaped.Load(),
		DeleteErrors: m.deleteErrors.Load(), FilesAwaitingDeletion: m.filesAwaiting.Load()}
}
