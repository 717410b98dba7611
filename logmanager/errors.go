package logmanager

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/remote"
)

// Errors returned by this package. Test for them with errors.Is. Errors
// of a log keep the log package's sentinels (log.ErrIO, log.ErrCorruption)
// beneath the ones below.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = base.ErrClosed
	// ErrInvalidArgument marks bad options or a bad partition name.
	ErrInvalidArgument = base.ErrInvalidArgument
	// ErrCorruption marks a damaged checkpoint or partition.metadata
	// file (a *CheckpointError), or a damaged PromotedFutureFile.
	ErrCorruption = base.ErrCorruption
	// ErrNotFound: the manager holds no log for the partition.
	ErrNotFound = errors.New("logmanager: no log for the partition")
	// ErrLogDirOffline: the partition's log directory failed; its logs
	// are closed. Returned as a *DirOfflineError. Kafka:
	// KAFKA_STORAGE_ERROR (56).
	ErrLogDirOffline = errors.New("logmanager: log directory offline")
	// ErrDuplicateLog: Open found one partition in two log directories
	// (Kafka refuses to start the same way: a crash during a promotion
	// of a future log, fixed by deleting one copy by hand). Returned as a
	// *DuplicateLogError.
	ErrDuplicateLog = errors.New("logmanager: duplicate log directories")
	// ErrInconsistentTopicID: the topic id asked for differs from the one
	// in the log's partition.metadata. Kafka: INCONSISTENT_TOPIC_ID (103).
	ErrInconsistentTopicID = errors.New("logmanager: inconsistent topic id")
	// ErrFutureExists: a future log of the partition already exists in
	// another directory (delete it first).
	ErrFutureExists = errors.New("logmanager: future log exists in another directory")
)

// DirOfflineError names the offline directory and what took it offline.
type DirOfflineError struct {
	Dir       string
	Partition remote.TopicIDPartition // zero when no partition is involved
	Cause     error
}

func (e *DirOfflineError) Error() string {
	s := "logmanager: log directory " + e.Dir + " offline"
	if e.Partition.Topic != "" {
		s += fmt.Sprintf(" (partition %s-%d)", e.Partition.Topic, e.Partition.Partition)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrLogDirOffline and the cause.
func (e *DirOfflineError) Unwrap() []error { return []error{ErrLogDirOffline, e.Cause} }

// DuplicateLogError names a partition found in more than one directory.
type DuplicateLogError struct {
	Topic     string
	Partition int32
	Future    bool
	Paths     []string
}

func (e *DuplicateLogError) Error() string {
	kind := "log"
	if e.Future {
		kind = "future log"
	}
	return fmt.Sprintf("logmanager: duplicate %s directories for %s-%d: %s (a crash while a future log replaced the current one "+
		"can leave both; delete the copy in the directory known to have failed)", kind, e.Topic, e.Partition, strings.Join(e.Paths, ", "))
}

func (e *DuplicateLogError) Unwrap() error { return ErrDuplicateLog }

// InconsistentTopicIDError reports a topic id mismatch.
type InconsistentTopicIDError struct {
	Topic     string
	Partition int32
	Stored    remote.UUID
	Requested remote.UUID
}

func (e *InconsistentTopicIDError) Error() string {
	return fmt.Sprintf("logmanager: %s-%d: topic id %s in partition.metadata, %s requested", e.Topic, e.Partition, e.Stored, e.Requested)
}

func (e *InconsistentTopicIDError) Unwrap() error { return ErrInconsistentTopicID }

// CheckpointError reports a checkpoint or partition.metadata file that
// cannot be parsed. It unwraps to ErrCorruption.
type CheckpointError struct {
	Path   string
	Line   int
	Reason string
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("logmanager: corrupt checkpoint %s line %d: %s", e.Path, e.Line, e.Reason)
}

func (e *CheckpointError) Unwrap() error { return ErrCorruption }
