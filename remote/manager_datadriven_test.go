package remote

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

var segmentIDPattern = regexp.MustCompile(`p0/[A-Za-z0-9_-]{22}`)

// TestManagerDataDriven runs testdata/manager: the remote-log manager's
// tasks over a real log, Pebble metadata and a StorageManager on a mem
// store (scenarios of the lifecycle, copy, follower and expiration tasks).
//
//	open [local-retention-ms=N] [retention-ms=N] [retention-bytes=N]   the leader's log p0
//	append epoch=E segments=N records=N          N segments of N records, rolled, committed
//	leader | follower                            OnLeadershipChange
//	fail-copy [from=O]                           copies of segments starting at >= O fail
//	fail-delete [from=O]                         deletions of segments starting at >= O fail
//	heal                                         no more injected failures
//	add-started start=S end=E epoch=E            a COPY_SEGMENT_STARTED segment (an interrupted copy)
//	log-start to=O                               the log's MaybeIncrementLogStartOffset
//	damage-local segment=B batch=K               flip a record byte of the K-th batch of local segment B
//	truncate to=O                                the log's TruncateTo
//	copy | expire | follower-task                one run of the task: its result, then ok or the error;
//	                                             the copy and expiration results must agree with the
//	                                             listener's events of the run
//	advance ms=N                                 move the clock
//	retention                                    the log's DeleteOldSegments
//	state                                        log offsets, remote segments, storage calls, metrics
//	events                                       the listener's events since the last call
func TestManagerDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/manager", func(t *testing.T, path string) {
		e := newMgrEnv(t, nil)
		tp := testPartition(0)
		var l *log.UnifiedLog
		var events []string
		var run runEvents // the listener's events of the current task run
		e.mgr.opts.Listener = ManagerListener{
			CopyStart: func(c CopyInfo) {
				run.started = append(run.started, c.Segment)
				events = append(events, fmt.Sprintf("copy-start [%d,%d]", c.Segment.StartOffset, c.Segment.EndOffset))
			},
			CopyEnd: func(c CopyInfo) {
				run.ended = append(run.ended, c.Segment)
				events = append(events, fmt.Sprintf("copy-end [%d,%d]", c.Segment.StartOffset, c.Segment.EndOffset))
			},
			CopyError: func(c CopyInfo, err error) {
				run.failed = append(run.failed, c.Segment)
				events = append(events, fmt.Sprintf("copy-error [%d,%d]", c.Segment.StartOffset, c.Segment.EndOffset))
			},
			SegmentDeleted: func(m SegmentMetadata, r DeleteReason) {
				run.deleted = append(run.deleted, ScheduledDelete{m, r})
				events = append(events, fmt.Sprintf("deleted [%d,%d] (%s)", m.StartOffset, m.EndOffset, r))
			},
			Corruption: func(_ TopicIDPartition, err error) {
				var bce *BatchCorruptionError
				if errors.As(err, &bce) {
					events = append(events, fmt.Sprintf("corruption: segment %d, batch at %d (base offset %d): %s",
						bce.StartOffset, bce.Position, bce.BatchBaseOffset, bce.Reason))
				} else {
					events = append(events, "corruption: "+err.Error())
				}
			},
		}
		ctx := context.Background()
		// Segment ids are random: masked.
		mask := func(s string) string {
			return segmentIDPattern.ReplaceAllString(strings.ReplaceAll(s, tp.String(), "p0"), "p0/<id>")
		}
		result := func(err error) string {
			if err != nil {
				return "error: " + mask(err.Error())
			}
			return "ok"
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			num := func(key string, def int64) int64 {
				v := def
				if d.HasArg(key) {
					d.ScanArgs(t, key, &v)
				}
				return v
			}
			switch d.Cmd {
			case "open":
				l = e.openLog("p0", log.Options{LocalRetentionMs: num("local-retention-ms", 0), RetentionMs: num("retention-ms", 0),
					RetentionBytes: num("retention-bytes", 0)})
				return "ok"
			case "append":
				appendSegments(t, l, int32(num("epoch", 0)), int(num("segments", 1)), int(num("records", 5)))
				return fmt.Sprintf("log end %d", l.LogEndOffset())
			case "leader":
				return result(e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
			case "follower":
				return result(e.mgr.OnLeadershipChange(nil, []Partition{{TopicIDPartition: tp, Log: l}}))
			case "fail-copy":
				from := num("from", 0)
				e.hooks.beforeCopy = func(m *SegmentMetadata) error {
					if m.StartOffset >= from {
						return errors.New("injected upload failure")
					}
					return nil
				}
				return "ok"
			case "fail-delete":
				from := num("from", 0)
				e.hooks.beforeDelete = func(m *SegmentMetadata) error {
					if m.StartOffset >= from {
						return errors.New("injected delete failure")
					}
					return nil
				}
				return "ok"
			case "heal":
				e.hooks.beforeCopy, e.hooks.beforeDelete = nil, nil
				return "ok"
			case "add-started":
				start := num("start", 0)
				err := e.meta.AddSegment(ctx, SegmentMetadata{SegmentID: NewSegmentID(tp), StartOffset: start,
					EndOffset: num("end", 0), SegmentLeaderEpochs: []epochcache.Entry{{Epoch: int32(num("epoch", 0)), StartOffset: start}},
					SizeBytes: 1, State: CopySegmentStarted, TxnIndexEmpty: true})
				return result(err)
			case "log-start":
				_, err := l.MaybeIncrementLogStartOffset(num("to", 0))
				if err != nil {
					return result(err)
				}
				return fmt.Sprintf("log start %d", l.LogStartOffset())
			case "damage-local":
				path := fmt.Sprintf("p0/%020d.log", num("segment", 0))
				pos := localBatchPositions(t, e.fs, path)[num("batch", 0)]
				damageVFSFile(t, e.fs, path, func(b []byte) { b[pos+record.HeaderSize+2] ^= 0x40 })
				return fmt.Sprintf("flipped byte %d", pos+record.HeaderSize+2)
			case "truncate":
				_, err := l.TruncateTo(num("to", 0))
				if err != nil {
					return result(err)
				}
				return fmt.Sprintf("log end %d", l.LogEndOffset())
			case "copy":
				run = runEvents{}
				res, err := e.mgr.RunCopy(ctx, tp)
				run.requireAgreesWithCopy(t, res)
				return mask(res.String()) + "\n" + result(err)
			case "expire":
				run = runEvents{}
				res, err := e.mgr.RunExpiration(ctx, tp)
				run.requireAgreesWithExpiration(t, res)
				return mask(res.String()) + "\n" + result(err)
			case "follower-task":
				res, err := e.mgr.RunFollower(ctx, tp)
				return res.String() + "\n" + result(err)
			case "advance":
				e.nowMs.Add(num("ms", 0))
				return "ok"
			case "retention":
				n, err := l.DeleteOldSegments()
				if err != nil {
					return result(err)
				}
				return fmt.Sprintf("deleted %d local segments", n)
			case "events":
				out := strings.Join(events, "\n")
				events = nil
				if out == "" {
					return "(none)"
				}
				return out
			case "state":
				var b strings.Builder
				fmt.Fprintf(&b, "log: start %d, local start %d, end %d, highest remote %d\n", l.LogStartOffset(),
					l.LocalLogStartOffset(), l.LogEndOffset(), l.HighestOffsetInRemoteStorage())
				all, err := e.meta.ListSegments(tp)
				require.NoError(t, err)
				if len(all) == 0 {
					b.WriteString("remote: (none)\n")
				}
				for _, s := range all {
					fmt.Fprintf(&b, "remote: [%d,%d] %s %s\n", s.StartOffset, s.EndOffset, epochcache.FormatEntries(s.SegmentLeaderEpochs), s.State)
				}
				m := e.mgr.Metrics()
				fmt.Fprintf(&b, "storage calls: copy %d, delete %d\n", e.hooks.copies.Load(), e.hooks.deletes.Load())
				fmt.Fprintf(&b, "metrics: copied %d, copy errors %d, deleted %d, delete errors %d, lag %d segments\n",
					m.SegmentsCopied, m.CopyErrors, m.SegmentsDeleted, m.DeleteErrors, m.Partitions[tp].CopyLagSegments)
				fmt.Fprintf(&b, "corruption: copy %d, stalled at %d", m.CopyCorruptions, m.Partitions[tp].CopyStalledAt)
				return b.String()
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// runEvents are the listener's events of one task run.
type runEvents struct {
	started, ended, failed []SegmentMetadata
	deleted                []ScheduledDelete
}

// requireAgreesWithCopy checks a copy run's result against its events:
// each copied segment had a CopyStart and a CopyEnd, the failed one a
// CopyStart and a CopyError, and nothing else was reported.
func (r runEvents) requireAgreesWithCopy(t *testing.T, res CopyResult) {
	t.Helper()
	ids := func(segs []SegmentMetadata) []SegmentID {
		out := []SegmentID{}
		for _, s := range segs {
			out = append(out, s.SegmentID)
		}
		return out
	}
	var failed []SegmentMetadata
	if res.Failed != nil {
		failed = []SegmentMetadata{*res.Failed}
	}
	require.Equal(t, ids(r.ended), ids(res.Copied), "CopyEnd events and CopyResult.Copied")
	require.Equal(t, ids(r.failed), ids(failed), "CopyError events and CopyResult.Failed")
	require.Equal(t, ids(r.started), ids(append(slices.Clone(res.Copied), failed...)), "CopyStart events")
	require.Len(t, r.deleted, 0, "a copy run reports no SegmentDeleted")
}

// requireAgreesWithExpiration checks an expiration run's result against
// its events: one SegmentDeleted per deleted segment, same segment, same
// reason, same order.
func (r runEvents) requireAgreesWithExpiration(t *testing.T, res ExpirationResult) {
	t.Helper()
	if len(r.deleted) == 0 {
		r.deleted = nil
	}
	require.Equal(t, r.deleted, res.Deleted, "SegmentDeleted events and ExpirationResult.Deleted")
	require.Empty(t, r.started, "an expiration run copies nothing")
}
