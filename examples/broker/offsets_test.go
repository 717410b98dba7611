package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// testCommits is what the tests commit to the test topic's partitions:
// leader epochs known and unknown, metadata absent, empty and not UTF-8.
var testCommits = map[int32]committedOffset{
	0: {offset: 7, leaderEpoch: 0, metadata: "consumer-a\xff\x00"},
	1: {offset: 3, leaderEpoch: -1, metadata: ""},
	2: {offset: 0, leaderEpoch: 0, metadata: "m2"},
}

// commitRequest is an OffsetCommit of commits to the test topic, in
// generation generation.
func commitRequest(group string, generation int32, commits map[int32]committedOffset) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = testTopic
	for p := range int32(testPartitions) {
		c, ok := commits[p]
		if !ok {
			continue
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, c.offset, c.leaderEpoch
		if c.metadata != "" {
			rp.Metadata = kmsg.StringPtr(c.metadata)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// commit commits through r (kgo finds the coordinator) and returns each
// partition's error code.
func commit(ctx context.Context, t *testing.T, r kmsg.Requestor, req *kmsg.OffsetCommitRequest) map[int32]int16 {
	t.Helper()
	resp, err := req.RequestWith(ctx, r)
	require.NoError(t, err)
	codes := map[int32]int16{}
	for _, rt := range resp.Topics {
		require.Equal(t, testTopic, rt.Topic)
		for _, p := range rt.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return codes
}

// fetchCommitted asks for group's committed offsets of the test topic's
// partitions (nil: every committed partition of the group) through r, at
// the highest version both sides serve, and returns them by partition.
func fetchCommitted(ctx context.Context, t *testing.T, r kmsg.Requestor, group string, partitions []int32) map[int32]committedOffset {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if partitions != nil {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = testTopic, partitions
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, r)
	require.NoError(t, err)
	require.Len(t, resp.Groups, 1)
	g := resp.Groups[0]
	require.Equal(t, group, g.Group)
	require.Zero(t, g.ErrorCode)
	got := map[int32]committedOffset{}
	for _, rt := range g.Topics {
		require.Equal(t, testTopic, rt.Topic)
		for _, p := range rt.Partitions {
			require.Zero(t, p.ErrorCode, "partition %d", p.Partition)
			require.NotNil(t, p.Metadata, "partition %d", p.Partition)
			got[p.Partition] = committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: *p.Metadata}
		}
	}
	return got
}

// allPartitions is every partition of the test topic.
var allPartitions = []int32{0, 1, 2}

// checkCommitted checks that group's committed offsets are testCommits,
// asked by partition and as the group's whole list.
func checkCommitted(ctx context.Context, t *testing.T, r kmsg.Requestor, group string) {
	t.Helper()
	require.Equal(t, testCommits, fetchCommitted(ctx, t, r, group, allPartitions))
	require.Equal(t, testCommits, fetchCommitted(ctx, t, r, group, nil))
}

// TestOffsetCommitFetchRestart: a simple consumer group (generation -1)
// commits offsets with leader epochs and metadata through kgo (which
// finds the coordinator with FindCoordinator); OffsetFetch answers them,
// by partition and for the whole group, and an unknown group or
// partition answers -1; after a clean restart the same answers.
func TestOffsetCommitFetchRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startBroker(t, dir)
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)

	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, cl, commitRequest("simple", -1, testCommits)))
	checkCommitted(ctx, t, cl, "simple")
	none := committedOffset{offset: -1, leaderEpoch: -1}
	require.Equal(t, map[int32]committedOffset{0: none, 1: none, 2: none}, fetchCommitted(ctx, t, cl, "no-such-group", allPartitions))
	require.Empty(t, fetchCommitted(ctx, t, cl, "no-such-group", nil))
	// A later commit of one partition changes that partition only.
	moved := committedOffset{offset: 9, leaderEpoch: 0, metadata: "moved"}
	require.Equal(t, map[int32]int16{1: 0}, commit(ctx, t, cl, commitRequest("other", -1, map[int32]committedOffset{1: testCommits[1]})))
	require.Equal(t, map[int32]int16{1: 0}, commit(ctx, t, cl, commitRequest("other", -1, map[int32]committedOffset{1: moved})))
	require.Equal(t, map[int32]committedOffset{0: none, 1: moved, 2: none}, fetchCommitted(ctx, t, cl, "other", allPartitions))

	cl.Close()
	require.NoError(t, s.Close())
	s = startBroker(t, dir)
	cl = newClient(t, s)
	checkCommitted(ctx, t, cl, "simple")
	require.Equal(t, map[int32]committedOffset{1: moved}, fetchCommitted(ctx, t, cl, "other", nil))
}

// TestOffsetFetchVersions: OffsetFetch in the single-group form (v1-v7)
// and the batched one (v8+) give the same answers, on the wire: v7 from a
// kgo client capped at it, v1 (no leader epoch in the answer) and v5 by
// the handler, re-encoded and decoded as the client reads them.
func TestOffsetFetchVersions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)
	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, cl, commitRequest("g", -1, testCommits)))

	capped := kversion.Stable()
	capped.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 7)
	cl7 := newClient(t, s, kgo.MaxVersions(capped))
	for _, c := range []struct {
		version int16
		all     bool
	}{{1, false}, {5, false}, {5, true}, {7, false}, {7, true}} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = c.version, "g"
		if !c.all {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = testTopic, allPartitions
			req.Topics = append(req.Topics, rt)
		}
		var resp *kmsg.OffsetFetchResponse
		if c.version == 7 {
			var err error
			resp, err = req.RequestWith(ctx, cl7)
			require.NoError(t, err)
			require.Equal(t, int16(7), resp.Version)
		} else {
			resp = roundTrip(t, s.offsetFetch(req))
		}
		require.Zero(t, resp.ErrorCode)
		require.Len(t, resp.Topics, 1, "v%d", c.version)
		require.Equal(t, testTopic, resp.Topics[0].Topic)
		got := map[int32]committedOffset{}
		for _, p := range resp.Topics[0].Partitions {
			require.Zero(t, p.ErrorCode)
			got[p.Partition] = committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: *p.Metadata}
		}
		want := testCommits
		if c.version < 5 { // no leader epoch in the answer: read as -1
			want = map[int32]committedOffset{}
			for p, tc := range testCommits {
				tc.leaderEpoch = -1
				want[p] = tc
			}
		}
		require.Equal(t, want, got, "v%d all=%v", c.version, c.all)
	}
}

// roundTrip encodes resp and decodes it at its version, as a client
// reads it.
func roundTrip(t *testing.T, resp *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
	t.Helper()
	out := kmsg.NewPtrOffsetFetchResponse()
	out.Version = resp.Version
	require.NoError(t, out.ReadFrom(resp.AppendTo(nil)))
	return out
}

// TestOffsetCommitRefusals: what a commit is answered when it is not a
// simple group's, or names what does not exist, as Kafka's
// OffsetMetadataManager.validateOffsetCommit answers a group with no
// members; nothing refused is stored.
func TestOffsetCommitRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)
	capped := kversion.Stable()
	capped.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 8)
	cl8 := newClient(t, s, kgo.MaxVersions(capped))
	one := map[int32]committedOffset{0: {offset: 5, leaderEpoch: 0}}
	all := func(code int16) map[int32]int16 { return map[int32]int16{0: code} }

	// A group that does not exist, in a generation: from v9
	// GROUP_ID_NOT_FOUND, before ILLEGAL_GENERATION.
	require.Equal(t, all(kerr.GroupIDNotFound.Code), commit(ctx, t, cl, commitRequest("joined", 3, one)))
	require.Equal(t, all(kerr.IllegalGeneration.Code), commit(ctx, t, cl8, commitRequest("joined", 3, one)))
	// A simple group exists once it commits; a generation is then an
	// unknown member (no member ever joins here), whatever the version.
	require.Equal(t, all(0), commit(ctx, t, cl, commitRequest("simple", -1, one)))
	for _, r := range []kmsg.Requestor{cl, cl8} {
		req := commitRequest("simple", 1, map[int32]committedOffset{0: {offset: 99, leaderEpoch: 0}})
		req.MemberID = "m-1"
		require.Equal(t, all(kerr.UnknownMemberID.Code), commit(ctx, t, r, req))
	}
	// Generation -1 with a member id is still a simple commit (Kafka
	// checks no member when the generation is negative and the group
	// empty).
	req := commitRequest("simple", -1, map[int32]committedOffset{1: {offset: 4, leaderEpoch: 0}})
	req.MemberID = "m-2"
	require.Equal(t, map[int32]int16{1: 0}, commit(ctx, t, cl, req))

	// Per partition: a partition that does not exist, an unknown topic,
	// metadata above offset.metadata.max.bytes; the good partition of
	// the same request is stored.
	req = commitRequest("simple", -1, map[int32]committedOffset{2: {offset: 6, leaderEpoch: 0}})
	big := kmsg.NewOffsetCommitRequestTopicPartition()
	big.Partition, big.Offset, big.Metadata = 0, 50, kmsg.StringPtr(strings.Repeat("x", maxOffsetMetadataBytes+1))
	missing := kmsg.NewOffsetCommitRequestTopicPartition()
	missing.Partition, missing.Offset = testPartitions, 1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, big, missing)
	unknown := kmsg.NewOffsetCommitRequestTopic()
	unknown.Topic, unknown.Partitions = "no-such-topic", []kmsg.OffsetCommitRequestTopicPartition{missing}
	req.Topics = append(req.Topics, unknown)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 2)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	require.Equal(t, map[string]int16{
		testTopic + "-2":  0,
		testTopic + "-0":  kerr.OffsetMetadataTooLarge.Code,
		testTopic + "-3":  kerr.UnknownTopicOrPartition.Code,
		"no-such-topic-3": kerr.UnknownTopicOrPartition.Code,
	}, codes)

	none := committedOffset{offset: -1, leaderEpoch: -1}
	require.Equal(t, map[int32]committedOffset{0: none}, fetchCommitted(ctx, t, cl, "joined", []int32{0}))
	require.Equal(t, map[int32]committedOffset{
		0: {offset: 5, leaderEpoch: 0},
		1: {offset: 4, leaderEpoch: 0},
		2: {offset: 6, leaderEpoch: 0},
	}, fetchCommitted(ctx, t, cl, "simple", nil))
}

// TestCommitRefusal is commitRefusal's table.
func TestCommitRefusal(t *testing.T) {
	for _, c := range []struct {
		exists     bool
		generation int32
		version    int16
		want       int16
	}{
		{false, -1, 9, 0},
		{true, -1, 2, 0},
		{false, 0, 9, kerr.GroupIDNotFound.Code},
		{false, 0, 8, kerr.IllegalGeneration.Code},
		{false, 5, 2, kerr.IllegalGeneration.Code},
		{true, 0, 9, kerr.UnknownMemberID.Code},
		{true, 5, 2, kerr.UnknownMemberID.Code},
	} {
		require.Equal(t, c.want, commitRefusal(c.exists, c.generation, c.version), "%+v", c)
	}
}

// TestOffsetCommitSurvivesCrash: the broker's files are on a crashable
// in-memory FS; after commits are acknowledged, a crash clone keeps only
// what was fsynced (a crash of the machine, the broker never closed),
// and a broker started on the clone answers the committed offsets.
func TestOffsetCommitSurvivesCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir() // the producer id block; the logs and offsets are in mem
	mem := vfs.NewCrashableMem()
	start := func(fs vfs.FS) *Server {
		s, err := Start(Options{Addr: "127.0.0.1:0", Dir: dir, FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s := start(mem)
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)
	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, cl, commitRequest("simple", -1, testCommits)))

	crashed := start(mem.CrashClone(vfs.CrashCloneCfg{}))
	checkCommitted(ctx, t, newClient(t, crashed), "simple")
}

// TestKillAfterOffsetCommit: a broker process is killed with SIGKILL
// after acknowledging commits and restarted on its directory; the
// commits are answered.
func TestKillAfterOffsetCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, addr := t.TempDir(), freeLoopbackAddr(t)
	child := startChild(ctx, t, addr, dir)
	cl := newClientAt(t, addr)
	createTopic(ctx, t, cl, testTopic)
	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, cl, commitRequest("simple", -1, testCommits)))
	child.kill(t, false)
	startChild(ctx, t, addr, dir)
	checkCommitted(ctx, t, newClientAt(t, addr), "simple")
}

// TestOffsetsFileDamage: a committed-offsets file that does not decode,
// or that holds another group than its name says, fails the start with
// errDamagedOffsets; a temporary file a crashed write left is removed.
func TestOffsetsFileDamage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startBroker(t, dir)
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)
	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, cl, commitRequest("simple", -1, testCommits)))
	cl.Close()
	require.NoError(t, s.Close())

	offsetsDir := filepath.Join(dir, offsetsDirName)
	path := filepath.Join(offsetsDir, offsetsFileName("simple"))
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	tmp := filepath.Join(offsetsDir, offsetsFileName("crashed")+".tmp")
	require.NoError(t, os.WriteFile(tmp, good[:10], 0o644))
	s = startBroker(t, dir)
	require.NoError(t, s.Close())
	_, err = os.Stat(tmp)
	require.ErrorIs(t, err, os.ErrNotExist, "the leftover temporary file is removed")

	start := func() error {
		s, err := Start(Options{Addr: "127.0.0.1:0", Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			_ = s.Close()
		}
		return err
	}
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)/2] ^= 1
	require.NoError(t, os.WriteFile(path, damaged, 0o644))
	err = start()
	require.ErrorIs(t, err, errDamagedOffsets)
	require.ErrorContains(t, err, path)

	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(filepath.Join(offsetsDir, offsetsFileName("another")), good, 0o644))
	require.ErrorIs(t, start(), errDamagedOffsets)
}

// FuzzDecodeGroupOffsets: the decoder never panics, and what it accepts
// encodes to bytes it decodes to the same offsets.
func FuzzDecodeGroupOffsets(f *testing.F) {
	f.Add(encodeGroupOffsets(nil, "simple", map[topicPartition]committedOffset{
		{testTopic, 0}: testCommits[0], {testTopic, 1}: testCommits[1], {"t", 9}: testCommits[2],
	}))
	f.Add(encodeGroupOffsets(nil, "", nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given, and with the checksum made to match so that the
		// fields behind it are fuzzed too.
		fixed := append([]byte(nil), data...)
		if len(fixed) >= 4 {
			fixed = binary.BigEndian.AppendUint32(fixed[:len(fixed)-4], crc32.Checksum(fixed[:len(fixed)-4], crc32c))
		}
		for _, b := range [][]byte{data, fixed} {
			id, committed, err := decodeGroupOffsets(b)
			if err != nil {
				continue
			}
			id2, committed2, err := decodeGroupOffsets(encodeGroupOffsets(nil, id, committed))
			require.NoError(t, err)
			require.Equal(t, id, id2)
			require.Equal(t, committed, committed2)
		}
	})
}

// TestKafkaGoOffsets: segmentio/kafka-go commits as a simple group
// (OffsetCommit v7, whose leader epoch kafka-go always sends as 0, its
// zero value) and reads the offsets back (OffsetFetch v5); kgo reads the
// same.
func TestKafkaGoOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	createTopic(ctx, t, newClient(t, s), testTopic)
	kc := &kafkago.Client{Addr: s.Addr(), Timeout: 10 * time.Second}

	cresp, err := kc.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{
		GroupID:      "kafka-go",
		GenerationID: -1,
		Topics: map[string][]kafkago.OffsetCommit{testTopic: {
			{Partition: 0, Offset: 11, Metadata: "a"},
			{Partition: 2, Offset: 4},
		}},
	})
	require.NoError(t, err)
	require.Len(t, cresp.Topics[testTopic], 2)
	for _, p := range cresp.Topics[testTopic] {
		require.NoError(t, p.Error, "partition %d", p.Partition)
	}

	fresp, err := kc.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: "kafka-go", Topics: map[string][]int{testTopic: {0, 1, 2}}})
	require.NoError(t, err)
	require.NoError(t, fresp.Error)
	got := map[int]int64{}
	for _, p := range fresp.Topics[testTopic] {
		require.NoError(t, p.Error)
		got[p.Partition] = p.CommittedOffset
	}
	require.Equal(t, map[int]int64{0: 11, 1: -1, 2: 4}, got)
	require.Equal(t, map[int32]committedOffset{
		0: {offset: 11, leaderEpoch: 0, metadata: "a"},
		2: {offset: 4, leaderEpoch: 0},
	}, fetchCommitted(ctx, t, newClient(t, s), "kafka-go", nil))
}

// TestOffsetCommitWriteFailure: a commit whose file cannot be written is
// answered NOT_COORDINATOR (as Kafka answers a failed append to
// __consumer_offsets) and changes nothing; the next commit, once the
// disk works, is stored.
func TestOffsetCommitWriteFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	var armed atomic.Bool
	prefix := filepath.Join(dir, offsetsDirName) + "/"
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, prefix) {
			return errorfs.ErrInjected
		}
		return nil
	}))
	s, err := Start(Options{Addr: "127.0.0.1:0", Dir: dir, FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	require.Equal(t, map[int32]int16{0: 0, 1: 0, 2: 0}, commit(ctx, t, b, commitRequest("simple", -1, testCommits)))

	armed.Store(true)
	moved := map[int32]committedOffset{0: {offset: 70, leaderEpoch: 0}, 1: {offset: 30, leaderEpoch: 0}}
	req := commitRequest("simple", -1, moved)
	missing := kmsg.NewOffsetCommitRequestTopicPartition()
	missing.Partition = testPartitions
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, missing)
	require.Equal(t, map[int32]int16{0: kerr.NotCoordinator.Code, 1: kerr.NotCoordinator.Code, testPartitions: kerr.UnknownTopicOrPartition.Code}, commit(ctx, t, b, req))
	checkCommitted(ctx, t, b, "simple")

	armed.Store(false)
	require.Equal(t, map[int32]int16{0: 0, 1: 0}, commit(ctx, t, b, commitRequest("simple", -1, moved)))
	require.Equal(t, map[int32]committedOffset{0: moved[0], 1: moved[1], 2: testCommits[2]}, fetchCommitted(ctx, t, b, "simple", nil))
}
