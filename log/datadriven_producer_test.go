package log

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// The producer-state commands of the datadriven driver:
//
//	append-producer epoch=E [origin=client|coordinator|follower]
//	    one append of the batches given one per input line:
//	      plain count=N
//	      data pid=P pepoch=E seq=S count=N [txn]
//	      commit|abort pid=P pepoch=E [coord=C]
//	    leader batches start at offset 0 (the log assigns offsets);
//	    follower batches get consecutive offsets from the log end offset
//	    and leader epoch E.
//	producers          LSO, first unstable offset, open transactions and
//	                   every producer's state (the dedup window)
//	files [suffix=S]   the files of the log directory (ending in S)
//	corrupt-snapshot offset=N   flip a byte of a snapshot file
//	remove-expired     RemoveExpiredProducers
//	producer-snapshot offset=N  ProducerSnapshot, decoded
//
// read isolation=committed also prints the aborted transactions.
func (e *testEnv) handleProducer(t *testing.T, d *datadriven.TestData) (string, bool) {
	switch d.Cmd {
	case "append-producer":
		return e.appendProducer(t, d), true
	case "producers":
		return e.producers(), true
	case "files":
		suffix := ""
		d.MaybeScanArgs(t, "suffix", &suffix)
		names, err := e.fs.List(testDir)
		require.NoError(t, err)
		slices.Sort(names)
		var out []string
		for _, n := range names {
			if strings.HasSuffix(n, suffix) {
				out = append(out, n)
			}
		}
		if len(out) == 0 {
			return "(none)", true
		}
		return strings.Join(out, "\n"), true
	case "corrupt-snapshot":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		path := e.fs.PathJoin(testDir, producer.SnapshotFileName(offset))
		f, err := e.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0xff}, 12)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		return "ok", true
	case "save-producer-snapshot":
		// Keep a snapshot's bytes, as the remote tier stores them with a
		// segment, for load-producer-snapshot.
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		data, err := e.log.ProducerSnapshot(offset)
		if err != nil {
			return "error: " + err.Error(), true
		}
		e.savedSnapshot = data
		return fmt.Sprintf("saved %d bytes", len(data)), true
	case "load-producer-snapshot":
		// Replace the producer state from the saved bytes, as a rebuild
		// from remote storage does.
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		err := e.log.LoadProducerSnapshot(e.savedSnapshot, offset)
		return result(err, e.producers()), true
	case "corrupt-txnindex":
		var base int64
		d.ScanArgs(t, "segment", &base)
		path := e.fs.PathJoin(testDir, segment.TxnIndexFileName(base))
		f, err := e.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0x7f, 0x7f}, 0) // version 0x7f7f
		require.NoError(t, err)
		require.NoError(t, errors.Join(f.Sync(), f.Close()))
		return "ok", true
	case "remove-expired":
		n, err := e.log.RemoveExpiredProducers()
		return result(err, fmt.Sprintf("removed %d\n%s", n, e.producers())), true
	case "producer-snapshot":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		data, err := e.log.ProducerSnapshot(offset)
		if err != nil {
			return "error: " + err.Error(), true
		}
		entries, err := producer.DecodeSnapshot(data)
		if err != nil {
			return "error: " + err.Error(), true
		}
		var out []string
		for _, se := range entries {
			out = append(out, fmt.Sprintf("pid=%d epoch=%d last-seq=%d last-offset=%d txn=%d",
				se.ProducerID, se.ProducerEpoch, se.LastSequence, se.LastOffset, se.CurrentTxnFirstOffset))
		}
		return fmt.Sprintf("%d bytes, %d producers\n%s", len(data), len(entries), strings.Join(out, "\n")), true
	}
	return "", false
}

// buildProducerBatches builds the batches of an append-producer input,
// with base offsets from base (0 for every leader batch).
func buildProducerBatches(t *testing.T, input string, leader bool, base int64, epoch int32, ts int64) []byte {
	var buf []byte
	next := base
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		fields := strings.Fields(line)
		require.NotEmpty(t, fields, "empty batch line")
		args := map[string]int64{"count": 1, "coord": 0}
		flags := map[string]bool{}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				flags[k] = true
				continue
			}
			var n int64
			_, err := fmt.Sscan(v, &n)
			require.NoError(t, err, "argument %q", f)
			args[k] = n
		}
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset = next
		if leader {
			opts.BaseOffset = 0
		} else {
			opts.PartitionLeaderEpoch = epoch
		}
		var err error
		switch fields[0] {
		case "plain":
			buf, err = appendPlainBatch(buf, opts, int(args["count"]), ts)
			next += args["count"]
		case "data":
			opts.ProducerID = args["pid"]
			opts.ProducerEpoch = int16(args["pepoch"])
			opts.BaseSequence = int32(args["seq"])
			opts.Transactional = flags["txn"]
			buf, err = appendPlainBatch(buf, opts, int(args["count"]), ts)
			next += args["count"]
		case "commit", "abort":
			opts.ProducerID = args["pid"]
			opts.ProducerEpoch = int16(args["pepoch"])
			typ := record.ControlCommit
			if fields[0] == "abort" {
				typ = record.ControlAbort
			}
			buf, err = record.AppendEndTxnBatch(buf, opts, ts, typ, int32(args["coord"]))
			next++
		default:
			t.Fatalf("unknown batch kind %q", fields[0])
		}
		require.NoError(t, err)
	}
	return buf
}

func appendPlainBatch(dst []byte, opts record.BuilderOptions, count int, ts int64) ([]byte, error) {
	b := record.NewBuilder(opts)
	for range count {
		b.Add(ts, nil, []byte("value"))
	}
	return b.AppendTo(dst)
}

func (e *testEnv) appendProducer(t *testing.T, d *datadriven.TestData) string {
	var epoch int32
	origin := "client"
	d.ScanArgs(t, "epoch", &epoch)
	d.MaybeScanArgs(t, "origin", &origin)
	leader := origin != "follower"
	buf := buildProducerBatches(t, d.Input, leader, e.log.LogEndOffset(), epoch, e.nowMs)
	var info AppendInfo
	var err error
	switch origin {
	case "client":
		info, err = e.log.AppendAsLeader(buf, epoch, OriginClient)
	case "coordinator":
		info, err = e.log.AppendAsLeader(buf, epoch, OriginCoordinator)
	case "follower":
		info, err = e.log.AppendAsFollower(buf, epoch)
	default:
		d.Fatalf(t, "unknown origin %s", origin)
	}
	if err != nil {
		return fmt.Sprintf("error: %v\nleo=%d lso=%d", err, e.log.LogEndOffset(), e.log.LastStableOffset())
	}
	if info.Duplicate {
		return fmt.Sprintf("duplicate of [%d, %d] batches=%d bytes=%d\nleo=%d lso=%d", info.FirstOffset, info.LastOffset,
			info.Batches, info.Bytes, e.log.LogEndOffset(), e.log.LastStableOffset())
	}
	return fmt.Sprintf("[%d, %d) leo=%d lso=%d", info.FirstOffset, info.LastOffset+1, e.log.LogEndOffset(),
		e.log.LastStableOffset())
}

// producers prints the log's producer state.
func (e *testEnv) producers() string {
	l := e.log
	var b strings.Builder
	fmt.Fprintf(&b, "hw=%d lso=%d", l.HighWatermark(), l.LastStableOffset())
	if fuo, ok := l.FirstUnstableOffset(); ok {
		fmt.Fprintf(&b, " first-unstable=%d", fuo)
	} else {
		b.WriteString(" first-unstable=none")
	}
	var txns []string
	for _, t := range l.OngoingTransactions() {
		txns = append(txns, fmt.Sprintf("%d@%d", t.ProducerID, t.FirstOffset))
	}
	fmt.Fprintf(&b, "\nopen transactions: %s", orNone(strings.Join(txns, " ")))
	ps := l.ActiveProducers()
	if len(ps) == 0 {
		b.WriteString("\nproducers: none")
	}
	for _, p := range ps {
		var batches []string
		for _, m := range p.Batches {
			batches = append(batches, fmt.Sprintf("seq [%d, %d] at [%d, %d]", m.FirstSeq(), m.LastSeq,
				m.FirstOffset(), m.LastOffset))
		}
		fmt.Fprintf(&b, "\nproducer %d: epoch=%d coord=%d txn=%d batches: %s", p.ProducerID, p.ProducerEpoch,
			p.CoordinatorEpoch, p.CurrentTxnFirstOffset, orNone(strings.Join(batches, ", ")))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// formatAborted prints the aborted transactions of a committed read.
func formatAborted(aborted []AbortedTxn) string {
	if len(aborted) == 0 {
		return "aborted: none"
	}
	var parts []string
	for _, a := range aborted {
		parts = append(parts, fmt.Sprintf("pid=%d [%d, %d] lso=%d", a.ProducerID, a.FirstOffset, a.LastOffset,
			a.LastStableOffset))
	}
	return "aborted: " + strings.Join(parts, " ")
}
