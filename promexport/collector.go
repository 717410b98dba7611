package promexport

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// Errors returned by the Collector's Add methods. Test for them with
// errors.Is.
var (
	// ErrDuplicate means a source is already registered under the same
	// labels: two sources would export the same series.
	ErrDuplicate = errors.New("promexport: source already registered")
	// ErrInvalidArgument means a nil source or an empty name.
	ErrInvalidArgument = errors.New("promexport: invalid argument")
)

// LogSource is what the Collector reads of a partition's log.
// *log.UnifiedLog satisfies it.
type LogSource interface{ Metrics() log.Metrics }

// RemoteSource is what the Collector reads of a remote log manager.
// *remote.Manager satisfies it.
type RemoteSource interface{ Metrics() remote.ManagerMetrics }

// RebuildSource is what the Collector reads of a fetcher's rebuild
// machine. *tierstate.Machine satisfies it.
type RebuildSource interface {
	Metrics() tierstate.MachineMetrics
}

// WALWriterSource is what the Collector reads of a WAL writer.
// *wal.Writer satisfies it.
type WALWriterSource interface{ Metrics() wal.WriterMetrics }

// WALReaderSource is what the Collector reads of a WAL reader.
// *wal.Reader satisfies it.
type WALReaderSource interface{ Metrics() wal.ReaderMetrics }

// WALCacheSource is what the Collector reads of a WAL object cache.
// *wal.ObjectCache satisfies it.
type WALCacheSource interface{ Metrics() wal.CacheMetrics }

// WALCleanerSource is what the Collector reads of a WAL file cleaner.
// *wal.Cleaner satisfies it.
type WALCleanerSource interface{ Metrics() wal.CleanerMetrics }

// WALControlPlaneSource is what the Collector reads of a PostgreSQL WAL
// control plane. *pgcp.ControlPlane satisfies it.
type WALControlPlaneSource interface{ Metrics() pgcp.Metrics }

var (
	_ WALControlPlaneSource = (*pgcp.ControlPlane)(nil)
	_ LogSource             = (*log.UnifiedLog)(nil)
	_ RemoteSource          = (*remote.Manager)(nil)
	_ RebuildSource         = (*tierstate.Machine)(nil)
	_ WALWriterSource       = (*wal.Writer)(nil)
	_ WALReaderSource       = (*wal.Reader)(nil)
	_ WALCacheSource        = (*wal.ObjectCache)(nil)
	_ WALCleanerSource      = (*wal.Cleaner)(nil)
)

type partitionKey struct {
	topic     string
	partition int32
}

// Collector is a prometheus.Collector over registered sources. Every
// scrape reads each source's snapshot once and emits its values as
// constant metrics, so the core packages keep no Prometheus state.
//
// Concurrency: safe for concurrent use. Add and Remove may run during a
// scrape; a scrape sees the sources registered when it began. The
// sources' Metrics methods run without the Collector's mutex held.
type Collector struct {
	mu struct {
		sync.Mutex
		logs        map[partitionKey]LogSource
		remote      RemoteSource // nil: none
		machines    map[string]RebuildSource
		walWriters  map[string]WALWriterSource
		walReaders  map[string]WALReaderSource
		walCaches   map[string]WALCacheSource
		walCleaners map[string]WALCleanerSource
		walPG       map[string]WALControlPlaneSource
	}
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector without sources.
func NewCollector() *Collector {
	c := &Collector{}
	c.mu.logs = map[partitionKey]LogSource{}
	c.mu.machines = map[string]RebuildSource{}
	c.mu.walWriters = map[string]WALWriterSource{}
	c.mu.walReaders = map[string]WALReaderSource{}
	c.mu.walCaches = map[string]WALCacheSource{}
	c.mu.walCleaners = map[string]WALCleanerSource{}
	c.mu.walPG = map[string]WALControlPlaneSource{}
	return c
}

// AddLog registers the log of topic-partition. Remove it (RemoveLog)
// before closing the log: a closed log reports a zero snapshot.
func (c *Collector) AddLog(topic string, partition int32, src LogSource) error {
	if topic == "" || partition < 0 || isNil(src) {
		return fmt.Errorf("%w: log %q-%d", ErrInvalidArgument, topic, partition)
	}
	k := partitionKey{topic, partition}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.logs[k]; ok {
		return fmt.Errorf("%w: log %s-%d", ErrDuplicate, topic, partition)
	}
	c.mu.logs[k] = src
	return nil
}

// RemoveLog unregisters the log of topic-partition, if registered.
func (c *Collector) RemoveLog(topic string, partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.logs, partitionKey{topic, partition})
}

// SetRemote registers the remote log manager, replacing any earlier
// one; nil unregisters it. A broker runs one (Kafka's RemoteLogManager):
// its broker-wide counters carry no label to tell two apart.
func (c *Collector) SetRemote(src RemoteSource) {
	if isNil(src) {
		src = nil // a typed nil in the interface would panic at a scrape
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.remote = src
}

// AddMachine registers the rebuild machine of fetcher; its metrics carry
// the label fetcher=<fetcher>.
func (c *Collector) AddMachine(fetcher string, src RebuildSource) error {
	return addNamed(c, c.mu.machines, "rebuild machine", fetcher, src)
}

// RemoveMachine unregisters the rebuild machine of fetcher, if registered.
func (c *Collector) RemoveMachine(fetcher string) { removeNamed(c, c.mu.machines, fetcher) }

// AddWALWriter registers a WAL writer; its metrics carry the label
// writer=<name>.
func (c *Collector) AddWALWriter(name string, src WALWriterSource) error {
	return addNamed(c, c.mu.walWriters, "WAL writer", name, src)
}

// RemoveWALWriter unregisters the WAL writer name, if registered.
func (c *Collector) RemoveWALWriter(name string) { removeNamed(c, c.mu.walWriters, name) }

// AddWALReader registers a WAL reader; its metrics carry the label
// reader=<name>.
func (c *Collector) AddWALReader(name string, src WALReaderSource) error {
	return addNamed(c, c.mu.walReaders, "WAL reader", name, src)
}

// RemoveWALReader unregisters the WAL reader name, if registered.
func (c *Collector) RemoveWALReader(name string) { removeNamed(c, c.mu.walReaders, name) }

// AddWALCache registers a WAL object cache; its metrics carry the label
// cache=<name>.
func (c *Collector) AddWALCache(name string, src WALCacheSource) error {
	return addNamed(c, c.mu.walCaches, "WAL object cache", name, src)
}

// RemoveWALCache unregisters the WAL object cache name, if registered.
func (c *Collector) RemoveWALCache(name string) { removeNamed(c, c.mu.walCaches, name) }

// AddWALCleaner registers a WAL file cleaner; its metrics carry the label
// cleaner=<name>.
func (c *Collector) AddWALCleaner(name string, src WALCleanerSource) error {
	return addNamed(c, c.mu.walCleaners, "WAL cleaner", name, src)
}

// RemoveWALCleaner unregisters the WAL cleaner name, if registered.
func (c *Collector) RemoveWALCleaner(name string) { removeNamed(c, c.mu.walCleaners, name) }

// AddWALControlPlane registers a PostgreSQL WAL control plane; its
// metrics carry the label control_plane=name.
func (c *Collector) AddWALControlPlane(name string, src WALControlPlaneSource) error {
	return addNamed(c, c.mu.walPG, "WAL control plane", name, src)
}

// RemoveWALControlPlane unregisters the control plane name, if registered.
func (c *Collector) RemoveWALControlPlane(name string) { removeNamed(c, c.mu.walPG, name) }

func addNamed[S any](c *Collector, m map[string]S, what, name string, src S) error {
	if name == "" || isNil(src) {
		return fmt.Errorf("%w: %s %q", ErrInvalidArgument, what, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := m[name]; ok {
		return fmt.Errorf("%w: %s %q", ErrDuplicate, what, name)
	}
	m[name] = src
	return nil
}

func removeNamed[S any](c *Collector, m map[string]S, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(m, name)
}

// Describe sends the descriptors of every metric the Collector can emit;
// the set is fixed, whatever the sources, so registries check it.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	logTable.describe(ch)
	remoteTable.describe(ch)
	remotePartitionTable.describe(ch)
	rebuildTable.describe(ch)
	walWriterTable.describe(ch)
	walReaderTable.describe(ch)
	walCacheTable.describe(ch)
	walCleanerTable.describe(ch)
	walPGTable.describe(ch)
}

// Collect reads every registered source's snapshot and emits it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	logs, mgr, machines, w := c.sources()
	for _, l := range logs {
		m := l.src.Metrics()
		logTable.collect(ch, &m, l.key.topic, strconv.Itoa(int(l.key.partition)))
	}
	if mgr != nil {
		m := mgr.Metrics()
		remoteTable.collect(ch, &m)
		for tp, pm := range m.Partitions {
			remotePartitionTable.collect(ch, &pm, tp.Topic, strconv.Itoa(int(tp.Partition)))
		}
	}
	for _, name := range sortedKeys(machines) {
		m := machines[name].Metrics()
		rebuildTable.collect(ch, &m, name)
	}
	collectNamed(ch, w.writers, walWriterTable)
	collectNamed(ch, w.readers, walReaderTable)
	collectNamed(ch, w.caches, walCacheTable)
	collectNamed(ch, w.cleaners, walCleanerTable)
	collectNamed(ch, w.pg, walPGTable)
}

// collectNamed emits each named source's snapshot, labelled by its name.
func collectNamed[M any, S interface{ Metrics() M }](ch chan<- prometheus.Metric, srcs map[string]S, t *table[M]) {
	for _, name := range sortedKeys(srcs) {
		m := srcs[name].Metrics()
		t.collect(ch, &m, name)
	}
}

// walSources are the WAL registrations copied for a scrape.
type walSources struct {
	writers  map[string]WALWriterSource
	readers  map[string]WALReaderSource
	caches   map[string]WALCacheSource
	cleaners map[string]WALCleanerSource
	pg       map[string]WALControlPlaneSource
}

type logEntry struct {
	key partitionKey
	src LogSource
}

// sources copies the registrations, so that the snapshots are read with
// the mutex released (a source's Metrics takes the source's own locks).
func (c *Collector) sources() ([]logEntry, RemoteSource, map[string]RebuildSource, walSources) {
	c.mu.Lock()
	defer c.mu.Unlock()
	logs := make([]logEntry, 0, len(c.mu.logs))
	for k, s := range c.mu.logs {
		logs = append(logs, logEntry{k, s})
	}
	w := walSources{writers: maps.Clone(c.mu.walWriters), readers: maps.Clone(c.mu.walReaders),
		caches: maps.Clone(c.mu.walCaches), cleaners: maps.Clone(c.mu.walCleaners), pg: maps.Clone(c.mu.walPG)}
	return logs, c.mu.remote, maps.Clone(c.mu.machines), w
}

// isNil reports whether src is nil or a nil pointer in an interface (a
// nil *log.UnifiedLog passed as a LogSource), which would panic at the
// scrape rather than here.
func isNil(src any) bool {
	if src == nil {
		return true
	}
	v := reflect.ValueOf(src)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func sortedKeys[S any](m map[string]S) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
