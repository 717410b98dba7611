package consolidate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tierlog/tierlog/tierstate"
)

// TestDecideDataDriven runs testdata/decide_*: the endpoint's pure
// decisions.
//
// Commands:
//
//	set key=value ...       partition defaults for fetch: seal, status
//	                        (none|out-of-range|error), wal-start, hw,
//	                        local-start, local-log (true|false), remote
//	                        (true|false), x (-1 = unknown), covers (yes|no)
//	fetch offset=O [key=value ...]   DecideFetch with the defaults and
//	                        overrides; prints the remote lookup when the
//	                        decision asked for one
//	reconcile seal=S|none|pending leo=L hw=H role=leader|follower [remote=false]
//	earliest-local wal-start=W seal=S ed=E
//	latest latest=N seal=S ed=E
//	epoch-end epoch=Q seal=S ed=E latest=N
//	budget fetch-max=N segment=N max-message=N
//	trim offset=O budget=N
//	<base>-<last>:<size> per line
func TestDecideDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasPrefix(pathBase(path), "decide_") {
			t.Skip()
		}
		defaults := map[string]string{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return handleDecide(t, d, defaults)
		})
	})
}

func pathBase(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func argMap(d *datadriven.TestData) map[string]string {
	m := map[string]string{}
	for _, a := range d.CmdArgs {
		m[a.Key] = strings.Join(a.Vals, ",")
	}
	return m
}

func mustInt(t *testing.T, d *datadriven.TestData, m map[string]string, key string) int64 {
	v, ok := m[key]
	if !ok {
		d.Fatalf(t, "missing %s", key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}

func handleDecide(t *testing.T, d *datadriven.TestData, defaults map[string]string) string {
	args := argMap(d)
	switch d.Cmd {
	case "set":
		for k, v := range args {
			defaults[k] = v
		}
		return "ok"
	case "fetch":
		m := map[string]string{"seal": "-1", "status": "none", "local-log": "true", "remote": "true", "x": "-1", "local-start": "0"}
		for k, v := range defaults {
			m[k] = v
		}
		for k, v := range args {
			m[k] = v
		}
		in := FetchInput{
			FetchOffset:          mustInt(t, d, m, "offset"),
			Seal:                 mustInt(t, d, m, "seal"),
			WALStart:             mustInt(t, d, m, "wal-start"),
			HighWatermark:        mustInt(t, d, m, "hw"),
			LocalLogAvailable:    m["local-log"] == "true",
			LocalLogStart:        mustInt(t, d, m, "local-start"),
			RemoteStorageEnabled: m["remote"] == "true",
		}
		if x := mustInt(t, d, m, "x"); x >= 0 {
			in.CrossTierStart, in.CrossTierKnown = x, true
		}
		switch m["status"] {
		case "none":
		case "out-of-range":
			in.Status = DisklessOutOfRange
		case "error":
			in.Status = DisklessError
		default:
			d.Fatalf(t, "bad status %q", m["status"])
		}
		var b strings.Builder
		a := DecideFetch(in)
		if a.NeedsCoverage {
			switch m["covers"] {
			case "yes":
				in.Coverage = CoverageHeld
			case "no":
				in.Coverage = CoverageMissing
			default:
				d.Fatalf(t, "the decision needs covers=yes|no")
			}
			fmt.Fprintf(&b, "remote lookup of %d: %s\n", in.Seal-1, map[Coverage]string{CoverageHeld: "held", CoverageMissing: "missing"}[in.Coverage])
			a = DecideFetch(in)
		}
		fmt.Fprintf(&b, "O=%d: %s log-start=%d", in.FetchOffset, a.Error, a.LogStartOffset)
		if a.DisklessStart >= 0 {
			fmt.Fprintf(&b, " window=[%d, %d)", a.WholeLogStart, a.DisklessStart)
		}
		if a.ServeRecords {
			b.WriteString(" serve")
		}
		if a.RemotePrefixUnknown {
			b.WriteString(" remote-prefix-unknown")
		}
		return b.String()
	case "reconcile":
		var st tierstate.State
		var err error
		st = st.WithConsolidating(true)
		switch args["seal"] {
		case "none":
		case "pending":
			st, err = st.ArmSwitch()
		default:
			seal := mustInt(t, d, args, "seal")
			if st, err = st.ArmSwitch(); err == nil {
				st, err = st.CommitSeal(seal, nil)
			}
			if err == nil && args["phase"] != "1" {
				st, err = st.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4,
					Seal: seal, LastClassicLeaderEpoch: 3}, tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
			}
		}
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		sd := PlanStart(st, mustInt(t, d, args, "leo"), mustInt(t, d, args, "hw"), args["role"] == "leader", args["remote"] != "false")
		out := sd.Action.String()
		if sd.Action == StartReady {
			out += fmt.Sprintf(" at %d", sd.FetchOffset)
		}
		if sd.PruneFloor != NoFloor {
			out += fmt.Sprintf(", prune floor %d", sd.PruneFloor)
		}
		return out
	case "earliest-local":
		o := EarliestLocalOffset(mustInt(t, d, args, "wal-start"), mustInt(t, d, args, "seal"), int32(mustInt(t, d, args, "ed")))
		return fmt.Sprintf("(%d, epoch %d)", o.Offset, o.Epoch)
	case "latest":
		o := LatestOffset(mustInt(t, d, args, "latest"), mustInt(t, d, args, "seal"), int32(mustInt(t, d, args, "ed")))
		return fmt.Sprintf("(%d, epoch %d)", o.Offset, o.Epoch)
	case "epoch-end":
		epoch, seal, ed := int32(mustInt(t, d, args, "epoch")), mustInt(t, d, args, "seal"), int32(mustInt(t, d, args, "ed"))
		q := PlanEpochEnd(epoch, seal, ed)
		latest := int64(-999) // never read unless asked
		asked := "no control-plane call"
		if q == EpochEndLatest {
			latest, asked = mustInt(t, d, args, "latest"), "control-plane LATEST"
		}
		a := EpochEnd(q, epoch, seal, latest)
		if a.Undefined() {
			return fmt.Sprintf("NONE (no epoch, no offset), %s", asked)
		}
		return fmt.Sprintf("(%d, %d), %s", a.Epoch, a.EndOffset, asked)
	case "budget":
		return fmt.Sprint(PartitionBudget(mustInt(t, d, args, "fetch-max"), mustInt(t, d, args, "segment"), mustInt(t, d, args, "max-message")))
	case "trim":
		var spans []BatchSpan
		for _, line := range strings.Fields(d.Input) {
			var s BatchSpan
			if _, err := fmt.Sscanf(line, "%d-%d:%d", &s.BaseOffset, &s.LastOffset, &s.Size); err != nil {
				d.Fatalf(t, "bad batch %q: %v", line, err)
			}
			spans = append(spans, s)
		}
		from, to := TrimBatches(spans, mustInt(t, d, args, "offset"), mustInt(t, d, args, "budget"))
		if from == to {
			return "no batch"
		}
		var b strings.Builder
		var bytes int64
		for _, s := range spans[from:to] {
			fmt.Fprintf(&b, "[%d, %d] ", s.BaseOffset, s.LastOffset)
			bytes += s.Size
		}
		fmt.Fprintf(&b, "(%d bytes)", bytes)
		return b.String()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}
