package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

const testNowMs = 1_000_000

var errInjected = errors.New("injected")

var testTP = remote.TopicIDPartition{TopicID: remote.UUID{1}, Topic: "t", Partition: 0}

// recorder collects the calls the driver makes on the broker's fakes, and
// fails the ones a test names.
type recorder struct {
	calls []string
	fail  map[string]bool
}

func (r *recorder) call(name, format string, args ...any) error {
	r.calls = append(r.calls, name+" "+fmt.Sprintf(format, args...))
	if r.fail[name] {
		return errInjected
	}
	return nil
}

// testDirs are every env broker's log directories, on the env's FS.
var testDirs = []string{"/a", "/b", "/c"}

// openManager opens a broker's log manager over the log directories
// testDirs of fs, with the tasks run by hand (none runs in these tests)
// and the tests' clock.
func openManager(t testing.TB, fs vfs.FS) *logmanager.Manager {
	m, err := logmanager.Open(context.Background(), logmanager.Options{Dirs: testDirs, FS: fs,
		Log:               log.Options{SegmentIndexBytes: 4096, RemoteStorageEnabled: true},
		NoBackgroundTasks: true, Now: func() time.Time { return time.UnixMilli(testNowMs) }})
	require.NoError(t, err)
	return m
}

// brokerLogs is the broker's log manager as the driver sees it:
// ManagedLogs over a logmanager.Manager, recording each call and failing
// the ones a test names (before the manager acts).
type brokerLogs struct {
	rec  *recorder
	m    *logmanager.Manager
	logs LogManagers
	// n counts the logs created: "create-log log-<n>".
	n int
}

func newBrokerLogs(rec *recorder, m *logmanager.Manager) *brokerLogs {
	return &brokerLogs{rec: rec, m: m, logs: ManagedLogs(m)}
}

func (f *brokerLogs) CreateLog(ctx context.Context, tp remote.TopicIDPartition) (Log, error) {
	f.n++
	if err := f.rec.call("create-log", "log-%d", f.n); err != nil {
		return nil, err
	}
	return f.logs.CreateLog(ctx, tp)
}

func (f *brokerLogs) DeleteLog(ctx context.Context, tp remote.TopicIDPartition, l Log) error {
	if err := f.rec.call("delete-log", "leo=%d", l.LogEndOffset()); err != nil {
		return err
	}
	return f.logs.DeleteLog(ctx, tp, l)
}

func (f *brokerLogs) DeleteFutureLog(ctx context.Context, tp remote.TopicIDPartition) error {
	if err := f.rec.call("delete-future-log", ""); err != nil {
		return err
	}
	return f.logs.DeleteFutureLog(ctx, tp)
}

func (f *brokerLogs) ReplaceCurrentWithFutureLog(ctx context.Context, tp remote.TopicIDPartition, current, future Log) error {
	if err := f.rec.call("replace-with-future", "current-leo=%d future-leo=%d", current.LogEndOffset(), future.LogEndOffset()); err != nil {
		return err
	}
	return f.logs.ReplaceCurrentWithFutureLog(ctx, tp, current, future)
}

// createFuture is the broker's half of starting a move (Kafka:
// alterReplicaLogDirs): the future log in the online directory with the
// fewest logs other than the current log's.
func (f *brokerLogs) createFuture(t testing.TB) *log.UnifiedLog {
	l, err := f.m.CreateFuture(testTP, "")
	require.NoError(t, err)
	return l
}

type fakeClassic struct{ rec *recorder }

func (f fakeClassic) AddPartition(_ context.Context, _ remote.TopicIDPartition, leader int32, offset int64) error {
	return f.rec.call("classic-add", "leader=%d offset=%d", leader, offset)
}

func (f fakeClassic) RemovePartition(context.Context, remote.TopicIDPartition) error {
	return f.rec.call("classic-remove", "")
}

type fakeConsolidation struct{ rec *recorder }

func (f fakeConsolidation) AddPartition(_ context.Context, s ConsolidationStart) error {
	return f.rec.call("consolidation-add", "offset=%d", s.Offset)
}

func (f fakeConsolidation) RemovePartition(context.Context, remote.TopicIDPartition) error {
	return f.rec.call("consolidation-remove", "")
}

type fakeRemote struct{ rec *recorder }

func (f fakeRemote) StopPartitions(_ context.Context, stops []remote.StopPartition) error {
	return f.rec.call("rlm-stop", "keep-metadata=%t", stops[0].KeepRemoteLogMetadata)
}

func (f fakeRemote) OnLeadershipChange(leaders, followers []remote.Partition) error {
	if len(leaders) > 0 {
		return f.rec.call("rlm-leader", "leo=%d", leaders[0].Log.LogEndOffset())
	}
	return f.rec.call("rlm-follower", "leo=%d", followers[0].Log.LogEndOffset())
}

type fakeIsr struct{ rec *recorder }

func (f fakeIsr) ExpandIsr(_ context.Context, id int32) error {
	return f.rec.call("expand-isr", "replica=%d", id)
}

// env is one datadriven file: a driver, its fakes and the partition's
// switch state.
type env struct {
	fs     vfs.FS
	rec    *recorder
	logs   *brokerLogs
	r      *Replica
	state  tierstate.State
	events []Event
}

func newEnv(t *testing.T, withLog bool) *env {
	return newEnvWith(t, withLog, false, false)
}

// newEnvWith is newEnv with the leader's switch (a controller, a control
// plane and a pruner, broker id 1) and the log directory move (a move
// fetcher and a future log manager) when asked.
func newEnvWith(t *testing.T, withLog, withSwitch, withMove bool) *env {
	e := &env{fs: vfs.NewMem(), rec: &recorder{fail: map[string]bool{}}}
	m := openManager(t, e.fs)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	e.logs = newBrokerLogs(e.rec, m)
	opts := Options{Partition: testTP, Logs: e.logs, Classic: fakeClassic{e.rec},
		Consolidation: fakeConsolidation{e.rec}, Remote: fakeRemote{e.rec},
		OnEvent: func(ev Event) { e.events = append(e.events, ev) }}
	if withLog {
		// The log the broker finds in its log manager at startup.
		l, err := m.GetOrCreate(testTP, "")
		require.NoError(t, err)
		opts.Log = l
	}
	if withSwitch {
		opts.Controller, opts.ControlPlane, opts.Pruner = fakeController{e.rec}, fakeCP{rec: e.rec}, fakePruner{e.rec}
		opts.BrokerID, opts.NowMs = 1, func() int64 { return testNowMs }
	}
	if withMove {
		opts.Move, opts.FutureLogs = fakeMove{e.rec}, e.logs
	}
	r, err := New(opts)
	require.NoError(t, err)
	e.r = r
	return e
}

type fakeController struct{ rec *recorder }

func (f fakeController) ProposeSeal(_ context.Context, _ remote.TopicIDPartition, epoch int32, p consolidate.SealProposal) error {
	return f.rec.call("propose-seal", "seal=%d producers=%d leader-epoch=%d", p.Seal, len(p.Producers), epoch)
}

func (f fakeController) SetClassicPrefixInRemoteStorage(_ context.Context, _ remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	return f.rec.call("phase-two", "broker=%d leader-epoch=%d seal=%d recorded-epoch=%d", req.BrokerID, req.LeaderEpoch,
		req.Seal, req.LastClassicLeaderEpoch)
}

// fakeCP is the control plane's InitDisklessLog; nothing else is called.
type fakeCP struct {
	wal.ControlPlane
	rec *recorder
}

func (f fakeCP) InitDisklessLog(_ context.Context, reqs []wal.InitDisklessLogRequest) ([]wal.InitDisklessLogResult, error) {
	r := reqs[0]
	err := f.rec.call("init-diskless-log", "w=%d s=%d producers=%d", r.LogStartOffset, r.DisklessStartOffset, len(r.ProducerStates))
	return []wal.InitDisklessLogResult{{Err: err}}, nil
}

type fakePruner struct{ rec *recorder }

func (f fakePruner) Arm(_ remote.TopicIDPartition, seal int64) {
	_ = f.rec.call("pruner-arm", "seal=%d", seal)
}
func (f fakePruner) Disarm(remote.TopicIDPartition) { _ = f.rec.call("pruner-disarm", "") }

type fakeMove struct{ rec *recorder }

func (f fakeMove) AddPartition(_ context.Context, _ remote.TopicIDPartition, current, future Log, offset int64) error {
	return f.rec.call("move-add", "offset=%d current-leo=%d", offset, current.LogEndOffset())
}

func (f fakeMove) RemovePartition(context.Context, remote.TopicIDPartition) error {
	return f.rec.call("move-remove", "")
}

func forEachFile(t *testing.T, pattern string, f func(t *testing.T, path string)) {
	paths, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no files match %s", pattern)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { f(t, path) })
	}
}

func batch(t testing.TB, count int) []byte {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for range count {
		b.Add(testNowMs, nil, []byte("value"))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

func (e *env) log(t *testing.T, d *datadriven.TestData) *log.UnifiedLog {
	l, ok := e.r.Log().(*log.UnifiedLog)
	if !ok || l == nil {
		d.Fatalf(t, "no log")
	}
	return l
}

func (e *env) logString() string {
	l := e.r.Log()
	if l == nil {
		return "log: none"
	}
	return fmt.Sprintf("log: leo=%d hw=%d remote=%d epochs=%s", l.LogEndOffset(), l.HighWatermark(),
		l.HighestOffsetInRemoteStorage(), epochcache.FormatEntries(l.EpochEntries()))
}

// delta reads "leader" or "follower=<id>", "epoch=<leader epoch>",
// optional "partition-epoch=<n>" and "isr".
func (e *env) delta(t *testing.T, d *datadriven.TestData) Delta {
	dl := Delta{State: e.state, LeaderID: 1, PartitionEpoch: 0, InIsr: d.HasArg("isr")}
	if d.HasArg("leader") {
		dl.Leader = true
	} else {
		d.ScanArgs(t, "follower", &dl.LeaderID)
	}
	d.ScanArgs(t, "epoch", &dl.LeaderEpoch)
	if d.HasArg("partition-epoch") {
		d.ScanArgs(t, "partition-epoch", &dl.PartitionEpoch)
	}
	if d.HasArg("removed") {
		var why string
		d.ScanArgs(t, "removed", &why)
		dl.Removal = map[string]Removal{"reassigned": ReassignedAway, "deleted": TopicDeleted}[why]
	}
	return dl
}

// state reads the switch tags: "seal=<S>" (-1, -2 or >= 0),
// "diskless-epoch=<E>", "phase-2 recorded-epoch=<R>", "consolidating".
func (e *env) readState(t *testing.T, d *datadriven.TestData) string {
	var tags tierstate.Tags
	var seal int64
	d.ScanArgs(t, "seal", &seal)
	tags.ClassicToDisklessStartOffset = tierstate.Some(seal)
	if d.HasArg("diskless-epoch") {
		var ed int32
		d.ScanArgs(t, "diskless-epoch", &ed)
		tags.DisklessLeaderEpoch = tierstate.Some(ed)
	}
	if d.HasArg("phase-2") {
		tags.ClassicPrefixInRemoteStorage = tierstate.Some(true)
	}
	if d.HasArg("recorded-epoch") {
		var r int32
		d.ScanArgs(t, "recorded-epoch", &r)
		tags.LastClassicLeaderEpoch = tierstate.Some(r)
	}
	s, err := tierstate.FromPartitionRecord(tags)
	if err != nil {
		return "error: " + err.Error()
	}
	e.state = s.WithConsolidating(d.HasArg("consolidating"))
	return e.state.String()
}

func (e *env) flush() string {
	var b strings.Builder
	for _, c := range e.rec.calls {
		fmt.Fprintf(&b, "call: %s\n", strings.TrimSpace(c))
	}
	for _, ev := range e.events {
		fmt.Fprintf(&b, "event: %s\n", ev)
	}
	e.rec.calls, e.events = nil, nil
	return b.String()
}

func (e *env) priorString() string {
	p := e.r.Prior()
	return fmt.Sprintf("prior: hosted=%t leader-epoch=%d offline=%t fenced=%t", p.Hosted, p.LeaderEpoch, p.Offline, p.Fenced)
}

// handle runs one command; see TestReplicaDataDriven for the list.
func (e *env) handle(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "state":
		return e.readState(t, d)
	case "append":
		var epoch int32
		var count int
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "count", &count)
		_, err := e.log(t, d).AppendAsLeader(batch(t, count), epoch, log.OriginClient)
		require.NoError(t, err)
		return e.logString()
	case "set-hw":
		var hw int64
		d.ScanArgs(t, "offset", &hw)
		e.log(t, d).UpdateHighWatermark(hw)
		return e.logString()
	case "set-remote":
		var h int64
		d.ScanArgs(t, "offset", &h)
		l := e.log(t, d)
		require.True(t, l.UpdateHighestOffsetInRemoteStorage(h, l.TruncationCount()))
		return e.logString()
	case "truncate":
		var o int64
		d.ScanArgs(t, "offset", &o)
		_, err := e.log(t, d).TruncateTo(o)
		require.NoError(t, err)
		return e.logString()
	case "fail":
		for _, a := range d.CmdArgs {
			e.rec.fail[a.Key] = true
		}
		return "ok"
	case "heal":
		e.rec.fail = map[string]bool{}
		return "ok"
	case "decide":
		dl := e.delta(t, d)
		plan := DecideCheck(e.r.Prior(), dl)
		if !plan.Has(SkipOffline) && !plan.Has(CheckReplica) {
			var view ViewLog
			if l := e.r.Log(); l != nil {
				view = l
			}
			plan = append(plan, DecideTransition(dl, view)...)
		}
		return plan.String()
	case "apply":
		_, err := e.r.Apply(ctx, e.delta(t, d))
		out := e.flush() + e.logString() + "\n" + e.priorString()
		if err != nil {
			out += "\nerror: " + err.Error()
		}
		return out
	case "handoff":
		h, err := e.r.HandOff(ctx)
		out := e.flush() + h.String()
		if err != nil {
			out += "\nerror: " + err.Error()
		}
		return out
	case "admit":
		var id int32
		var end int64
		d.ScanArgs(t, "replica", &id)
		d.ScanArgs(t, "recorded-end", &end)
		a := tierstate.SealAdmission{RecordedEndOffset: end, RecordedBrokerEpoch: tierstate.NoBrokerEpoch,
			Replica: tierstate.SealReplica{Assigned: true, RegisteredBrokerEpoch: 7}}
		admit, why, err := e.r.AdmitAtSeal(ctx, id, a, fakeIsr{e.rec})
		out := e.flush() + fmt.Sprintf("admit=%t (%s)", admit, why)
		if err != nil {
			out += "\nerror: " + err.Error()
		}
		return out
	case "restart":
		// A broker restart: a new driver on the log it finds.
		opts := e.r.opts
		opts.Log = e.r.Log()
		r, err := New(opts)
		require.NoError(t, err)
		e.r = r
		return e.logString() + "\n" + e.priorString()
	case "log-dir-failure":
		// The driver's half only: the log manager keeps the directory
		// online (a removal after it still deletes the log).
		require.NoError(t, e.r.LogDirFailure(ctx))
		return e.flush() + e.priorString()
	case "produce":
		var epoch int32
		var count int
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "count", &count)
		origin := log.OriginClient
		if d.HasArg("coordinator") {
			origin = log.OriginCoordinator
		}
		b := batch(t, count)
		if d.HasArg("txn") {
			b = txnBatch(t, count)
		}
		_, err := e.r.AppendAsLeader(b, epoch, origin)
		if err != nil {
			return "error: " + err.Error()
		}
		return e.logString()
	case "step-switch":
		_, err := e.r.StepSwitch(ctx)
		return e.flush() + e.logString() + e.errString(err)
	case "retry-proposal":
		e.r.RetrySealProposal()
		return "ok"
	case "prune-partition":
		p, ok := e.r.PrunePartition()
		if !ok {
			return "not pruned here"
		}
		return fmt.Sprintf("prune partition: %s leo=%d remote=%d awaiting-rebuild=%t", p.State, p.Log.LogEndOffset(),
			p.Log.HighestOffsetInRemoteStorageInLineage(), p.AwaitingRebuild)
	case "start-move":
		// The log manager holds one future log per partition: a new move
		// cancels the one in progress first (Kafka's alterReplicaLogDirs
		// removes the future replica before it creates the new one).
		var err error
		if e.r.FutureLog() != nil {
			err = e.r.CancelMove(ctx)
		}
		if err == nil {
			err = e.r.StartMove(ctx, e.logs.createFuture(t))
		}
		return e.flush() + e.futureString() + e.errString(err)
	case "move-copy":
		// The move fetcher: copy the current log into the future log.
		f, ok := e.r.FutureLog().(*log.UnifiedLog)
		if !ok || f == nil {
			d.Fatalf(t, "no future log")
		}
		cur := e.log(t, d)
		for f.LogEndOffset() < cur.LogEndOffset() {
			fd, err := cur.Read(nil, f.LogEndOffset(), 1<<20, log.IsolationLogEnd, true)
			require.NoError(t, err)
			_, err = f.AppendAsFollower(fd.Records, math.MaxInt32)
			require.NoError(t, err)
		}
		return e.futureString()
	case "promote":
		ok, err := e.r.MaybePromoteFutureLog(ctx)
		return e.flush() + fmt.Sprintf("promoted=%t\n", ok) + e.logString() + "\n" + e.futureString() + e.errString(err)
	case "cancel-move":
		err := e.r.CancelMove(ctx)
		return e.flush() + e.futureString() + e.errString(err)
	case "future-dir-failure":
		// The future log's directory fails in the log manager (its logs
		// closed), which tells the driver.
		f, ok := e.r.FutureLog().(*log.UnifiedLog)
		require.True(t, ok)
		require.True(t, e.logs.m.ReportError(f, fmt.Errorf("future log directory: %w", log.ErrIO)))
		err := e.r.FutureLogDirFailure(ctx)
		return e.flush() + e.futureString() + e.errString(err)
	case "metrics":
		return fmt.Sprintf("%+v", e.r.Metrics())
	case "future-log":
		if d.HasArg("none") {
			require.NoError(t, e.logs.m.DeleteFuture(testTP))
			e.r.SetFutureLog(nil)
			return "future log: none"
		}
		// A future log found at startup: leo records in leader epoch epoch.
		var leo int64
		var epoch int32
		d.ScanArgs(t, "leo", &leo)
		d.ScanArgs(t, "epoch", &epoch)
		f := e.logs.createFuture(t)
		require.Zero(t, f.LogEndOffset())
		_, err := f.AppendAsLeader(batch(t, int(leo)), epoch, log.OriginClient)
		require.NoError(t, err)
		e.r.SetFutureLog(f)
		return fmt.Sprintf("future log: leo=%d epoch=%d", f.LogEndOffset(), epoch)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (e *env) errString(err error) string {
	if err != nil {
		return "\nerror: " + err.Error()
	}
	return ""
}

func (e *env) futureString() string {
	f := e.r.FutureLog()
	if f == nil {
		return "future log: none"
	}
	return fmt.Sprintf("future log: leo=%d", f.LogEndOffset())
}

// txnBatch is producer 7's transactional batch of count records.
func txnBatch(t testing.TB, count int) []byte {
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, true
	b := record.NewBuilder(opts)
	for range count {
		b.Add(testNowMs, nil, []byte("txn"))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// fakeFuture is a future log ending at leo with every record in epoch.
type fakeFuture struct {
	leo   int64
	epoch int32
}

func (f fakeFuture) LogStartOffset() int64 { return 0 }
func (f fakeFuture) LogEndOffset() int64   { return f.leo }
func (f fakeFuture) EpochForOffset(o int64) (int32, bool) {
	if o < 0 || o >= f.leo {
		return base.UndefinedEpoch, false
	}
	return f.epoch, true
}

// TestReplicaDataDriven runs testdata/*. Commands:
//
//	new [log] [switch] [move]              a driver with an empty mem log or none; keeps the state;
//	                                       switch: a controller, a control plane and a pruner;
//	                                       move: a move fetcher and a future log manager
//	state seal=S [diskless-epoch=E] [phase-2] [recorded-epoch=R] [consolidating]
//	append epoch=E count=N | set-hw offset=O | set-remote offset=O | truncate offset=O
//	future-log leo=F epoch=E | future-log none
//	fail <call>... | heal                  fail the named fake calls
//	decide (leader|follower=ID) epoch=L [isr]   the pure plan (check half only when it checks)
//	apply (leader|follower=ID) epoch=L [isr]    Replica.Apply: calls, events, log, prior
//	handoff | admit replica=ID recorded-end=O | log-dir-failure
//	restart                                a new driver on the current log
//	apply ... removed=(reassigned|deleted) a removal delta
//	produce epoch=E count=N [txn] [coordinator]   Replica.AppendAsLeader
//	step-switch | retry-proposal | prune-partition
//	start-move | move-copy | promote | cancel-move | future-dir-failure
//	metrics
func TestReplicaDataDriven(t *testing.T) {
	forEachFile(t, "testdata/*", func(t *testing.T, path string) {
		var e *env
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				// A new driver keeps the switch state of the file.
				var s tierstate.State
				if e != nil {
					s = e.state
				}
				e = newEnvWith(t, d.HasArg("log"), d.HasArg("switch"), d.HasArg("move"))
				e.state = s
				return e.logString()
			}
			return e.handle(t, d)
		})
	})
}
