package tierstate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
)

// TestRebuildDataDriven runs testdata/rebuild_* and testdata/replica_*: the
// tier state machine (Kafka's TierStateMachine) and the phase-2 replica
// check and recreate (https://github.com/aiven/inkless/pull/857) on real
// logs (*log.UnifiedLog) and a real remote metadata store
// (*remote.MetadataManager), both on one vfs.NewMem, with the segments'
// epoch checkpoints and producer snapshots in a fake data source.
//
// Remote tier and source:
//
//	remote-segment name=X start=S end=E epochs=(E@O,...) [checkpoint=(E@O,...)]
//	               [producers=(P,...)] [unfinished]
//	    a remote segment: STARTED then FINISHED (unless unfinished), in
//	    command order (the superseding rule depends on it); its epoch
//	    checkpoint (default: its own epochs) and a producer snapshot
//	    holding producers P (default none)
//	remote-data name=X fail=epochs|snapshot|none
//	lookup epoch=E offset=O            SegmentFor
//	ready value=true|false             the remote log manager's readiness
//	leader local-start=O epoch=E [epochs=(E@O,...)] [leo=N] [error=fenced|not-leader]
//	    the source: its earliest local offset and epoch, and its epoch
//	    cache answering OffsetsForLeaderEpoch
//
// Logs ("current" unless log=future):
//
//	open [log=L] [no-remote]        a new empty log in its own directory
//	append [log=L] epoch=E [count=N] [producer=P]   one leader batch
//	append-follower [log=L] epoch=E [count=N]       one batch at the LEO
//	assign-epoch [log=L] epoch=E offset=O   an epoch start (makeLeader)
//	set-hw [log=L] offset=O
//	set-remote [log=L] offset=O       highest offset in remote storage
//	truncate-to [log=L] offset=O
//	truncate-fully [log=L] offset=O [log-start=S]
//	reopen [log=L]                    close and open again (durable state)
//	state [log=L]
//
// Switch, rebuild, check:
//
//	switch phase=classic|phase-1|phase-2 [seal=S] [recorded-epoch=R]
//	       [leader-epoch=L] [consolidating]
//	rebuild [log=L] [leader-log-start=S] [current-epoch=E] [cancelled]
//	check                           CheckReplica(current, future if open)
//	should-check new|prev=E epoch=E [offline]
//	recreate [fail=fetchers|tasks]  CheckAndRecreate
//	fail-dir log=L [off]            every later file operation on that log fails
func TestRebuildDataDriven(t *testing.T) {
	for _, pattern := range []string{"testdata/rebuild_*", "testdata/replica_*"} {
		forEachFile(t, pattern, func(t *testing.T, path string) {
			e := newRebuildEnv(t)
			defer e.close()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return e.handle(t, d)
			})
		})
	}
}

var testTP = remote.TopicIDPartition{TopicID: remote.UUID{0x74, 0x69, 0x65, 0x72}, Topic: "t", Partition: 0}

const testNowMs = 1_000_000

type rebuildEnv struct {
	t      *testing.T
	mem    vfs.FS
	fs     vfs.FS
	failed map[string]bool // log directories whose file operations fail
	meta   *remote.MetadataManager
	data   *fakeData
	leader *fakeLeader
	ready  bool
	names  map[remote.UUID]string
	ids    map[string]remote.UUID
	logs   map[string]*log.UnifiedLog
	remote map[string]bool // logs opened with remote storage
	state  State
	tasks  *fakeTasks
}

func newRebuildEnv(t *testing.T) *rebuildEnv {
	e := &rebuildEnv{t: t, mem: vfs.NewMem(), failed: map[string]bool{}, data: newFakeData(),
		leader: newFakeLeader(), ready: true, names: map[remote.UUID]string{}, ids: map[string]remote.UUID{},
		logs: map[string]*log.UnifiedLog{}, remote: map[string]bool{}, tasks: &fakeTasks{}}
	e.fs = errorfs.Wrap(e.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		dir, _, _ := strings.Cut(op.Path, "/")
		if e.failed[dir] {
			return errorfs.ErrInjected
		}
		return nil
	}))
	// The metadata shares the MemFS but not the fault injection (only log
	// directories fail).
	meta, err := remote.Open(e.mem, "meta", remote.MetadataOptions{})
	require.NoError(t, err)
	e.meta = meta
	return e
}

func (e *rebuildEnv) close() {
	for _, l := range e.logs {
		_ = l.Close()
	}
	_ = e.meta.Close()
}

func logDir(name string) string { return "log-" + name }

func (e *rebuildEnv) logOptions(remoteEnabled bool) log.Options {
	return log.Options{FS: e.fs, SegmentIndexBytes: 4096, RemoteStorageEnabled: remoteEnabled,
		Now: func() time.Time { return time.UnixMilli(testNowMs) }}
}

func (e *rebuildEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "remote-segment":
		return e.addSegment(t, d)
	case "remote-data":
		var name, fail string
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "fail", &fail)
		e.data.failures[e.ids[name]] = fail
		return "ok"
	case "lookup":
		var epoch int32
		var offset int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "offset", &offset)
		seg, ok, err := e.meta.SegmentFor(testTP, epoch, offset)
		switch {
		case err != nil:
			return "error: " + err.Error()
		case !ok:
			return "none"
		}
		return e.segmentString(seg)
	case "ready":
		d.ScanArgs(t, "value", &e.ready)
		return "ok"
	case "leader":
		return e.setLeader(t, d)
	case "switch":
		return e.setSwitch(t, d)
	case "rebuild":
		return e.rebuild(t, d)
	case "check", "should-check", "recreate", "fail-dir":
		return e.handleReplica(t, d)
	}
	return e.handleLog(t, d)
}

func logName(t *testing.T, d *datadriven.TestData) string {
	name := "current"
	d.MaybeScanArgs(t, "log", &name)
	return name
}

func (e *rebuildEnv) handleLog(t *testing.T, d *datadriven.TestData) string {
	name := logName(t, d)
	if d.Cmd == "open" {
		if l := e.logs[name]; l != nil {
			_ = l.Close()
		}
		require.NoError(t, e.mem.RemoveAll(logDir(name)))
		e.remote[name] = !d.HasArg("no-remote")
		l, err := log.Open(logDir(name), e.logOptions(e.remote[name]))
		require.NoError(t, err)
		e.logs[name] = l
		return e.logState(name)
	}
	l := e.logs[name]
	if l == nil {
		return fmt.Sprintf("no %s log", name)
	}
	if out, ok := logCommand(t, d, l); ok {
		if out != "" {
			return out
		}
		return e.logState(name)
	}
	switch d.Cmd {
	case "reopen":
		_ = l.Close()
		l, err := log.Open(logDir(name), e.logOptions(e.remote[name]))
		if err != nil {
			delete(e.logs, name)
			return "error: " + err.Error()
		}
		e.logs[name] = l
	case "state":
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return e.logState(name)
}

func (e *rebuildEnv) logState(name string) string {
	l := e.logs[name]
	if l == nil {
		return fmt.Sprintf("%s: none", name)
	}
	var pids []string
	for _, p := range l.ActiveProducers() {
		pids = append(pids, fmt.Sprint(p.ProducerID))
	}
	producers := "none"
	if len(pids) > 0 {
		producers = strings.Join(pids, ",")
	}
	return fmt.Sprintf("%s: log-start=%d local-log-start=%d hw=%d leo=%d epochs=%s remote=%d producers=%s",
		name, l.LogStartOffset(), l.LocalLogStartOffset(), l.HighWatermark(), l.LogEndOffset(),
		epochcache.FormatEntries(l.EpochEntries()), l.HighestOffsetInRemoteStorage(), producers)
}

func (e *rebuildEnv) id(name string) remote.UUID {
	if u, ok := e.ids[name]; ok {
		return u
	}
	var u remote.UUID
	copy(u[:], name)
	u[15] = 0xee
	e.ids[name], e.names[u] = u, name
	return u
}

func (e *rebuildEnv) segmentString(seg remote.SegmentMetadata) string {
	return fmt.Sprintf("%s [%d, %d] %s", e.names[seg.SegmentID.ID], seg.StartOffset, seg.EndOffset,
		epochcache.FormatEntries(seg.SegmentLeaderEpochs))
}

func (e *rebuildEnv) addSegment(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	var name string
	seg := remote.SegmentMetadata{SizeBytes: 100, MaxTimestampMs: testNowMs, EventTimestampMs: testNowMs,
		State: remote.CopySegmentStarted, TxnIndexEmpty: true}
	d.ScanArgs(t, "name", &name)
	d.ScanArgs(t, "start", &seg.StartOffset)
	d.ScanArgs(t, "end", &seg.EndOffset)
	seg.SegmentID = remote.SegmentID{TopicIDPartition: testTP, ID: e.id(name)}
	seg.SegmentLeaderEpochs = epochsArg(t, d, "epochs")
	checkpoint := seg.SegmentLeaderEpochs
	if d.HasArg("checkpoint") {
		checkpoint = epochsArg(t, d, "checkpoint")
	}
	var pids []int64
	if arg, ok := d.Arg("producers"); ok {
		for i := range arg.Vals {
			var pid int64
			arg.Scan(t, i, &pid)
			pids = append(pids, pid)
		}
	}
	e.data.segments[seg.SegmentID.ID] = fakeSegment{epochs: checkpoint, snapshot: producerSnapshot(t, pids...)}
	if err := e.meta.AddSegment(ctx, seg); err != nil {
		return "error: " + err.Error()
	}
	if !d.HasArg("unfinished") {
		err := e.meta.UpdateSegment(ctx, remote.SegmentMetadataUpdate{SegmentID: seg.SegmentID,
			State: remote.CopySegmentFinished, EventTimestampMs: testNowMs})
		if err != nil {
			return "error: " + err.Error()
		}
		seg.State = remote.CopySegmentFinished
	}
	return fmt.Sprintf("%s %s checkpoint=%s", e.segmentString(seg), seg.State, epochcache.FormatEntries(checkpoint))
}

func epochsArg(t *testing.T, d *datadriven.TestData, key string) []epochcache.Entry {
	arg, ok := d.Arg(key)
	if !ok {
		d.Fatalf(t, "missing %s", key)
	}
	var out []epochcache.Entry
	for _, v := range arg.Vals {
		var e epochcache.Entry
		if _, err := fmt.Sscanf(v, "%d@%d", &e.Epoch, &e.StartOffset); err != nil {
			d.Fatalf(t, "bad epoch entry %q", v)
		}
		out = append(out, e)
	}
	return out
}

func (e *rebuildEnv) setLeader(t *testing.T, d *datadriven.TestData) string {
	l := newFakeLeader()
	d.ScanArgs(t, "local-start", &l.local.Offset)
	d.ScanArgs(t, "epoch", &l.local.Epoch)
	if d.HasArg("epochs") {
		require.NoError(t, l.cache.AssignAll(epochsArg(t, d, "epochs")))
	}
	d.MaybeScanArgs(t, "leo", &l.leo)
	var failure string
	d.MaybeScanArgs(t, "error", &failure)
	switch failure {
	case "":
	case "fenced":
		l.err = fmt.Errorf("leader: FENCED_LEADER_EPOCH: %w", base.ErrFencedEpoch)
	case "not-leader":
		l.err = errors.New("leader: NOT_LEADER_OR_FOLLOWER")
	default:
		d.Fatalf(t, "unknown error %s", failure)
	}
	e.leader = l
	return fmt.Sprintf("leader: earliest local %s epochs=%s leo=%d", l.local, l.cache, l.leo)
}

// setSwitch builds the State through the controller's operations, so it
// is one the metadata can hold: phase 2 comes from
// SetClassicPrefixInRemoteStorage by leader 1 in leader-epoch (default
// recorded-epoch + 1), which records E_d = leader-epoch + 1.
func (e *rebuildEnv) setSwitch(t *testing.T, d *datadriven.TestData) string {
	var phase string
	seal := int64(0)
	recorded := base.UndefinedEpoch
	d.ScanArgs(t, "phase", &phase)
	d.MaybeScanArgs(t, "seal", &seal)
	d.MaybeScanArgs(t, "recorded-epoch", &recorded)
	leaderEpoch := max(recorded, 0) + 1
	d.MaybeScanArgs(t, "leader-epoch", &leaderEpoch)
	s := State{}.WithConsolidating(d.HasArg("consolidating"))
	var err error
	if phase != "classic" {
		if s, err = s.ArmSwitch(); err == nil {
			s, err = s.CommitSeal(seal, nil)
		}
	}
	if err == nil && phase == "phase-2" {
		s, err = s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: leaderEpoch,
			Seal: seal, LastClassicLeaderEpoch: recorded}, Leadership{Leader: 1, LeaderEpoch: leaderEpoch})
	}
	if err != nil {
		return "error: " + err.Error()
	}
	e.state = s
	return fmt.Sprintf("%s mode=%s", s, ModeFor(s))
}

func (e *rebuildEnv) machine(t *testing.T, events *[]string) *Machine {
	m, err := NewMachine(MachineOptions{Leader: e.leader, Metadata: e.meta, Data: e.data,
		PartitionReady: func(remote.TopicIDPartition) bool { return e.ready },
		Listener: MachineListener{
			RebuildStarted: func(s RebuildStart) {
				*events = append(*events, fmt.Sprintf("started %s at log end %d", s.Mode, s.LogEndOffset))
			},
			RebuildFinished: func(_ RebuildResult, err error) {
				*events = append(*events, fmt.Sprintf("finished err=%t", err != nil))
			},
		}})
	require.NoError(t, err)
	return m
}

func (e *rebuildEnv) rebuild(t *testing.T, d *datadriven.TestData) string {
	name := logName(t, d)
	l := e.logs[name]
	if l == nil {
		return fmt.Sprintf("no %s log", name)
	}
	req := RebuildRequest{Partition: testTP, Log: l, State: e.state, CurrentLeaderEpoch: base.UndefinedEpoch,
		LeaderLogStartOffset: 0}
	d.MaybeScanArgs(t, "leader-log-start", &req.LeaderLogStartOffset)
	d.MaybeScanArgs(t, "current-epoch", &req.CurrentLeaderEpoch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if d.HasArg("cancelled") {
		cancel()
	}
	var events []string
	e.leader.calls = nil
	e.data.calls = nil
	res, err := e.machine(t, &events).Rebuild(ctx, req)
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %s\naction: %s\n", e.printable(err.Error()), RebuildAction(err))
	} else {
		fmt.Fprintf(&b, "%s\nsegment %s, next fetch at %d, last fetched epoch %d\n", e.printable(res.String()),
			e.names[res.Segment.SegmentID.ID], res.NextOffset, res.LastFetchedEpoch)
	}
	fmt.Fprintf(&b, "source calls: %s\n", callsString(e.leader.calls))
	fmt.Fprintf(&b, "remote reads: %s\n", callsString(e.data.named(e.names)))
	fmt.Fprintf(&b, "events: %s\n", strings.Join(events, "; "))
	b.WriteString(e.logState(name))
	return b.String()
}

func callsString(calls []string) string {
	if len(calls) == 0 {
		return "none"
	}
	return strings.Join(calls, ", ")
}

// printable replaces segment UUIDs and the topic id with names.
func (e *rebuildEnv) printable(s string) string {
	for u, name := range e.names {
		s = strings.ReplaceAll(s, u.String(), name)
	}
	return strings.ReplaceAll(s, testTP.TopicID.String()+":", "")
}

// fakeLeader is a source with a fixed earliest local offset and an epoch
// cache answering OffsetsForLeaderEpoch.
type fakeLeader struct {
	local OffsetAndEpoch
	cache *epochcache.Cache
	leo   int64
	err   error
	calls []string
}

func newFakeLeader() *fakeLeader { return &fakeLeader{cache: epochcache.New()} }

func (f *fakeLeader) FetchEarliestLocalOffset(_ context.Context, _ remote.TopicIDPartition, _ int32) (OffsetAndEpoch, error) {
	f.calls = append(f.calls, "FetchEarliestLocalOffset")
	if f.err != nil {
		return OffsetAndEpoch{}, f.err
	}
	return f.local, nil
}

func (f *fakeLeader) FetchEpochEndOffset(_ context.Context, _ remote.TopicIDPartition, _, epoch int32) (EpochEndOffset, error) {
	f.calls = append(f.calls, fmt.Sprintf("OffsetsForLeaderEpoch(%d)", epoch))
	if f.err != nil {
		return EpochEndOffset{}, f.err
	}
	ans := f.cache.EndOffsetFor(epoch, f.leo)
	e, off := ans.Epoch, ans.EndOffset
	return EpochEndOffset{Epoch: e, EndOffset: off}, nil
}

// fakeData is the remote data plane: per segment its epoch checkpoint and
// producer snapshot, with injectable failures.
type fakeData struct {
	segments map[remote.UUID]fakeSegment
	failures map[remote.UUID]string
	calls    []fakeCall
}

type fakeSegment struct {
	epochs   []epochcache.Entry
	snapshot []byte
}

type fakeCall struct {
	what string
	id   remote.UUID
}

func newFakeData() *fakeData {
	return &fakeData{segments: map[remote.UUID]fakeSegment{}, failures: map[remote.UUID]string{}}
}

func (f *fakeData) named(names map[remote.UUID]string) []string {
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = fmt.Sprintf("%s(%s)", c.what, names[c.id])
	}
	return out
}

func (f *fakeData) FetchLeaderEpochs(ctx context.Context, m *remote.SegmentMetadata) ([]epochcache.Entry, error) {
	f.calls = append(f.calls, fakeCall{"epochs", m.SegmentID.ID})
	if f.failures[m.SegmentID.ID] == "epochs" {
		return nil, fmt.Errorf("remote: fetch leader epochs: %w", remote.ErrSegmentDataNotFound)
	}
	s, ok := f.segments[m.SegmentID.ID]
	if !ok {
		return nil, remote.ErrSegmentDataNotFound
	}
	return s.epochs, ctx.Err()
}

func (f *fakeData) FetchIndex(ctx context.Context, m *remote.SegmentMetadata, t remote.IndexType) ([]byte, error) {
	if t == remote.IndexProducerBatches {
		// Segments without the producer batches index (Kafka's window).
		return nil, fmt.Errorf("remote: fetch producer batches: %w", remote.ErrIndexNotFound)
	}
	f.calls = append(f.calls, fakeCall{"snapshot", m.SegmentID.ID})
	if t != remote.IndexProducerSnapshot {
		return nil, fmt.Errorf("unexpected index %s", t)
	}
	if f.failures[m.SegmentID.ID] == "snapshot" {
		return nil, fmt.Errorf("remote: fetch producer snapshot: %w", remote.ErrIndexNotFound)
	}
	s, ok := f.segments[m.SegmentID.ID]
	if !ok {
		return nil, remote.ErrSegmentDataNotFound
	}
	return s.snapshot, ctx.Err()
}

// producerBatch builds a batch of count records, idempotent for producer
// pid (sequence from seq) unless pid is base.NoProducerID.
func producerBatch(t testing.TB, count int, pid int64, seq int32) []byte {
	opts := record.DefaultBuilderOptions()
	if pid != base.NoProducerID {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
	}
	b := record.NewBuilder(opts)
	for range count {
		b.Add(testNowMs, nil, []byte("value"))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// producerSnapshot returns a producer snapshot (Kafka .snapshot bytes)
// holding the producers pids, each with one batch: taken by a roll of a
// scratch log.
func producerSnapshot(t testing.TB, pids ...int64) []byte {
	l, err := log.Open("scratch", log.Options{FS: vfs.NewMem(), SegmentIndexBytes: 4096,
		Now: func() time.Time { return time.UnixMilli(testNowMs) }})
	require.NoError(t, err)
	defer l.Close()
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	// A plain batch first: a roll needs a non-empty segment.
	_, err = l.AppendAsLeader(producerBatch(t, 1, base.NoProducerID, 0), 0, log.OriginClient)
	require.NoError(t, err)
	for _, pid := range pids {
		_, err := l.AppendAsLeader(producerBatch(t, 1, pid, 0), 0, log.OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, l.Roll())
	snap, err := l.ProducerSnapshot(l.LogEndOffset())
	require.NoError(t, err)
	return snap
}
