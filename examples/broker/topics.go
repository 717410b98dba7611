package main

import (
	"errors"
	"sort"
	"sync"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// topic is what the broker knows of a topic: the id generated when it was
// created (logmanager keeps it in each partition's partition.metadata) and
// its partition count.
type topic struct {
	id         remote.UUID
	partitions int32
}

// topics is the broker's topic table: a real broker's comes from the
// controller's metadata log; this one is rebuilt at start from the
// partitions the log manager found.
type topics struct {
	mgr      *logmanager.Manager
	defaultN int32

	mu struct {
		sync.Mutex
		byName map[string]topic
	}
}

// loadTopics rebuilds the table from the logs on disk. Library:
// logmanager.Manager.Partitions, whose topic ids come from each log's
// partition.metadata.
func loadTopics(mgr *logmanager.Manager, defaultN int32) *topics {
	t := &topics{mgr: mgr, defaultN: defaultN}
	t.mu.byName = map[string]topic{}
	for _, p := range mgr.Partitions() {
		if p.Future {
			continue
		}
		tp := p.Partition
		cur := t.mu.byName[tp.Topic]
		if cur.id == (remote.UUID{}) {
			cur.id = tp.TopicID
		}
		cur.partitions = max(cur.partitions, tp.Partition+1)
		t.mu.byName[tp.Topic] = cur
	}
	for name, cur := range t.mu.byName {
		if cur.id == (remote.UUID{}) { // written by a tool that gave no id
			cur.id = remote.NewUUID()
			t.mu.byName[name] = cur
		}
	}
	return t
}

func (t *topics) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.byName)
}

// get returns a topic; ok is false when it does not exist.
func (t *topics) get(name string) (topic, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp, ok := t.mu.byName[name]
	return tp, ok
}

// names returns every topic's name, sorted.
func (t *topics) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.mu.byName))
	for n := range t.mu.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// create creates a topic of n partitions (n <= 0: the default) with a new
// topic id, and its partitions' logs. existed is true when the topic was
// already there (nothing is changed). The topic is in the table before
// its logs are created: a log that failed to be created is created by the
// first request that needs it (partitionLog), with the same id.
func (t *topics) create(name string, n int32) (tp topic, existed bool, err error) {
	if n <= 0 {
		n = t.defaultN
	}
	t.mu.Lock()
	if cur, ok := t.mu.byName[name]; ok {
		t.mu.Unlock()
		return cur, true, nil
	}
	tp = topic{id: remote.NewUUID(), partitions: n}
	t.mu.byName[name] = tp
	t.mu.Unlock()
	for i := range n {
		if _, err := t.log(name, tp, i); err != nil {
			if i == 0 && errors.Is(err, logmanager.ErrInvalidArgument) {
				// A name the log manager refuses (Kafka's topic name
				// rules): the topic does not exist.
				t.mu.Lock()
				delete(t.mu.byName, name)
				t.mu.Unlock()
			}
			return tp, false, err
		}
	}
	return tp, false, nil
}

// log returns a partition's log, this broker its leader
// (assumeLeadership). Library: logmanager.Manager.GetOrCreate (a Get
// when the log exists; it checks the topic id against
// partition.metadata).
func (t *topics) log(name string, tp topic, partition int32) (*log.UnifiedLog, error) {
	l, err := t.mgr.GetOrCreate(remote.TopicIDPartition{TopicID: tp.id, Topic: name, Partition: partition}, "")
	if err != nil {
		return nil, err
	}
	return l, assumeLeadership(l)
}

// partitionLog returns the log of topic name's partition, or ok false when
// the topic or the partition does not exist (UNKNOWN_TOPIC_OR_PARTITION).
func (s *Server) partitionLog(name string, partition int32) (l *log.UnifiedLog, ok bool, err error) {
	tp, found := s.topics.get(name)
	if !found || partition < 0 || partition >= tp.partitions {
		return nil, false, nil
	}
	l, err = s.topics.log(name, tp, partition)
	if err == nil {
		s.maybeRegisterTiered(name, tp, partition, l)
	}
	return l, true, err
}
