package remote

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
)

// TestTaskDecisionsDataDriven runs testdata/tasks: the pure decisions of
// the remote-log manager's tasks (copy candidates, the highest remote offset,
// the filtered lineage and expiration).
//
//	filter epochs=E@O,...                      FilterLineage
//	within epochs=E@O,... end=N leo=L lineage=E@O,...   SegmentWithinLineage
//	highest cache=E@O,... leo=L remote=E:H,...  FindHighestRemoteOffset
//	candidates bases=B,... leo=L lso=S          CopyCandidates over segments at the bases (the last active)
//	segment id=X start=S end=E epochs=E@O,... [state=STATE] [size=N] [ts=T]   add to the listing
//	retention lineage=E@O,... log-start=N leo=L [ms=M] [bytes=B] [now=T] [local=N] [copying=X]
//	cleanup earliest=E [consolidating] [x=N]    PlanEpochCleanup
func TestTaskDecisionsDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/tasks", func(t *testing.T, path string) {
		var segs []SegmentMetadata
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(key string) string {
				for _, a := range d.CmdArgs {
					if a.Key == key {
						if len(a.Vals) == 0 {
							return "true"
						}
						return strings.Join(a.Vals, ",")
					}
				}
				return ""
			}
			num := func(key string, def int64) int64 {
				v := arg(key)
				if v == "" {
					return def
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "%s=%q: %v", key, v, err)
				}
				return n
			}
			entries := func(key string) []epochcache.Entry {
				v := arg(key)
				if v == "" {
					return nil
				}
				es, err := epochcache.ParseEntries(v)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				return es
			}
			switch d.Cmd {
			case "filter":
				return epochcache.FormatEntries(FilterLineage(entries("epochs")))
			case "within":
				m := SegmentMetadata{EndOffset: num("end", 0), SegmentLeaderEpochs: entries("epochs")}
				m.StartOffset = m.SegmentLeaderEpochs[0].StartOffset
				return strconv.FormatBool(SegmentWithinLineage(&m, num("leo", 0), entries("lineage")))
			case "highest":
				cache := entries("cache")
				remote := map[int32]int64{}
				for _, f := range strings.Split(arg("remote"), ",") {
					if f == "" {
						continue
					}
					e, h, _ := strings.Cut(f, ":")
					ei, _ := strconv.Atoi(e)
					hi, _ := strconv.ParseInt(h, 10, 64)
					remote[int32(ei)] = hi
				}
				c := epochcache.New()
				for _, e := range cache {
					c.Assign(e.Epoch, e.StartOffset)
				}
				leo := num("leo", 0)
				off, epoch, err := FindHighestRemoteOffset(cache,
					func(e int32) (int64, bool, error) { h, ok := remote[e]; return h, ok, nil },
					func(e int32) epochcache.EpochEndOffset { return c.EndOffsetFor(e, leo) })
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("(%d, %d)", off, epoch)
			case "candidates":
				var infos []log.SegmentInfo
				bases := strings.Split(arg("bases"), ",")
				for i, b := range bases {
					n, _ := strconv.ParseInt(b, 10, 64)
					info := log.SegmentInfo{BaseOffset: n, NextOffset: num("leo", 0), Active: i == len(bases)-1}
					if !info.Active {
						info.NextOffset, _ = strconv.ParseInt(bases[i+1], 10, 64)
					}
					infos = append(infos, info)
				}
				var out []string
				for _, c := range CopyCandidates(infos, num("lso", 0)) {
					out = append(out, fmt.Sprintf("(%d next %d)", c.BaseOffset, c.NextOffset))
				}
				if len(out) == 0 {
					return "none"
				}
				return strings.Join(out, " ")
			case "segment":
				m := SegmentMetadata{
					SegmentID:   SegmentID{TopicIDPartition: testPartition(0), ID: nameID(arg("id"))},
					StartOffset: num("start", 0), EndOffset: num("end", 0),
					SegmentLeaderEpochs: entries("epochs"), SizeBytes: num("size", 0),
					MaxTimestampMs: num("ts", 0), State: CopySegmentFinished,
				}
				if s := arg("state"); s != "" {
					m.State = parseSegmentState(s)
				}
				segs = append(segs, m)
				return ""
			case "retention":
				lineage := entries("lineage")
				in := RetentionInput{
					Lineage: lineage, LogStart: num("log-start", 0), LogEnd: num("leo", 0),
					RetentionMs: num("ms", -1), RetentionBytes: num("bytes", -1), NowMs: num("now", 0),
					LocalOnlyBytes: num("local", 0),
				}
				if c := arg("copying"); c != "" {
					in.BeingCopied = func(id SegmentID) bool { return id.ID == nameID(c) }
				}
				for _, e := range lineage {
					in.SegmentsByEpoch = append(in.SegmentsByEpoch, segmentsOfEpoch(sortedSegments(segs), e.Epoch))
				}
				plan := PlanRetention(in)
				var b strings.Builder
				for _, s := range plan.Delete {
					fmt.Fprintf(&b, "delete %s (%s)\n", idName(s.Segment.SegmentID.ID), s.Reason)
				}
				fmt.Fprintf(&b, "new log start: %d\n", plan.NewLogStart)
				if plan.StoppedAtCopy {
					b.WriteString("stopped at a running copy\n")
				}
				return b.String()
			case "cleanup":
				guard := CrossTierGuard{Consolidating: arg("consolidating") != ""}
				if x := arg("x"); x != "" {
					guard.Start, guard.Known = num("x", 0), true
				}
				out := PlanEpochCleanup(int32(num("earliest", 0)), segmentEpochs(segs),
					func(e int32) []SegmentMetadata { return segmentsOfEpoch(sortedSegments(segs), e) }, guard)
				var names []string
				for _, s := range out {
					names = append(names, idName(s.Segment.SegmentID.ID))
				}
				if len(names) == 0 {
					return "delete none"
				}
				return "delete " + strings.Join(names, " ")
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// sortedSegments returns the live segments of segs as ListSegments lists
// them: DELETE_SEGMENT_FINISHED forgotten, sorted by start offset.
func sortedSegments(segs []SegmentMetadata) []SegmentMetadata {
	out := slices.DeleteFunc(slices.Clone(segs), func(s SegmentMetadata) bool { return s.State == DeleteSegmentFinished })
	slices.SortStableFunc(out, func(a, b SegmentMetadata) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	return out
}

func nameID(name string) UUID {
	var u UUID
	copy(u[:], name)
	return u
}

func idName(u UUID) string { return strings.TrimRight(string(u[:]), "\x00") }
