package remote

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tierlog/tierlog/remote/objstore"
)

// Object keys of the data plane. Every object of one copy attempt lives
// under one directory-like prefix derived from the SegmentMetadata alone:
//
//	<KeyPrefix><topic>-<topic id>/<partition>/<start offset>-<segment id>/<object>
//
//	orders.v2-AAAAAAAAAAAAAAAAAAAAAQ/3/00000000000000001200-Zz1_K0bS6x4xnG2n8vVd3w/manifest
//	                                                                            /indexes
//	                                                                            /data-000000
//
// The topic id and the segment id are Kafka's 22-character URL-safe base64
// UUIDs, the start offset is 20 zero-padded digits (so keys sort by start
// offset within a partition), the partition is decimal. Topic names are
// restricted to Kafka's legal characters [a-zA-Z0-9._-] (no '/'), so the
// first key segment parses back from its end: the last 22 characters are
// the topic id, preceded by '-', and the rest is the topic. Because the
// metadata record (COPY_SEGMENT_STARTED, committed before any upload) holds
// the topic, partition, segment id and start offset, it is the record of
// every key a copy can write: no listing is needed to find the objects of a
// known segment.
const (
	manifestObject   = "manifest"
	indexesObject    = "indexes"
	dataObjectPrefix = "data-"

	uuidTextLen     = 22 // base64url of 16 bytes, no padding
	offsetDigits    = 20
	dataIndexDigits = 6
)

// segmentKeys names the objects of one copy attempt.
type segmentKeys struct {
	dir   string // ends in '/'
	data0 string // data(0), made once: every fetch of a segment reads it
}

func (k segmentKeys) manifest() string { return k.dir + manifestObject }
func (k segmentKeys) indexes() string  { return k.dir + indexesObject }

// data returns the key of the i-th data object.
func (k segmentKeys) data(i int) string {
	if i == 0 && k.data0 != "" {
		return k.data0
	}
	return k.dataKey(i)
}

func (k segmentKeys) dataKey(i int) string {
	b := make([]byte, 0, len(k.dir)+len(dataObjectPrefix)+dataIndexDigits)
	b = append(append(b, k.dir...), dataObjectPrefix...)
	return string(appendPadded(b, int64(i), dataIndexDigits))
}

// validateTopicName applies Kafka's topic name rule (Topic.validate):
// 1 to 249 characters of [a-zA-Z0-9._-], and not "." or "..". The key
// layout needs it: such a name holds no '/' and is never a "." or ".."
// key segment.
func validateTopicName(topic string) error {
	bad := func(reason string) error {
		return fmt.Errorf("%w: remote: topic name %q %s", ErrInvalidArgument, topic, reason)
	}
	if len(topic) == 0 || len(topic) > MaxTopicNameLen {
		return bad(fmt.Sprintf("has %d bytes (want 1 to %d)", len(topic), MaxTopicNameLen))
	}
	if topic == "." || topic == ".." {
		return bad("is not allowed")
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return bad("holds a character outside [a-zA-Z0-9._-]")
		}
	}
	return nil
}

func validatePartitionForKeys(tp TopicIDPartition) error {
	if err := validateTopicName(tp.Topic); err != nil {
		return err
	}
	if tp.Partition < 0 {
		return fmt.Errorf("%w: remote: partition %s: negative partition", ErrInvalidArgument, tp)
	}
	return nil
}

// partitionPrefix returns the prefix under which every object of tp lives.
func (s *StorageManager) partitionPrefix(tp TopicIDPartition) string {
	var b strings.Builder
	b.Grow(len(s.opts.KeyPrefix) + len(tp.Topic) + 1 + uuidTextLen + 12)
	b.WriteString(s.opts.KeyPrefix)
	b.WriteString(tp.Topic)
	b.WriteByte('-')
	b.WriteString(tp.TopicID.String())
	b.WriteByte('/')
	b.WriteString(strconv.FormatInt(int64(tp.Partition), 10))
	b.WriteByte('/')
	return b.String()
}

// keysFor returns the keys of m's copy attempt. It checks only what the
// layout needs (topic name, partition, start offset), not the whole
// metadata, so that a segment with odd metadata can still be deleted.
func (s *StorageManager) keysFor(m *SegmentMetadata) (segmentKeys, error) {
	if m == nil {
		return segmentKeys{}, fmt.Errorf("%w: remote: nil segment metadata", ErrInvalidArgument)
	}
	if err := validatePartitionForKeys(m.SegmentID.TopicIDPartition); err != nil {
		return segmentKeys{}, err
	}
	if m.StartOffset < 0 {
		return segmentKeys{}, fmt.Errorf("%w: remote: segment %s: start offset %d < 0",
			ErrInvalidArgument, m.SegmentID, m.StartOffset)
	}
	b := []byte(s.partitionPrefix(m.SegmentID.TopicIDPartition))
	b = append(appendPadded(b, m.StartOffset, offsetDigits), '-')
	b = append(append(b, m.SegmentID.ID.String()...), '/')
	k := segmentKeys{dir: string(b)}
	k.data0 = k.dataKey(0)
	return k, nil
}

// appendPadded appends v >= 0 in decimal, left-padded with zeros to
// digits (what %0*d prints; a longer number is not cut).
func appendPadded(b []byte, v int64, digits int) []byte {
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], v, 10)
	for range digits - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// SegmentPrefix returns the key prefix (ending in '/') under which every
// object of m's copy attempt lives. For tools and tests; see the layout at
// the top of storage_keys.go.
func (s *StorageManager) SegmentPrefix(m *SegmentMetadata) (string, error) {
	k, err := s.keysFor(m)
	return k.dir, err
}

// ParseObjectKey parses a key written by this StorageManager (its
// KeyPrefix included) back into the segment id, the segment's start offset
// and the object's name inside the segment ("manifest", "indexes",
// "data-000000"). Keys of other layouts fail with ErrInvalidArgument.
func (s *StorageManager) ParseObjectKey(key string) (id SegmentID, startOffset int64, object string, err error) {
	bad := func(reason string) (SegmentID, int64, string, error) {
		return SegmentID{}, 0, "", fmt.Errorf("%w: remote: key %q: %s", ErrInvalidArgument, key, reason)
	}
	rest, ok := strings.CutPrefix(key, s.opts.KeyPrefix)
	if !ok {
		return bad("not under the key prefix")
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return bad("want <topic>-<topic id>/<partition>/<segment>/<object>")
	}
	first := parts[0]
	if len(first) < uuidTextLen+2 || first[len(first)-uuidTextLen-1] != '-' {
		return bad("first segment is not <topic>-<topic id>")
	}
	topic := first[:len(first)-uuidTextLen-1]
	topicID, ok := parseCanonicalUUID(first[len(first)-uuidTextLen:])
	if !ok {
		return bad("bad topic id")
	}
	if validateTopicName(topic) != nil {
		return bad("bad topic name")
	}
	p, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != parts[1] {
		return bad("bad partition")
	}
	tp := TopicIDPartition{TopicID: topicID, Topic: topic, Partition: int32(p)}
	segID, start, object, ok := parseSegmentObject(parts[2])
	if !ok {
		return bad("bad <start offset>-<segment id>/<object>")
	}
	return SegmentID{TopicIDPartition: tp, ID: segID}, start, object, nil
}

// parseSegmentObject parses "<20-digit start offset>-<segment id>/<object>",
// the part of a key below the partition prefix.
func parseSegmentObject(s string) (id UUID, startOffset int64, object string, ok bool) {
	const dirLen = offsetDigits + 1 + uuidTextLen
	if len(s) < dirLen+2 || s[offsetDigits] != '-' || s[dirLen] != '/' {
		return UUID{}, 0, "", false
	}
	for i := range offsetDigits {
		if s[i] < '0' || s[i] > '9' {
			return UUID{}, 0, "", false
		}
	}
	start, err := strconv.ParseInt(s[:offsetDigits], 10, 64)
	if err != nil {
		return UUID{}, 0, "", false
	}
	id, ok = parseCanonicalUUID(s[offsetDigits+1 : dirLen])
	if !ok {
		return UUID{}, 0, "", false
	}
	object = s[dirLen+1:]
	if object == "" || strings.Contains(object, "/") {
		return UUID{}, 0, "", false
	}
	return id, start, object, true
}

// validateKeyPrefix checks StorageOptions.KeyPrefix: a valid list prefix
// that also makes valid keys (no "//", no "." or ".." segment).
func validateKeyPrefix(prefix string) error {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("%w: remote: key prefix: %w", ErrInvalidArgument, err)
	}
	if prefix == "" {
		return nil
	}
	if err := objstore.ValidateKey(prefix + "t"); err != nil {
		return fmt.Errorf("%w: remote: key prefix %q does not make valid keys: %w", ErrInvalidArgument, prefix, err)
	}
	return nil
}

// parseCanonicalUUID parses the String form of a UUID and accepts only
// that exact form: base64 decoding ignores the unused low bits of the last
// character, and two texts must never name one segment.
func parseCanonicalUUID(s string) (UUID, bool) {
	u, err := ParseUUID(s)
	if err != nil || u.String() != s {
		return UUID{}, false
	}
	return u, true
}
