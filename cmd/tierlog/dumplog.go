package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// batchJSON is one batch of dump-log's JSON output.
type batchJSON struct {
	Position             int64        `json:"position"`
	BaseOffset           int64        `json:"baseOffset"`
	LastOffset           int64        `json:"lastOffset"`
	Count                int32        `json:"count"`
	PartitionLeaderEpoch int32        `json:"partitionLeaderEpoch"`
	ProducerID           int64        `json:"producerId"`
	ProducerEpoch        int16        `json:"producerEpoch"`
	BaseSequence         int32        `json:"baseSequence"`
	LastSequence         int32        `json:"lastSequence"`
	TimestampType        string       `json:"timestampType"`
	BaseTimestamp        int64        `json:"baseTimestamp"`
	MaxTimestamp         int64        `json:"maxTimestamp"`
	Compression          string       `json:"compression"`
	Transactional        bool         `json:"transactional"`
	Control              bool         `json:"control"`
	Size                 int          `json:"size"`
	CRC                  uint32       `json:"crc"`
	Valid                bool         `json:"valid"`
	Problem              string       `json:"problem,omitempty"`
	Records              []recordJSON `json:"records,omitempty"`
}

// recordJSON is one record (--deep). Key and Value are base64 (JSON's
// encoding of bytes) and present only with --print-values.
type recordJSON struct {
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	KeySize   int          `json:"keySize"`
	ValueSize int          `json:"valueSize"`
	Key       []byte       `json:"key,omitempty"`
	Value     []byte       `json:"value,omitempty"`
	Headers   []headerJSON `json:"headers,omitempty"`
	// Control describes a control record: "COMMIT coordinatorEpoch=3".
	Control string `json:"control,omitempty"`
}

type headerJSON struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type dumpLogJSON struct {
	File     string      `json:"file"`
	Batches  []batchJSON `json:"batches"`
	Problems []string    `json:"problems,omitempty"`
}

type dumpLogFlags struct {
	deep          bool
	printValues   bool
	maxValueBytes int
}

func setupDumpLog(fl *flag.FlagSet) func(*tool, []string, *output) error {
	var f dumpLogFlags
	fl.BoolVar(&f.deep, "deep", false, "decode every record of every batch")
	fl.BoolVar(&f.printValues, "print-values", false, "with --deep: print keys, values and header values")
	fl.IntVar(&f.maxValueBytes, "max-value-bytes", 64, "with --print-values: show at most this many bytes of each (text output)")
	return func(t *tool, args []string, out *output) error {
		if f.printValues {
			f.deep = true
		}
		if f.maxValueBytes < 0 {
			return usagef("--max-value-bytes must be >= 0")
		}
		return t.dumpLog(args[0], f, out)
	}
}

func (t *tool) dumpLog(path string, f dumpLogFlags, out *output) error {
	r, err := t.openBatches(path)
	if err != nil {
		return err
	}
	defer r.close()
	doc := dumpLogJSON{File: path, Batches: []batchJSON{}}
	var probs problems
	problem := func(format string, args ...any) {
		msg := probs.addf("%s: "+format, append([]any{path}, args...)...)
		out.printf("PROBLEM %s", msg)
	}
	out.printf("dumping %s (%d bytes)", path, r.size)
	expect := int64(-1) // the next batch's lowest valid base offset
	if base, kind, ok := log.ParseSegmentFileName(baseName(path)); ok && kind == "log" {
		out.printf("segment base offset %d", base)
		expect = base
	}
	it := record.NewIter(record.IterOptions{})
	for {
		b, pos, err := r.next()
		if err == io.EOF {
			break
		}
		var fe *frameError
		if errors.As(err, &fe) {
			problem("%v", fe)
			break
		}
		if err != nil {
			return err
		}
		bj := describeBatch(b, pos)
		if err := b.Validate(); err != nil {
			bj.Valid, bj.Problem = false, reasonOf(err)
		}
		if expect >= 0 && b.BaseOffset() < expect {
			bj.Valid = false
			bj.Problem = strings.TrimPrefix(bj.Problem+"; ", "; ") +
				fmt.Sprintf("base offset %d below %d (offsets must increase)", b.BaseOffset(), expect)
		}
		expect = max(expect, b.NextOffset())
		out.printf("%s", formatBatch(&bj))
		if f.deep && bj.Problem == "" {
			bj.Records, err = t.decodeRecords(it, b, f, out)
			if err != nil {
				bj.Valid, bj.Problem = false, reasonOf(err)
			}
		}
		if bj.Problem != "" {
			problem("batch at position %d (base offset %d): %s", pos, b.BaseOffset(), bj.Problem)
		}
		doc.Batches = append(doc.Batches, bj)
	}
	out.printf("%d batches, %d valid bytes of %d", len(doc.Batches), validBytes(doc.Batches, r.size, len(probs.list) > 0), r.size)
	doc.Problems = probs.list
	out.setJSON(doc)
	return probs.err()
}

// validBytes is where the valid prefix of the file ends: the start of the
// first bad batch, or the end of the last good one.
func validBytes(batches []batchJSON, size int64, damaged bool) int64 {
	end := int64(0)
	for _, b := range batches {
		if !b.Valid {
			return b.Position
		}
		end = b.Position + int64(b.Size)
	}
	if !damaged {
		return size
	}
	return end
}

func describeBatch(b record.Batch, pos int64) batchJSON {
	return batchJSON{
		Position: pos, BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Count: b.RecordsCount(),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		ProducerID:           b.ProducerID(), ProducerEpoch: b.ProducerEpoch(),
		BaseSequence: b.BaseSequence(), LastSequence: b.LastSequence(),
		TimestampType: b.TimestampType().String(), BaseTimestamp: b.BaseTimestamp(), MaxTimestamp: b.MaxTimestamp(),
		Compression: b.Compression().String(), Transactional: b.IsTransactional(), Control: b.IsControl(),
		Size: b.Size(), CRC: b.CRC(), Valid: true,
	}
}

func formatBatch(b *batchJSON) string {
	var s strings.Builder
	fmt.Fprintf(&s, "batch pos=%d offsets=[%d, %d] count=%d epoch=%d", b.Position, b.BaseOffset, b.LastOffset, b.Count, b.PartitionLeaderEpoch)
	if b.ProducerID >= 0 {
		fmt.Fprintf(&s, " producer=%d/%d seq=[%d, %d]", b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.LastSequence)
	}
	fmt.Fprintf(&s, " %s=[%d, %d] codec=%s size=%d", b.TimestampType, b.BaseTimestamp, b.MaxTimestamp, b.Compression, b.Size)
	if b.Transactional {
		s.WriteString(" transactional")
	}
	if b.Control {
		s.WriteString(" control")
	}
	if b.Valid {
		fmt.Fprintf(&s, " crc=%#08x ok", b.CRC)
	} else {
		fmt.Fprintf(&s, " crc=%#08x INVALID", b.CRC)
	}
	return s.String()
}

// decodeRecords decodes b's records, printing each (text mode).
func (t *tool) decodeRecords(it *record.Iter, b record.Batch, f dumpLogFlags, out *output) ([]recordJSON, error) {
	var recs []recordJSON
	it.Reset(b)
	for it.Next() {
		r := it.Record()
		rj := recordJSON{Offset: r.Offset, Timestamp: r.Timestamp, KeySize: sizeOf(r.Key), ValueSize: sizeOf(r.Value)}
		if b.IsControl() {
			rj.Control = describeControl(r)
		}
		if f.printValues {
			rj.Key, rj.Value = clone(r.Key), clone(r.Value)
		}
		for h := r.Headers(); h.Next(); {
			hj := headerJSON{Key: string(h.Key())}
			if f.printValues {
				hj.Value = clone(h.Value())
			}
			rj.Headers = append(rj.Headers, hj)
		}
		out.printf("%s", formatRecord(&rj, f))
		recs = append(recs, rj)
	}
	return recs, it.Err()
}

func formatRecord(r *recordJSON, f dumpLogFlags) string {
	var s strings.Builder
	fmt.Fprintf(&s, "  | offset=%d ts=%d", r.Offset, r.Timestamp)
	if r.Control != "" {
		fmt.Fprintf(&s, " control=%s", r.Control)
	}
	if f.printValues {
		fmt.Fprintf(&s, " key=%s value=%s", printable(r.Key, r.KeySize, f.maxValueBytes), printable(r.Value, r.ValueSize, f.maxValueBytes))
	} else {
		fmt.Fprintf(&s, " keySize=%d valueSize=%d", r.KeySize, r.ValueSize)
	}
	if len(r.Headers) > 0 {
		hs := make([]string, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = strconv.Quote(h.Key)
			if f.printValues {
				hs[i] += "=" + printable(h.Value, sizeOf(h.Value), f.maxValueBytes)
			}
		}
		fmt.Fprintf(&s, " headers=[%s]", strings.Join(hs, " "))
	}
	return s.String()
}

// printable quotes b (Go syntax), cut to max bytes; null for a null key
// or value.
func printable(b []byte, size, max int) string {
	if size < 0 {
		return "null"
	}
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}

func describeControl(r *record.Record) string {
	k, err := record.ParseControlKey(r.Key)
	if err != nil {
		return "unparsable(" + reasonOf(err) + ")"
	}
	if k.Type != record.ControlAbort && k.Type != record.ControlCommit {
		return k.Type.String()
	}
	m, err := record.ParseEndTxnMarker(r.Value)
	if err != nil {
		return k.Type.String() + " unparsable(" + reasonOf(err) + ")"
	}
	return fmt.Sprintf("%s coordinatorEpoch=%d", k.Type, m.CoordinatorEpoch)
}

// sizeOf is Kafka's size of a nullable field: -1 for null.
func sizeOf(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// baseName is the last element of a slash- or OS-separated path.
func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}
