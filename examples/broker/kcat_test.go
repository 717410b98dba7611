package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// kcatRequiredEnv makes the kcat tests fail instead of skip when kcat is
// missing (.ci/run installs Debian's package kcat and sets it).
const kcatRequiredEnv = "TIERLOG_REQUIRE_KCAT"

// kcatPath finds kcat (librdkafka's command-line client), or skips the
// test with the reason, unless TIERLOG_REQUIRE_KCAT=1.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err == nil {
		return p
	}
	if os.Getenv(kcatRequiredEnv) == "1" {
		t.Fatalf("kcat not found (%v) and %s=1: install Debian's package kcat", err, kcatRequiredEnv)
	}
	t.Skipf("kcat not found (%v): install Debian's package kcat to run the librdkafka tests", err)
	return ""
}

// kcat runs kcat with args against s, stdin as its input, and returns
// its standard output. A run is bounded to 60 s.
func kcat(t *testing.T, bin string, s *Server, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-b", s.Addr().String()}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "kcat %s\n%s", strings.Join(args, " "), errOut.String())
	return out.Bytes()
}

// TestKcat produces 10,000 keyed messages with a header through kcat
// (librdkafka) with each codec, with and without the idempotent producer,
// to a topic of 1 and of 3 partitions, and reads them back with kcat:
// every message comes back once, with its key, value and header, and
// the messages of each key (one partition) in the order produced.
func TestKcat(t *testing.T) {
	bin := kcatPath(t)
	s := startBrokerWith(t, t.TempDir(), 3)
	const n = 10000
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "k%d:v%05d-%s\n", i%17, i, strings.Repeat("x", i%50))
	}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, idem := range []bool{false, true} {
			for _, parts := range []int{1, 3} {
				topic := fmt.Sprintf("kcat-%s-%t-%d", codec, idem, parts)
				t.Run(topic, func(t *testing.T) {
					args := []string{"-P", "-t", topic, "-K", ":", "-z", codec, "-H", "origin=kcat"}
					if idem {
						args = append(args, "-X", "enable.idempotence=true")
					}
					if parts == 1 {
						args = append(args, "-p", "0")
					}
					kcat(t, bin, s, in.Bytes(), args...)
					out := kcat(t, bin, s, nil, "-C", "-t", topic, "-e", "-q", "-f", "%p|%h|%k:%s\n")
					checkKcatOutput(t, in.String(), string(out), parts)
					checkCodec(t, s, topic, parts, kcatCodecs[codec], true)
				})
			}
		}
	}
}

// kcatCodecs is the attributes' codec of kcat's -z names.
var kcatCodecs = map[string]int16{"none": codecNone, "gzip": codecGzip, "snappy": codecSnappy, "lz4": codecLz4, "zstd": codecZstd}

// checkCodec checks that every batch of the topic's partitions carries
// codec: librdkafka falls back to uncompressed batches, silently, when
// the broker's ApiVersions answer leaves out what it ties a codec to.
// With smallUncompressed, a batch of fewer than 10 records may be
// uncompressed (librdkafka, kgo and others send a batch as it is when
// compressing does not shrink it), but each partition must hold a
// compressed one.
func checkCodec(t *testing.T, s *Server, topic string, parts int, codec int16, smallUncompressed bool) {
	t.Helper()
	for p := range int32(parts) {
		compressed := 0
		l := testLog(t, s, topic, p)
		for next := int64(0); next < l.HighWatermark(); {
			fd, err := l.Read(nil, next, 4<<20, log.IsolationHighWatermark, true)
			require.NoError(t, err)
			require.NotEmpty(t, fd.Records, "partition %d at %d", p, next)
			for b := fd.Records; len(b) > 0; {
				batch, err := record.ReadBatch(b)
				require.NoError(t, err)
				got := batch.Attributes() & 7
				if got == codec {
					compressed++
				} else if !smallUncompressed || got != codecNone || batch.RecordsCount() >= 10 {
					require.Equal(t, codec, got, "codec of partition %d batch at %d (%d records)", p, batch.BaseOffset(), batch.RecordsCount())
				}
				next = batch.LastOffset() + 1
				b = b[batch.Size():]
			}
		}
		require.Positive(t, compressed, "partition %d: no batch with codec %d", p, codec)
	}
}

// checkKcatOutput compares what kcat consumed (lines "partition|headers|
// key:value") with what it produced (lines "key:value"): the same
// multiset, every header kept, each key's values in produced order and
// in one partition below parts.
func checkKcatOutput(t *testing.T, produced, consumed string, parts int) {
	t.Helper()
	want := map[string][]string{} // key -> values in order
	for _, line := range strings.Split(strings.TrimSuffix(produced, "\n"), "\n") {
		k, v, _ := strings.Cut(line, ":")
		want[k] = append(want[k], v)
	}
	got := map[string][]string{}
	partOf := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(consumed, "\n"), "\n")
	for _, line := range lines {
		fields := strings.SplitN(line, "|", 3)
		require.Len(t, fields, 3, "consumed line %q", line)
		p, h, kv := fields[0], fields[1], fields[2]
		require.Equal(t, "origin=kcat", h, "headers of %q", line)
		require.Less(t, p, fmt.Sprint(parts), "partition of %q", line)
		k, v, _ := strings.Cut(kv, ":")
		if q, ok := partOf[k]; ok {
			require.Equal(t, q, p, "key %s in two partitions", k)
		}
		partOf[k] = p
		got[k] = append(got[k], v)
	}
	require.Equal(t, len(strings.Split(strings.TrimSuffix(produced, "\n"), "\n")), len(lines), "messages consumed")
	require.Equal(t, want, got)
}

// TestKcatStartsAtTimestamp: kcat -o s@T starts at the offset ListOffsets
// answers for T: the first message produced after T.
func TestKcatStartsAtTimestamp(t *testing.T) {
	bin := kcatPath(t)
	s := startBroker(t, t.TempDir())
	const topic = "kcat-time"
	kcat(t, bin, s, []byte("before-1\nbefore-2\n"), "-P", "-t", topic, "-p", "0")
	time.Sleep(20 * time.Millisecond)
	ts := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	kcat(t, bin, s, []byte("after-1\nafter-2\n"), "-P", "-t", topic, "-p", "0")

	off, found, err := testLog(t, s, topic, 0).FetchOffsetByTimestamp(ts)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(2), off.Offset, "ListOffsets(%d)", ts)
	out := kcat(t, bin, s, nil, "-C", "-t", topic, "-p", "0", "-o", fmt.Sprintf("s@%d", ts), "-e", "-q", "-f", "%o:%s\n")
	require.Equal(t, "2:after-1\n3:after-2\n", string(out))
}
