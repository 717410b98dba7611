package tierstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/tierlog/tierlog/remote"
)

// The replica commands of TestRebuildDataDriven (see its comment).
func (e *rebuildEnv) handleReplica(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "check":
		current := e.logs["current"]
		if current == nil {
			return "no current log"
		}
		return CheckReplica(e.state, current, e.futureLog()).String()
	case "should-check":
		delta := ReplicaDelta{NewToBroker: d.HasArg("new"), Offline: d.HasArg("offline")}
		d.MaybeScanArgs(t, "prev", &delta.PreviousLeaderEpoch)
		d.MaybeScanArgs(t, "epoch", &delta.LeaderEpoch)
		run, why := ShouldCheckReplica(e.state, delta)
		return fmt.Sprintf("run=%t (%s)", run, why)
	case "fail-dir":
		e.failed[logDir(logName(t, d))] = !d.HasArg("off")
		return "ok"
	case "recreate":
		return e.recreate(t, d)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// futureLog returns the future log, or a nil interface when there is none.
func (e *rebuildEnv) futureLog() FutureReplicaLog {
	if l := e.logs["future"]; l != nil {
		return l
	}
	return nil
}

func (e *rebuildEnv) recreate(t *testing.T, d *datadriven.TestData) string {
	var fail string
	d.MaybeScanArgs(t, "fail", &fail)
	fetchers := &fakeFetchers{}
	if fail == "fetchers" {
		fetchers.err = errors.New("fetcher manager: shutting down")
	}
	e.tasks.calls, e.tasks.err = nil, nil
	if fail == "tasks" {
		e.tasks.err = errors.New("remote log manager: task did not stop")
	}
	deps := RecreateDeps{Partition: testTP, Fetchers: fetchers, RemoteTasks: e.tasks}
	var deleted []string
	for _, name := range []string{"current", "future"} {
		l := e.logs[name]
		if l == nil {
			continue
		}
		del := func() error {
			// Delete closes the log whatever happens to its files: the
			// broker drops it either way.
			err := l.Delete()
			delete(e.logs, name)
			if err == nil {
				deleted = append(deleted, name)
			}
			return err
		}
		if name == "current" {
			deps.DeleteCurrentLog = del
		} else {
			deps.DeleteFutureLog = del
		}
	}
	current := e.logs["current"]
	if current == nil {
		return "no current log"
	}
	var b strings.Builder
	dec, res := CheckAndRecreate(context.Background(), e.state, current, e.futureLog(), deps)
	fmt.Fprintf(&b, "check: %s\n", dec)
	fmt.Fprintf(&b, "fetchers stopped: %d\n", fetchers.calls)
	fmt.Fprintf(&b, "remote tasks: %s\n", callsString(e.tasks.calls))
	fmt.Fprintf(&b, "deleted: %s\n", callsString(deleted))
	fmt.Fprintf(&b, "%s", e.printable(res.String()))
	return b.String()
}

type fakeFetchers struct {
	calls int
	err   error
}

func (f *fakeFetchers) StopFetchers(context.Context, remote.TopicIDPartition) error {
	f.calls++
	return f.err
}

type fakeTasks struct {
	calls []string
	err   error
}

func (f *fakeTasks) StopPartitions(_ context.Context, stops []remote.StopPartition) error {
	for _, s := range stops {
		f.calls = append(f.calls, fmt.Sprintf("stop(delete-local=%t delete-remote=%t keep-metadata=%t)",
			s.DeleteLocalLog, s.DeleteRemoteLog, s.KeepRemoteLogMetadata))
	}
	return f.err
}
