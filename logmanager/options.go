package logmanager

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// Options configures a Manager. Zero means default for every field; Open
// copies the struct, fills the defaults and validates it. Durations below
// zero turn their task off.
type Options struct {
	// Dirs are the log directories (created if missing). Required.
	// Kafka: log.dirs.
	Dirs []string
	// FS is where the directories live. Default vfs.Default.
	FS vfs.FS
	// Log holds the defaults of every partition's log; FS, Logger and Now
	// are replaced by the manager's.
	Log log.Options
	// LogOptions, if set, returns the options of one partition's log
	// (Kafka's per-topic config overrides); its FS, Logger and Now are
	// replaced too. Default: Log for every partition.
	LogOptions func(tp remote.TopicIDPartition) log.Options

	// RecoveryThreadsPerDir bounds how many logs of one directory Open
	// opens (and recovers) and Close closes at a time. Default 1. Kafka:
	// num.recovery.threads.per.data.dir.
	RecoveryThreadsPerDir int
	// Serial makes Open and Close work on one directory at a time, in
	// Dirs order, one log and one fsync at a time (RecoveryThreadsPerDir
	// is taken as 1). Default false: the directories at once, as Kafka
	// does. For deterministic harnesses: a crash injected at the N-th
	// file operation then falls at the same operation in every run,
	// whatever the Go scheduler does.
	Serial bool
	// FlushCheckInterval is how often each log's flush policy is checked
	// (log.UnifiedLog.MaybeFlush). Default Log.FlushMs when set, else off
	// (Kafka: log.flush.scheduler.interval.ms, Long.MAX_VALUE).
	FlushCheckInterval time.Duration
	// HighWatermarkCheckpointInterval is how often each directory's
	// replication-offset-checkpoint is written. Default 5 s. Kafka:
	// replica.high.watermark.checkpoint.interval.ms.
	HighWatermarkCheckpointInterval time.Duration
	// OffsetCheckpointInterval is how often each directory's
	// recovery-point-offset-checkpoint and log-start-offset-checkpoint are
	// written. Default 60 s. Kafka: log.flush.offset.checkpoint.interval.ms,
	// log.flush.start.offset.checkpoint.interval.ms.
	OffsetCheckpointInterval time.Duration
	// RetentionCheckInterval is how often retention runs on every log
	// (log.UnifiedLog.DeleteOldSegments). Default 5 min. Kafka:
	// log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// ProducerIDExpirationCheckInterval is how often idle producers are
	// dropped (log.UnifiedLog.RemoveExpiredProducers). Default 10 min.
	// Kafka: producer.id.expiration.check.interval.ms.
	ProducerIDExpirationCheckInterval time.Duration
	// FileDeleteDelay is how long a deleted log's renamed directory stays
	// before it is removed (readers holding its files finish first).
	// Default 60 s; negative removes at the next check. Kafka:
	// file.delete.delay.ms.
	FileDeleteDelay time.Duration
	// NoBackgroundTasks starts no goroutine: the caller runs the tasks
	// with RunTask (tests, tools).
	NoBackgroundTasks bool

	// OnDirOffline, if set, is called once for each directory that goes
	// offline, with no lock of the manager held, after its logs are closed
	// (Kafka: LogDirFailureChannel's listener, the broker's
	// handleLogDirFailure).
	OnDirOffline func(DirFailure)
	// Logger receives the manager's events. Default zap.NewNop().
	Logger *zap.Logger
	// Now is the clock (deletion delays, and the logs' clock). Default
	// time.Now.
	Now func() time.Time
}

// DirFailure describes a directory that went offline.
type DirFailure struct {
	Dir   string
	Cause error
	// Partitions are the logs that were in it (current and future), now
	// closed.
	Partitions []PartitionInfo
}

// Defaults, as Kafka's.
const (
	DefaultHighWatermarkCheckpointInterval   = 5 * time.Second
	DefaultOffsetCheckpointInterval          = 60 * time.Second
	DefaultRetentionCheckInterval            = 5 * time.Minute
	DefaultProducerIDExpirationCheckInterval = 10 * time.Minute
	DefaultFileDeleteDelay                   = 60 * time.Second
)

func (o Options) withDefaults() (Options, error) {
	if len(o.Dirs) == 0 {
		return o, fmt.Errorf("logmanager: no log directories: %w", ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, d := range o.Dirs {
		if d == "" || seen[d] {
			return o, fmt.Errorf("logmanager: log directory %q empty or listed twice: %w", d, ErrInvalidArgument)
		}
		seen[d] = true
	}
	o.Dirs = append([]string(nil), o.Dirs...)
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.RecoveryThreadsPerDir == 0 {
		o.RecoveryThreadsPerDir = 1
	}
	if o.RecoveryThreadsPerDir < 0 {
		return o, fmt.Errorf("logmanager: RecoveryThreadsPerDir %d is negative: %w", o.RecoveryThreadsPerDir, ErrInvalidArgument)
	}
	if o.Serial {
		o.RecoveryThreadsPerDir = 1
	}
	if o.FlushCheckInterval == 0 {
		o.FlushCheckInterval = -1
		if o.Log.FlushMs > 0 {
			o.FlushCheckInterval = time.Duration(o.Log.FlushMs) * time.Millisecond
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.HighWatermarkCheckpointInterval, DefaultHighWatermarkCheckpointInterval)
	def(&o.OffsetCheckpointInterval, DefaultOffsetCheckpointInterval)
	def(&o.RetentionCheckInterval, DefaultRetentionCheckInterval)
	def(&o.ProducerIDExpirationCheckInterval, DefaultProducerIDExpirationCheckInterval)
	def(&o.FileDeleteDelay, DefaultFileDeleteDelay)
	if o.FileDeleteDelay < 0 {
		o.FileDeleteDelay = 0
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// logOptions returns the options of tp's log.
func (m *Manager) logOptions(tp remote.TopicIDPartition) log.Options {
	o := m.opts.Log
	if m.opts.LogOptions != nil {
		o = m.opts.LogOptions(tp)
	}
	o.FS, o.Now = m.opts.FS, m.opts.Now
	// One marker per log directory (Kafka's .kafka_cleanshutdown): the
	// logs write none of their own.
	o.ManagedCleanShutdown, o.CleanShutdown = true, false
	o.Logger = m.opts.Logger.With(zapPartition(tp))
	user := o.Listener.HighWatermarkLowered
	o.Listener.HighWatermarkLowered = func(hw int64) {
		m.highWatermarkLowered(tp)
		if user != nil {
			user(hw)
		}
	}
	return o
}

func zapPartition(tp remote.TopicIDPartition) zap.Field {
	return zap.String("partition", keyOf(tp).String())
}
