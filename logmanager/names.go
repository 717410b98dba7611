package logmanager

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// Directory name suffixes, as Kafka's LocalLog names them: a partition's
// directory is "<topic>-<partition>"; one renamed for deletion, or holding
// the future log of a directory move, or left by a stray replica, is
// "<topic>-<partition>.<32 hex digits>-delete" ("-future", "-stray").
const (
	DeleteDirSuffix = "-delete"
	FutureDirSuffix = "-future"
	StrayDirSuffix  = "-stray"
)

// dirKind classifies one entry of a log directory.
type dirKind int

const (
	kindStray   dirKind = iota // not a partition directory: logged, left alone
	kindCurrent                // <topic>-<partition>
	kindFuture                 // <topic>-<partition>.<id>-future
	kindDelete                 // <topic>-<partition>.<id>-delete, or log.Delete's <dir>.<n>-<seq>.deleted
)

func (k dirKind) String() string {
	return [...]string{"stray", "current", "future", "delete"}[k]
}

// key identifies a partition by name, as Kafka's directory names do; the
// topic id lives in partition.metadata.
type key struct {
	topic     string
	partition int32
}

func keyOf(tp remote.TopicIDPartition) key { return key{tp.Topic, tp.Partition} }

func (k key) String() string { return k.topic + "-" + strconv.FormatInt(int64(k.partition), 10) }

// classify parses a directory entry's name. Pure.
func classify(name string) (dirKind, key) {
	if strings.HasSuffix(name, log.DeletedDirSuffix) {
		return kindDelete, key{}
	}
	kind := kindCurrent
	base := name
	for _, s := range []struct {
		suffix string
		kind   dirKind
	}{{DeleteDirSuffix, kindDelete}, {FutureDirSuffix, kindFuture}, {StrayDirSuffix, kindStray}} {
		if strings.HasSuffix(name, s.suffix) {
			dot := strings.LastIndexByte(name, '.')
			if dot < 0 {
				return kindStray, key{}
			}
			kind, base = s.kind, name[:dot]
			break
		}
	}
	k, ok := parsePartitionDir(base)
	switch {
	case kind == kindDelete:
		return kindDelete, k // removed whether or not the name parses
	case !ok || kind == kindStray:
		return kindStray, key{}
	}
	return kind, k
}

// parsePartitionDir parses "<topic>-<partition>" (Kafka's
// LocalLog.parseTopicPartitionName): the partition follows the last '-'.
func parsePartitionDir(name string) (key, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return key{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || name[i+1] == '+' {
		return key{}, false
	}
	topic := name[:i]
	if validTopic(topic) != "" {
		return key{}, false
	}
	return key{topic, int32(p)}, true
}

// validTopic returns why topic is not a legal Kafka topic name (Kafka's
// Topic.validate: 1 to 249 of [a-zA-Z0-9._-], not "." or ".."), or "".
func validTopic(topic string) string {
	if topic == "" || len(topic) > remote.MaxTopicNameLen {
		return "topic name of " + strconv.Itoa(len(topic)) + " bytes (want 1 to 249)"
	}
	if topic == "." || topic == ".." {
		return "topic name " + topic
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "illegal character " + strconv.QuoteRune(rune(c)) + " in topic name"
		}
	}
	return ""
}

// uniqueID is Kafka's UUID.randomUUID with the dashes removed.
func uniqueID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b[:])
}

// suffixedName is "<topic>-<partition>.<id><suffix>". Kafka cuts the topic
// so the name fits 255 bytes; a cut name still classifies as a deletion,
// which is all a -delete name is used for.
func suffixedName(k key, suffix string) string {
	s := "." + uniqueID() + suffix
	name := k.String()
	if suffix == DeleteDirSuffix && len(name)+len(s) > 255 {
		name = name[:255-len(s)]
	}
	return name + s
}
