package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// RecreateTopic deletes the partition's topic and creates it again under
// the same name (kafka-topics.sh --delete, then --create): the new topic
// has a new topic id (KIP-516), so it is another partition to every
// component keyed by topic id (the remote metadata, the replica drivers,
// the WAL), and the same log directory name, "<topic>-<partition>", on
// every broker's disk, which the log manager's checkpoints key by name.
//
// The deletion, as KRaft applies it: every running broker's driver takes
// a removal delta (replica.TopicDeleted: its fetchers stop, the remote
// log manager forgets the partition, the broker that led it deletes its
// remote log (KIP-405: the segments and their metadata), and the log
// manager deletes the current and future logs: logmanager.Manager.Delete).
// A broker that is down keeps its log until it comes back, when it finds
// a log whose topic id the metadata no longer has and deletes it as a
// stray (deleteStrayLogs; Kafka's KRaft brokers do so for the logs of a
// deleted topic found at startup); so does a running broker whose
// removal failed to delete its log.
//
// The creation: the controller's record starts over (leader epoch and
// partition epoch 0, no switch state), with the same replicas; the ISR
// is every running replica and the leader the first of them
// (ReplicationControlManager.createTopic), and every running broker
// creates an empty log. The checker's model starts over too: nothing is
// committed, the producers are new (the old ones' unacknowledged batches
// failed with the topic), and no broker holds producer marks.
//
// Only in the classic phase, with no WAL row: the switch and diskless
// state (tierstate, the WAL's control plane) of a deleted topic is not
// modelled. Not applicable while every broker is down (createTopic
// refuses a partition whose replicas are all fenced).
func (c *Cluster) RecreateTopic() error {
	return c.do("recreate-topic", -1, func() (string, error) {
		if st := c.ctrl.rec.State; st.Phase() != tierstate.PhaseClassic {
			return "", notApplicable("the partition is not classic (%s)", st)
		}
		if _, _, ok := c.WAL(); ok {
			return "", notApplicable("the WAL has a row for the partition")
		}
		var live []int32
		for _, id := range c.ctrl.replicas {
			if c.running(id) {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			return "", notApplicable("every replica's broker is down")
		}
		old := c.tp
		var errs []error
		var notes []string
		for _, b := range c.brokers {
			if !b.up {
				continue
			}
			d := c.ctrl.delta(b.ID)
			d.Removal = replica.TopicDeleted
			plan, err := b.driver.Apply(c.ctx, d)
			notes = append(notes, fmt.Sprintf("b%d:%s", b.ID, planSummary(plan)))
			if err != nil {
				notes = append(notes, fmt.Sprintf("(b%d error: %v)", b.ID, err))
				errs = append(errs, fmt.Errorf("broker %d: delete %s: %w", b.ID, old, err))
			}
		}
		c.trace.detail("topic %s deleted: %s", old, strings.Join(notes, " "))
		c.topics = append(c.topics, old)
		c.tp.TopicID = nextTopicID(old.TopicID)

		c.ctrl.recreate(live)
		c.model = model{}
		c.model.init()
		c.prod = producerState{}
		for _, b := range c.brokers {
			b.prodMarks = nil
			b.stateFrom, b.futureStateFrom = 0, 0
			b.moveTruncateTo, b.moveResumed = -1, false
			if !b.up {
				continue
			}
			b.task = nil
			b.classic, b.consolidating, b.sw, b.gate, b.gateFor = nil, false, nil, nil, nil
			// A log the removal failed to delete is a stray now.
			if err := c.deleteStrayLogs(b.logs); err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", b.ID, err))
			}
			// The old driver is the deleted topic's; the new topic is a
			// partition new to the broker (no log: the first delta
			// creates it).
			if err := b.newDriver(nil); err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", b.ID, err))
			}
		}
		errs = append(errs, c.publish("topic created"))
		return fmt.Sprintf("topic id %s -> %s; leader=%d isr=%v", old.TopicID, c.tp.TopicID, c.ctrl.rec.Leader, c.ctrl.rec.ISR),
			errors.Join(errs...)
	})
}

// nextTopicID is a new topic id after id (deterministic: a seed's runs
// give the topics the same ids).
func nextTopicID(id remote.UUID) remote.UUID {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i]++; id[i] != 0 {
			break
		}
	}
	return id
}

// recreate is the controller's record of a new topic: the same replicas,
// the running ones (live) in the ISR, the first of them leading, leader
// and partition epochs 0, no ELR and no switch state.
func (k *controller) recreate(live []int32) {
	k.rec = partRecord{Leader: live[0], ISR: slices.Clone(live)}
	k.fetched = map[int32]int64{}
}

// deleteStrayLogs deletes the logs of the partition's name on m that are
// not the partition's now (a deleted topic's, found at a restart, or left
// by a removal that failed): Kafka's KRaft broker deletes such stray logs
// once it has the metadata (LogManager.isStrayKraftReplica): a log whose
// topic id the metadata does not have, and a log without a topic id,
// which Kafka takes for a log created just before a crash, before its
// partition.metadata and so before any record. Here the second rule
// applies only once a topic was deleted: the simulation's driver is given
// the log a restart finds and never stores a missing topic id (Kafka's
// first delta would, in getOrCreateLog), so before any deletion a log
// without one may hold the partition's records (a crash between a log's
// creation and its partition.metadata); no log is a stray then, and the
// seeds' file operations stay as they were. Once a topic was deleted
// every log without a topic id is a stray: one created before the
// deletion is the deleted topic's, one created after it is empty (the
// crash came before its partition.metadata, and the deletion of the
// stray at the restart lets the driver create it again with its id).
func (c *Cluster) deleteStrayLogs(m *logmanager.Manager) error {
	if len(c.topics) == 0 {
		return nil
	}
	var errs []error
	for _, p := range m.Partitions() {
		stored := p.Partition
		if stored.Topic != c.tp.Topic || stored.Partition != c.tp.Partition || stored.TopicID == c.tp.TopicID {
			continue
		}
		if p.Future {
			errs = append(errs, m.DeleteFuture(stored))
		} else if err := m.Delete(stored); !errors.Is(err, logmanager.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
