package consolidate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
)

// TestSealLeaderCrashUnsyncedTail crashes the leader's disk before every
// file operation of a sealing that starts with an unsynced tail: [0, 99)
// is flushed (acknowledged: replicated and on disk), then 10 batches
// [99, 149) of about 1.5 KiB each are appended and not flushed (not yet
// acknowledged: the high watermark is 99) when the switch is armed. The
// sealing appends producer 7's ABORT marker after them, rolls and
// flushes. Each crash image keeps 0 %, 50 % or 90 % of the unsynced 4 KiB
// blocks (holes included), is reopened and sealed again.
//
// On every image: nothing acknowledged is lost ([0, 99) intact), every
// record of the tail that survived is the one written at its offset, and
// the re-seal is consistent (S = the log end, one marker just below S
// aborting producer 7 from 90, nothing open, epochs 0@0 2@80). An image
// taken after the proposal holds the proposed log exactly: the flush
// before the proposal made [0, S) durable, so the controller never
// commits a seal the leader can lose.
func TestSealLeaderCrashUnsyncedTail(t *testing.T) {
	seed := testseed.Seed(t, 5)
	rng := rand.New(rand.NewPCG(seed, seed))
	mem := vfs.NewCrashableMem()
	durableRoot(t, mem, "leader")
	pending, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	seal := func(l *log.UnifiedLog) (SealResult, error) {
		if _, err := SealLeader(pending, l, 2, 5_000); err != nil {
			return SealResult{}, err
		}
		l.UpdateHighWatermark(l.LogEndOffset()) // the follower caught up
		return SealLeader(pending, l, 2, 5_000)
	}
	acked := map[int64]string{}
	for i := range 8 {
		for j, v := range expect(int64(10*i), 10, fmt.Sprintf("e0b%d", i)) {
			acked[int64(10*i+j)] = v
		}
	}
	for _, part := range [][]string{expect(80, 10, "e2a"), expect(90, 5, "txn"), expect(95, 4, "e2b")} {
		for _, v := range part {
			acked[offsetOf(t, v)] = v
		}
	}
	tail := map[int64]string{}
	pad := strings.Repeat("p", 280)
	tailBatch := func(i int) []byte {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for j := range 5 {
			off := int64(99 + 5*i + j)
			tail[off] = fmt.Sprintf("%d:tail%d-%d%s", off, i, j, pad)
			b.Add(int64(2000+i), nil, fmt.Appendf(nil, "tail%d-%d%s", i, j, pad))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		return buf
	}

	proposed := int64(-1)
	ends, seals := map[int64]int{}, map[int64]int{}
	check := func(l *log.UnifiedLog) error {
		at := fmt.Sprintf("reopened at LEO %d", l.LogEndOffset())
		got := map[int64]string{}
		for _, v := range classicValues(t, l, l.LogEndOffset()) {
			got[offsetOf(t, v)] = v
		}
		for off, v := range acked {
			if got[off] != v {
				return fmt.Errorf("%s: acknowledged %q at %d lost (%q)", at, v, off, got[off])
			}
		}
		for off, v := range got {
			if acked[off] == "" && tail[off] != v {
				return fmt.Errorf("%s: %q at %d was never written there", at, v, off)
			}
		}
		if proposed >= 0 && (l.LogEndOffset() != proposed || len(got) != len(acked)+len(tail) || len(l.OngoingTransactions()) != 0) {
			return fmt.Errorf("%s, %d records, open %v: after the proposal of %d", at, len(got), l.OngoingTransactions(), proposed)
		}
		ends[l.LogEndOffset()]++
		s, err := checkResealed(l, at, seal)
		if err != nil {
			return err
		}
		seals[s]++
		return nil
	}

	opts := log.Options{RetentionMs: log.RetentionInfinite}
	rec := crashtest.New(1, func(_ int, what string) error {
		for _, pct := range []int{0, 50, 90} {
			copts := opts
			copts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			l, err := log.Open("leader", copts)
			if err != nil {
				return fmt.Errorf("before %s, %d%% kept: %w", what, pct, err)
			}
			err = check(l)
			_ = l.Close()
			if err != nil {
				return fmt.Errorf("before %s, %d%% kept: %w", what, pct, err)
			}
		}
		return nil
	})
	opts.FS = rec.Wrap(mem)
	l, err := log.Open("leader", opts)
	require.NoError(t, err)
	defer l.Close()
	writeClassic(t, l, l.Flush)
	l.UpdateHighWatermark(99)
	for i := range 10 {
		_, err := l.AppendAsLeader(tailBatch(i), 2, log.OriginClient)
		require.NoError(t, err)
	}
	require.Equal(t, int64(149), l.LogEndOffset())
	rec.Arm(true)
	res, err := seal(l)
	require.NoError(t, err)
	require.True(t, res.Ready)
	require.Equal(t, int64(150), res.Proposal.Seal)
	proposed = res.Proposal.Seal
	rec.Point("after the proposal")
	rec.Arm(false)
	require.NoError(t, rec.Err())
	t.Logf("%d crash points, 3 images each; log ends on reopening %v, seals %v", rec.Checked(), ends, seals)
	require.Greater(t, len(ends), 2, "the unsynced tail survives in part on some images: %v", ends)
}
