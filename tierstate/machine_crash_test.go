package tierstate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// TestRebuildCrash crashes a rebuild before every file operation on the
// log (vfs.NewCrashableMem, errorfs), keeping none or half of the
// unsynced data, and reopens the log from each crash image. Every image
// must be one of:
//
//   - old: the log before the rebuild (log start, log end, epochs,
//     producers);
//   - restartable: an empty log below the next offset with no epochs and
//     no producers (the old or the new log start); a fetch there is sent
//     to remote storage again, and running the rebuild on it must reach
//     the new state;
//   - new: exactly the state the rebuild installed.
//
// Never a mix, such as the new log end with the old epochs or without the
// producer snapshot. The remote metadata lives on its own file system:
// the rebuild only reads it.
func TestRebuildCrash(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state State
	}{
		{"upstream", State{}},
		{"phase-2", phaseTwoState(t, 100, 4, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) { runRebuildCrash(t, tc.state) })
	}
}

func phaseTwoState(t *testing.T, seal int64, recorded, leaderEpoch int32) State {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(seal, nil)
	require.NoError(t, err)
	s, err = s.SetClassicPrefixInRemoteStorage(ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: leaderEpoch, Seal: seal,
		LastClassicLeaderEpoch: recorded}, Leadership{Leader: 1, LeaderEpoch: leaderEpoch})
	require.NoError(t, err)
	return s
}

// crashLogState is what a crash image shows, high watermark aside (it is
// not durable: Open starts it at the log start).
type crashLogState struct {
	logStart, localStart, leo int64
	epochs                    string
	producers                 string
}

func readCrashState(l *log.UnifiedLog) crashLogState {
	var pids []string
	for _, p := range l.ActiveProducers() {
		pids = append(pids, fmt.Sprint(p.ProducerID))
	}
	return crashLogState{logStart: l.LogStartOffset(), localStart: l.LocalLogStartOffset(), leo: l.LogEndOffset(),
		epochs: epochcache.FormatEntries(l.EpochEntries()), producers: strings.Join(pids, ",")}
}

func (s crashLogState) String() string {
	return fmt.Sprintf("log-start=%d local-log-start=%d leo=%d epochs=%s producers=[%s]",
		s.logStart, s.localStart, s.leo, s.epochs, s.producers)
}

func runRebuildCrash(t *testing.T, state State) {
	ctx := context.Background()
	const leaderLogStart = 40
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll("p0", 0o755))
	for _, d := range []string{"", "p0"} {
		require.NoError(t, atomicfile.SyncDir(mem, d))
	}
	var images []*vfs.MemFS
	var ops []string
	rng := rand.New(rand.NewPCG(7, 7))
	// The check only takes the images (with and without half the unsynced
	// data); they are opened afterwards on the test goroutine.
	rec := crashtest.New(1, func(_ int, what string) error {
		ops = append(ops, what)
		images = append(images, mem.CrashClone(vfs.CrashCloneCfg{}))
		images = append(images, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}))
		return nil
	})
	fs := rec.Wrap(mem)
	opts := func(fs vfs.FS) log.Options {
		return log.Options{FS: fs, RemoteStorageEnabled: true, SegmentIndexBytes: 4096,
			Now: func() time.Time { return time.UnixMilli(testNowMs) }}
	}

	// Remote tier: the segment [50, 99] with epochs 2 and 4 below the
	// seal (100), and a producer snapshot; the source's local log starts
	// at 100 in epoch 5.
	meta, err := remote.Open(vfs.NewMem(), "meta", remote.MetadataOptions{})
	require.NoError(t, err)
	defer meta.Close()
	data := newFakeData()
	seg := remote.SegmentMetadata{SegmentID: remote.SegmentID{TopicIDPartition: testTP, ID: remote.UUID{1}},
		StartOffset: 50, EndOffset: 99, SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 2, StartOffset: 50}, {Epoch: 4, StartOffset: 80}},
		SizeBytes: 100, TxnIndexEmpty: true}
	require.NoError(t, meta.RegisterCopiedSegment(ctx, seg))
	data.segments[seg.SegmentID.ID] = fakeSegment{
		epochs:   []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 50}, {Epoch: 4, StartOffset: 80}},
		snapshot: producerSnapshot(t, 7, 8)}
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 100, Epoch: 5}
	require.NoError(t, leader.cache.AssignAll([]epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 50},
		{Epoch: 4, StartOffset: 80}, {Epoch: 5, StartOffset: 100}}))
	leader.leo = 120
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: meta, Data: data})
	require.NoError(t, err)
	rebuild := func(l *log.UnifiedLog) error {
		_, err := m.Rebuild(ctx, RebuildRequest{Partition: testTP, Log: l, State: state, LeaderLogStartOffset: leaderLogStart})
		return err
	}

	// The old log: three segments in epochs 1 and 3 with producer 9,
	// flushed, so the crash images start from it.
	l, err := log.Open("p0", opts(fs))
	require.NoError(t, err)
	for i := range 30 {
		epoch := int32(1)
		if i >= 10 {
			epoch = 3
		}
		_, err := l.AppendAsLeader(producerBatch(t, 1, 9, int32(i)), epoch, log.OriginClient)
		require.NoError(t, err)
		if i%10 == 9 {
			require.NoError(t, l.Roll())
		}
	}
	require.NoError(t, l.Flush())
	old := readCrashState(l)

	rec.Arm(true)
	require.NoError(t, rebuild(l))
	rec.Arm(false)
	require.NoError(t, rec.Err())
	// And a crash right after it returned.
	ops = append(ops, "(the end of the rebuild)")
	images = append(images, mem.CrashClone(vfs.CrashCloneCfg{}), mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}))
	final := readCrashState(l)
	require.NoError(t, l.Close())
	require.Equal(t, "log-start=40 local-log-start=100 leo=100 epochs=0@40 2@50 4@80 producers=[7,8]", final.String())
	t.Logf("%d file operations, %d crash images", len(ops), len(images))
	require.Greater(t, len(ops), 8)

	classes := map[string]int{}
	for i, img := range images {
		what := fmt.Sprintf("image %d (before %s, %d%% unsynced kept)", i, ops[i/2], 50*(i%2))
		l, err := log.Open("p0", opts(img))
		require.NoError(t, err, what)
		got := readCrashState(l)
		switch {
		case got == old:
			classes["old"]++
		case got == final:
			classes["new"]++
		case got.leo == got.logStart && got.leo == got.localStart && got.leo < final.leo && got.epochs == "(empty)" &&
			got.producers == "" && (got.logStart == old.logStart || got.logStart == leaderLogStart):
			classes["restartable"]++
			require.NoError(t, rebuild(l), what)
			require.Equal(t, final, readCrashState(l), "%s: the restarted rebuild", what)
		default:
			require.Failf(t, "a crash image mixes the old and the new log", "%s: %s\nold: %s\nnew: %s", what, got, old, final)
		}
		require.NoError(t, l.Close(), what)
	}
	t.Logf("crash images: %v", classes)
	for _, c := range []string{"old", "restartable", "new"} {
		require.Positive(t, classes[c], "no crash image is %s", c)
	}
}
