package tierstate

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
)

// The leader's and the follower's logs are real *log.UnifiedLogs.
var (
	_ FetchLog        = (*log.UnifiedLog)(nil)
	_ SealFollowerLog = (*log.UnifiedLog)(nil)
)

// TestSealDataDriven runs testdata/seal_*: followers at the seal
// (https://github.com/aiven/inkless/pull/760). A leader's log and a
// follower's log live on one vfs.NewMem; the harness keeps the leader's
// partition state (leadership, replicas, ISR, the AlterPartition in flight,
// the recorded follower positions) and the brokers' registrations, and
// drives the pure decisions over them as a broker would: a fetch at the
// seal is answered by ValidateFetchAtSeal, its position recorded, and
// ShouldAdmitAtSeal asked when the answer says so.
//
// Commands (log= defaults to leader):
//
//	open [log=leader|follower] [remote] [local-retention-bytes=N]
//	append [log=] epoch=E [count=N]        one batch of N records in epoch E
//	assign-epoch [log=] epoch=E offset=O   an epoch start without records (makeLeader)
//	roll | delete-old-segments | state [log=]
//	set-hw | inc-log-start | set-remote [log=] offset=O
//	truncate-fully [log=] offset=O [log-start=L]
//	restore [log=] next=N [log-start=L] [epochs=(E@O,...)]   TruncateFullyAndRestore
//	switch phase=classic|pending|phase-1|phase-2 [seal=S] [recorded-epoch=R]
//	       [flag-epoch=L] [consolidating]  phase 2 via the flag commit in epoch L
//	partition leader-epoch=L replicas=(...) [isr=(...)] [not-leader]
//	broker id=N [epoch=B] [fenced] [shutting-down]   no epoch: not registered
//	alter-partition commit|reject           answer the AlterPartition in flight
//	fetch replica=N offset=O [fetcher=follower|consumer|future]
//	      [last-fetched-epoch=E] [current-epoch=C] [broker-epoch=B]
//	generic-fetch offset=O [last-fetched-epoch=E] [current-epoch=C]
//	      ValidateFetch on the leader's log, for contrast
//	hand-off [in-isr]                       HandOffAtSeal on the follower's log
//	route [in-isr]                          RouteFollowerFetcher on the follower's log
func TestSealDataDriven(t *testing.T) {
	forEachFile(t, "testdata/seal_*", func(t *testing.T, path string) {
		e := newSealEnv()
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type sealEnv struct {
	fs    vfs.FS
	logs  map[string]*log.UnifiedLog
	state State

	// The leader's partition state.
	leaderEpoch int32
	isLeader    bool
	replicas    []int32
	isr         []int32
	// pendingIsr is the ISR of the AlterPartition in flight, nil if none.
	pendingIsr []int32
	// recorded is the position and broker epoch recorded per follower.
	recorded map[int32]sealRecorded

	// brokers are the metadata image's registrations.
	brokers map[int32]sealBroker
}

type sealRecorded struct{ offset, brokerEpoch int64 }

type sealBroker struct {
	epoch                int64
	fenced, shuttingDown bool
}

func newSealEnv() *sealEnv {
	return &sealEnv{
		fs:       vfs.NewMem(),
		logs:     map[string]*log.UnifiedLog{},
		isLeader: true,
		recorded: map[int32]sealRecorded{},
		brokers:  map[int32]sealBroker{},
	}
}

func (e *sealEnv) close() {
	for _, l := range e.logs {
		_ = l.Close()
	}
}

func (e *sealEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "switch":
		return e.setSwitch(t, d)
	case "partition":
		return e.setPartition(t, d)
	case "broker":
		return e.setBroker(t, d)
	case "alter-partition":
		return e.alterPartition(t, d)
	case "fetch":
		return e.fetch(t, d)
	case "generic-fetch":
		return e.genericFetch(t, d)
	case "hand-off":
		l := e.log(t, d, "follower")
		return HandOffAtSeal(e.state, l, d.HasArg("in-isr")).String()
	case "route":
		l := e.log(t, d, "follower")
		return RouteFollowerFetcher(e.state, l, d.HasArg("in-isr")).String()
	}
	return e.handleLog(t, d)
}

func sealLogName(t *testing.T, d *datadriven.TestData) string {
	name := "leader"
	d.MaybeScanArgs(t, "log", &name)
	if name != "leader" && name != "follower" {
		d.Fatalf(t, "unknown log %s", name)
	}
	return name
}

func (e *sealEnv) log(t *testing.T, d *datadriven.TestData, name string) *log.UnifiedLog {
	l := e.logs[name]
	if l == nil {
		d.Fatalf(t, "open log=%s first", name)
	}
	return l
}

func (e *sealEnv) handleLog(t *testing.T, d *datadriven.TestData) string {
	name := sealLogName(t, d)
	if d.Cmd == "open" {
		if l := e.logs[name]; l != nil {
			_ = l.Close()
		}
		require.NoError(t, e.fs.RemoveAll(name))
		opts := log.Options{FS: e.fs, SegmentIndexBytes: 4096, Now: func() time.Time { return time.UnixMilli(1_000_000) }}
		opts.RemoteStorageEnabled = d.HasArg("remote")
		d.MaybeScanArgs(t, "local-retention-bytes", &opts.LocalRetentionBytes)
		l, err := log.Open(name, opts)
		require.NoError(t, err)
		e.logs[name] = l
		return e.logState(name)
	}
	l := e.log(t, d, name)
	if out, ok := logCommand(t, d, l); ok && out != "" {
		return out
	} else if !ok && d.Cmd != "state" {
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return e.logState(name)
}

func (e *sealEnv) logState(name string) string {
	l := e.logs[name]
	return fmt.Sprintf("%s: log-start=%d local-log-start=%d hw=%d leo=%d epochs=%s", name,
		l.LogStartOffset(), l.LocalLogStartOffset(), l.HighWatermark(), l.LogEndOffset(),
		epochcache.FormatEntries(l.EpochEntries()))
}

// setSwitch builds the State through the operations that reach it.
func (e *sealEnv) setSwitch(t *testing.T, d *datadriven.TestData) string {
	var phase string
	seal := int64(0)
	recorded := base.UndefinedEpoch
	d.ScanArgs(t, "phase", &phase)
	d.MaybeScanArgs(t, "seal", &seal)
	d.MaybeScanArgs(t, "recorded-epoch", &recorded)
	flagEpoch := max(recorded, 0) + 1
	d.MaybeScanArgs(t, "flag-epoch", &flagEpoch)
	s := State{}.WithConsolidating(d.HasArg("consolidating"))
	var err error
	if phase != "classic" {
		s, err = s.ArmSwitch()
	}
	if err == nil && (phase == "phase-1" || phase == "phase-2") {
		s, err = s.CommitSeal(seal, nil)
	}
	if err == nil && phase == "phase-2" {
		s, err = s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: flagEpoch,
			Seal: seal, LastClassicLeaderEpoch: recorded}, Leadership{Leader: 1, LeaderEpoch: flagEpoch})
	}
	if err != nil {
		return "error: " + err.Error()
	}
	e.state = s
	return s.String()
}

func (e *sealEnv) setPartition(t *testing.T, d *datadriven.TestData) string {
	d.ScanArgs(t, "leader-epoch", &e.leaderEpoch)
	d.ScanArgs(t, "replicas", &e.replicas)
	e.isr = nil
	d.MaybeScanArgs(t, "isr", &e.isr)
	e.isLeader = !d.HasArg("not-leader")
	e.pendingIsr = nil
	return e.partitionState()
}

func (e *sealEnv) partitionState() string {
	s := fmt.Sprintf("leader-epoch=%d leader=%t replicas=%v isr=%v", e.leaderEpoch, e.isLeader, e.replicas, e.isr)
	if e.pendingIsr != nil {
		s += fmt.Sprintf(" in-flight=%v", e.pendingIsr)
	}
	return s
}

func (e *sealEnv) setBroker(t *testing.T, d *datadriven.TestData) string {
	var id int32
	b := sealBroker{epoch: NoBrokerEpoch, fenced: d.HasArg("fenced"), shuttingDown: d.HasArg("shutting-down")}
	d.ScanArgs(t, "id", &id)
	d.MaybeScanArgs(t, "epoch", &b.epoch)
	e.brokers[id] = b
	return fmt.Sprintf("broker %d: epoch=%d fenced=%t shutting-down=%t", id, b.epoch, b.fenced, b.shuttingDown)
}

func (e *sealEnv) alterPartition(t *testing.T, d *datadriven.TestData) string {
	if e.pendingIsr == nil {
		return "no AlterPartition in flight"
	}
	switch {
	case d.HasArg("commit"):
		e.isr = e.pendingIsr
	case d.HasArg("reject"):
	default:
		d.Fatalf(t, "alter-partition commit|reject")
	}
	e.pendingIsr = nil
	return e.partitionState()
}

// replica is the leader's view of replica id.
func (e *sealEnv) replica(id int32) SealReplica {
	r := SealReplica{
		Assigned:              slices.Contains(e.replicas, id),
		InIsr:                 slices.Contains(e.isr, id),
		RegisteredBrokerEpoch: NoBrokerEpoch,
	}
	if b, ok := e.brokers[id]; ok {
		r.Fenced, r.InControlledShutdown, r.RegisteredBrokerEpoch = b.fenced, b.shuttingDown, b.epoch
	}
	return r
}

// fetch answers a follower fetch as the leader's fetch path would: the
// at-seal branch for a fetch at or past the seal, recording the position
// the answer names and asking for admission when it says so.
func (e *sealEnv) fetch(t *testing.T, d *datadriven.TestData) string {
	leaderLog := e.log(t, d, "leader")
	req := SealFetchRequest{FetchRequest: scanFetchRequest(t, d, FetcherFollower), BrokerEpoch: NoBrokerEpoch}
	d.ScanArgs(t, "replica", &req.ReplicaID)
	d.MaybeScanArgs(t, "broker-epoch", &req.BrokerEpoch)
	if !IsFetchAtSeal(e.state, req.FetchRequest) {
		_, err := ValidateFetchAtSeal(SealLeader{Log: leaderLog, State: e.state, LeaderEpoch: e.leaderEpoch, IsLeader: e.isLeader},
			e.replica(req.ReplicaID), req)
		require.ErrorIs(t, err, ErrNotAtSeal)
		require.ErrorIs(t, err, base.ErrInvalidArgument)
		return fmt.Sprintf("not at the seal: generic path\nerror: %v", err)
	}
	leader := SealLeader{Log: leaderLog, State: e.state, LeaderEpoch: e.leaderEpoch, IsLeader: e.isLeader}
	dec, err := ValidateFetchAtSeal(leader, e.replica(req.ReplicaID), req)
	require.NoError(t, err)
	checkSealDecision(t, e.state.Seal(), dec)

	var b strings.Builder
	fmt.Fprintf(&b, "answer: %s\n", dec)
	if dec.RecordOffset == base.UndefinedOffset {
		if r, ok := e.recorded[req.ReplicaID]; ok {
			fmt.Fprintf(&b, "recorded: unchanged, replica %d at %d\n", req.ReplicaID, r.offset)
		} else {
			fmt.Fprintf(&b, "recorded: nothing\n")
		}
	} else {
		e.recorded[req.ReplicaID] = sealRecorded{offset: dec.RecordOffset, brokerEpoch: req.BrokerEpoch}
		fmt.Fprintf(&b, "recorded: replica %d at %d broker-epoch=%d\n", req.ReplicaID, dec.RecordOffset, req.BrokerEpoch)
	}
	if !dec.TryAdmission {
		b.WriteString("admission: not tried")
		return b.String()
	}
	rec := e.recorded[req.ReplicaID]
	admit, why := ShouldAdmitAtSeal(SealAdmission{
		State:               e.state,
		IsLeader:            e.isLeader,
		IsrChangeInFlight:   e.pendingIsr != nil,
		Replica:             e.replica(req.ReplicaID),
		RecordedEndOffset:   rec.offset,
		RecordedBrokerEpoch: rec.brokerEpoch,
	})
	if !admit {
		fmt.Fprintf(&b, "admission: refused (%s)", why)
		return b.String()
	}
	e.pendingIsr = append(slices.Clone(e.isr), req.ReplicaID)
	slices.Sort(e.pendingIsr)
	fmt.Fprintf(&b, "admission: AlterPartition isr %v -> %v (%s)\n", e.isr, e.pendingIsr, why)
	// Kafka's generic rule (Partition.isFollowerInSync) for contrast: the
	// follower's recorded end against the leader's high watermark.
	if hw := leaderLog.HighWatermark(); rec.offset < hw {
		fmt.Fprintf(&b, "generic rule: refused (recorded end %d below leader high watermark %d)", rec.offset, hw)
	} else {
		fmt.Fprintf(&b, "generic rule: admitted (recorded end %d, leader high watermark %d)", rec.offset, hw)
	}
	return b.String()
}

// checkSealDecision checks what every at-seal answer must satisfy, whatever
// the build tags.
func checkSealDecision(t *testing.T, seal int64, d SealFetchDecision) {
	t.Helper()
	if d.Error == SealErrorNone {
		require.Equal(t, seal, d.HighWatermark, "hw of %s", d)
		require.Zero(t, d.LogStartOffset, "log start of %s", d)
	} else {
		require.Equal(t, base.UndefinedOffset, d.HighWatermark, "hw of %s", d)
		require.Equal(t, base.UndefinedOffset, d.LogStartOffset, "log start of %s", d)
		require.False(t, d.Diverging(), "%s", d)
	}
	require.Equal(t, d.TryAdmission, d.RecordOffset != base.UndefinedOffset, "%s", d)
	if d.TryAdmission {
		require.GreaterOrEqual(t, d.RecordOffset, seal, "%s", d)
		require.False(t, d.Diverging(), "%s", d)
	}
	if d.Step == SealStepLeaderBelowSeal {
		require.Equal(t, SealErrorNone, d.Error, "%s", d)
		require.False(t, d.Diverging(), "%s", d)
		require.False(t, d.TryAdmission, "%s", d)
	}
}

func (e *sealEnv) genericFetch(t *testing.T, d *datadriven.TestData) string {
	l := e.log(t, d, "leader")
	return "generic: " + ValidateFetch(l, e.leaderEpoch, scanFetchRequest(t, d, FetcherFollower)).String()
}
