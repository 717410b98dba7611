package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"sync"

	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// ErrInjected is the cause of every object-store fault the simulation
// injects.
var ErrInjected = errors.New("sim: injected object-store fault")

// faultStore is the shared object store: an objstore/mem store behind
// seeded, order-independent fault injection. mem's own faults are drawn
// from one source in the order calls reach it. Here a fault depends
// only on the seed, the operation, the object's class (manifest,
// indexes, data, WAL object) and how many calls of that class came
// before, so the same seed gives the same faults. The remote copy
// uploads a segment's data, then its indexes, from one goroutine
// (remote.StorageOptions.SequentialUploads): by default the indexes
// upload beside the data, and whether they reached the store before a
// failed data Put cancelled them would depend on the Go scheduler.
//
// Only Put and Delete fail (before taking effect, or after it: a lost
// response); Gets never fail, because the remote read path may race a
// speculative Get against its own.
type faultStore struct {
	m    *mem.Mem
	seed uint64
	// keys parses the remote segment objects' keys (the cluster's
	// storage manager, set before the first Put).
	keys *remote.StorageManager
	mu   struct {
		sync.Mutex
		rate  float64
		calls map[string]uint64
		fired int
		lost  int // of fired, those that lost the response
		// Late PUTs (lateputs.go).
		late          bool
		copies        map[string]*lateCopy // by segment id
		pending       []latePut
		remoteChanges uint64 // Puts and Deletes of remote segment objects
	}
}

var _ objstore.Store = (*faultStore)(nil)

func newFaultStore(seed uint64) *faultStore {
	s := &faultStore{m: mem.New(mem.Options{Seed: seed}), seed: seed}
	s.mu.calls = map[string]uint64{}
	s.mu.copies = map[string]*lateCopy{}
	return s
}

// setRate sets the probability of a fault per Put or Delete (0: none).
func (s *faultStore) setRate(r float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.rate = r
}

func (s *faultStore) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.rate
}

// fired returns how many faults were injected.
func (s *faultStore) fired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.fired
}

// keyClass is the part of a key that does not depend on a random id.
func keyClass(key string) string {
	switch {
	case strings.HasSuffix(key, "/manifest"):
		return "manifest"
	case strings.HasSuffix(key, "/indexes"):
		return "indexes"
	case strings.Contains(key, "/data-"):
		return "data"
	}
	return "wal"
}

// draw decides one call: 0 no fault, 1 fail before, 2 lose the response.
func (s *faultStore) draw(op, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.rate <= 0 {
		return 0
	}
	class := op + "/" + keyClass(key)
	n := s.mu.calls[class]
	s.mu.calls[class] = n + 1
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", s.seed, class, n)
	v := h.Sum64()
	if float64(v%10_000)/10_000 >= s.mu.rate {
		return 0
	}
	s.mu.fired++
	kind := 1 + int(v>>32)%2
	if kind == 2 {
		s.mu.lost++
	}
	return kind
}

func (s *faultStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	if lc := s.copyOf(key); lc != nil {
		return s.putOrdered(ctx, lc, key, r, size, opts)
	}
	return s.put(ctx, key, r, size, opts)
}

func (s *faultStore) put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	if keyClass(key) != "wal" {
		defer s.touch()
	}
	switch s.draw("put", key) {
	case 1:
		return &objstore.OpError{Op: "put", Key: key, Err: ErrInjected}
	case 2:
		if err := s.m.Put(ctx, key, r, size, opts); err != nil {
			return err
		}
		return &objstore.OpError{Op: "put", Key: key, Err: fmt.Errorf("%w: lost response", ErrInjected)}
	}
	return s.m.Put(ctx, key, r, size, opts)
}

func (s *faultStore) Delete(ctx context.Context, key string) error {
	if keyClass(key) != "wal" {
		defer s.touch()
	}
	switch s.draw("delete", key) {
	case 1:
		return &objstore.OpError{Op: "delete", Key: key, Err: ErrInjected}
	case 2:
		if err := s.m.Delete(ctx, key); err != nil {
			return err
		}
		return &objstore.OpError{Op: "delete", Key: key, Err: fmt.Errorf("%w: lost response", ErrInjected)}
	}
	return s.m.Delete(ctx, key)
}

func (s *faultStore) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.m.Get(ctx, key, offset, length)
}

func (s *faultStore) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return s.m.Stat(ctx, key)
}

func (s *faultStore) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	return s.m.List(ctx, prefix, startAfter, limit)
}

func (s *faultStore) Close() error { return s.m.Close() }

// ErrControlPlaneUnavailable is the cause of every control-plane fault
// the simulation injects: a call refused during an outage, or a commit
// that took effect but whose answer was lost.
var ErrControlPlaneUnavailable = errors.New("sim: injected control-plane fault")

// faultCP is the WAL control plane as the brokers reach it (the WAL
// writer and reader, the consolidation endpoints and pruners): pebblecp
// behind two switchable faults. During an outage it refuses the data
// plane's calls (ReserveObject, CommitFile, IsSafeToDeleteObject,
// FindBatches) before they take effect, as a database that is down or
// unreachable does. With lost answers every CommitFile takes effect and
// then fails, as a commit whose connection drops before the answer
// arrives: the writer's retries find the first commit's result lost
// too, so the producer is told the write failed while its batches are
// durable (an ambiguous commit). The cluster's own view (Cluster.WAL,
// the checker, the switch's controller and the operator) reads the
// control plane directly.
type faultCP struct {
	*pebblecp.ControlPlane
	mu struct {
		sync.Mutex
		outage, loseAnswers bool
		refused, lost       int
		// stepArmed fails the next commit inside its step
		// (ArmCommitStepFault); stepFailed counts those failures.
		stepArmed  bool
		stepFailed int
	}
}

// stepFault is the control plane's pebblecp.Options.StepFault: an armed
// fault fails the commit whose step ends next, after its batches were
// accepted, and disarms.
func (f *faultCP) stepFault(objectKey string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.mu.stepArmed {
		return nil
	}
	f.mu.stepArmed = false
	f.mu.stepFailed++
	return fmt.Errorf("%w: CommitFile %s: the control plane's store failed inside the commit's step",
		ErrControlPlaneUnavailable, objectKey)
}

func (f *faultCP) armStep() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.stepArmed = true
}

// ControlPlaneFaults count the control-plane faults a run injected: calls
// refused during an outage, and commits that took effect but lost their
// answer.
type ControlPlaneFaults struct{ Refused, LostAnswer int }

func (f *faultCP) set(outage, loseAnswers *bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if outage != nil {
		f.mu.outage = *outage
	}
	if loseAnswers != nil {
		f.mu.loseAnswers = *loseAnswers
	}
}

func (f *faultCP) state() (outage, loseAnswers bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.outage, f.mu.loseAnswers
}

func (f *faultCP) faults() ControlPlaneFaults {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ControlPlaneFaults{Refused: f.mu.refused, LostAnswer: f.mu.lost}
}

// refuse reports whether the outage refuses call op (and counts it).
func (f *faultCP) refuse(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.mu.outage {
		return nil
	}
	f.mu.refused++
	return fmt.Errorf("%w: %s refused: outage", ErrControlPlaneUnavailable, op)
}

func (f *faultCP) ReserveObject(ctx context.Context, key string) error {
	if err := f.refuse("ReserveObject"); err != nil {
		return err
	}
	return f.ControlPlane.ReserveObject(ctx, key)
}

func (f *faultCP) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := f.refuse("CommitFile"); err != nil {
		return wal.CommitFileResult{}, err
	}
	res, err := f.ControlPlane.CommitFile(ctx, req)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || !f.mu.loseAnswers {
		return res, err
	}
	f.mu.lost++
	return wal.CommitFileResult{}, fmt.Errorf("%w: CommitFile %s: answer lost", ErrControlPlaneUnavailable, req.ObjectKey)
}

// CommitFiles decides the list as CommitFile calls one after another,
// so each item meets the outage and the lost answers (the writer commits
// through CommitFiles; without this method the embedded plane's would
// bypass the faults).
func (f *faultCP) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	return wal.CommitEach(ctx, f, reqs)
}

func (f *faultCP) IsSafeToDeleteObject(ctx context.Context, key string) (bool, error) {
	if err := f.refuse("IsSafeToDeleteObject"); err != nil {
		return false, err
	}
	return f.ControlPlane.IsSafeToDeleteObject(ctx, key)
}

func (f *faultCP) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	if err := f.refuse("FindBatches"); err != nil {
		return nil, err
	}
	return f.ControlPlane.FindBatches(ctx, req)
}

// ControlPlaneOutage starts (on) or ends an outage of the WAL control
// plane as the brokers reach it: while it lasts, reservations, commits,
// the writer's proof that an object is not registered and batch lookups
// are refused (faultCP), so diskless produce fails, consolidation and
// diskless reads back off, and prunes fail.
func (c *Cluster) ControlPlaneOutage(on bool) error {
	return c.do("cp-outage", -1, func() (string, error) {
		c.rec.note("on", on)
		c.walCP.set(&on, nil)
		return fmt.Sprintf("outage=%t", on), nil
	})
}

// ControlPlaneLostAnswers turns ambiguous commits on or off: while on,
// every CommitFile takes effect and then loses its answer (faultCP), so
// a diskless produce is told it failed while its batches are committed.
func (c *Cluster) ControlPlaneLostAnswers(on bool) error {
	return c.do("cp-ambiguous", -1, func() (string, error) {
		c.rec.note("on", on)
		c.walCP.set(nil, &on)
		return fmt.Sprintf("lost-answers=%t", on), nil
	})
}

// ArmCommitStepFault makes the next CommitFile fail inside its step of
// the control plane's group commit, after its batches were accepted (a
// read or write error of the control plane's own store there; or an
// offset overflow): the commit is answered with the error and leaves
// nothing, and the commits after it start where it would have.
func (c *Cluster) ArmCommitStepFault() error {
	return c.do("cp-step-fault", -1, func() (string, error) {
		c.walCP.armStep()
		return "the next commit fails inside its step", nil
	})
}

// PartitionBroker cuts broker id off from the other brokers (the
// controller still reaches it): no classic fetch runs between it and
// another broker until Heal, so a follower cut off from the leader
// falls behind (and may leave the ISR), and a leader cut off from its
// followers cannot advance its high watermark. One broker at a time.
func (c *Cluster) PartitionBroker(id int32) error {
	return c.do("partition", id, func() (string, error) {
		if c.Broker(id) == nil || c.cut != 0 {
			return "", notApplicable("no broker %d, or broker %d is cut off already", id, c.cut)
		}
		c.cut = id
		return fmt.Sprintf("b%d cut off from the other brokers", id), nil
	})
}

// Heal ends the network partition PartitionBroker made.
func (c *Cluster) Heal() error {
	return c.do("heal", -1, func() (string, error) {
		if c.cut == 0 {
			return "", notApplicable("no broker is cut off")
		}
		id := c.cut
		c.cut = 0
		return fmt.Sprintf("b%d reaches the other brokers again", id), nil
	})
}

// cutOff reports whether the network partition separates brokers a and b.
func (c *Cluster) cutOff(a, b int32) bool {
	return c.cut != 0 && a != b && (a == c.cut || b == c.cut)
}

// maxClockMs bounds the clock jumps: time-based retention (retention.ms,
// 7 days by default) deletes records by age, which the checker does not
// model, so the clock stays a day short of it.
const maxClockMs = startMs + 6*24*3600*1000

// ClockJump moves the cluster's clock forward by ms at once (an NTP
// step, a VM resumed after a pause): every component reading the clock
// (record timestamps, the fetchers' back-offs, the WAL writer, the logs'
// time-based rolls) sees the jump. Not applicable past maxClockMs.
func (c *Cluster) ClockJump(ms int64) error {
	return c.do("clock-jump", -1, func() (string, error) {
		c.rec.note("ms", ms)
		if ms <= 0 || c.nowMs+ms > maxClockMs {
			return "", notApplicable("a jump of %d ms would leave the modeled time", ms)
		}
		c.nowMs += ms
		return fmt.Sprintf("+%d ms", ms), nil
	})
}

// clockJumps are the jumps the scheduler draws: a second, a minute, an
// hour, a day.
var clockJumps = []int64{1000, 60_000, 3600_000, 24 * 3600_000}
