package main

import (
	"fmt"
	"sync"
	"syscall"
)

// rawPointsInterval is tierlog's default recovery-point interval
// (log.DefaultRecoveryPointIntervalBytes), repeated here so the row names
// what it measures.
const rawPointsInterval = 16 << 20

// rawPointsImpl is the raw file doing the durability work that bounds
// tierlog's crash recovery without a flush policy: the same write(2)s,
// plus an fdatasync(2) started on its own goroutine whenever 16 MiB were
// written since the last one began and none is running (tierlog's
// background flush). The plain raw file leaves every byte in the page
// cache until after the run; this one writes it back during the run, as a
// log that bounds what a crash leaves to re-read must. It is a baseline,
// not a peer: it appears in the append rows only.
type rawPointsImpl struct {
	rawImpl
	since   int64
	busy    chan struct{}
	running sync.WaitGroup
	mu      sync.Mutex
	err     error // the first background fdatasync's failure
}

func (r *rawPointsImpl) Name() string { return rawPointsName }

func (r *rawPointsImpl) Durability(sync bool) string {
	if sync {
		return r.rawImpl.Durability(true)
	}
	return fmt.Sprintf("write(2), fdatasync(2) in the background every %d MiB", rawPointsInterval>>20)
}

func (r *rawPointsImpl) Unsupported(k workloadKind) string {
	if k == kindAppend {
		return ""
	}
	return "a baseline for the append rows only (the raw file's rows stand for it)"
}

func (r *rawPointsImpl) Append(b *batch) error {
	if err := r.rawImpl.Append(b); err != nil {
		return err
	}
	if r.sync {
		return nil
	}
	if r.busy == nil {
		r.busy = make(chan struct{}, 1)
	}
	if r.since += int64(len(b.kafka)); r.since < rawPointsInterval {
		return r.bgErr()
	}
	select {
	case r.busy <- struct{}{}:
		r.since = 0
		fd := int(r.f.Fd())
		r.running.Add(1)
		go func() {
			defer r.running.Done()
			if err := syscall.Fdatasync(fd); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
			<-r.busy
		}()
	default: // one is running: a later append starts the next
	}
	return r.bgErr()
}

func (r *rawPointsImpl) bgErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *rawPointsImpl) Close() error {
	r.running.Wait() // no fdatasync on a closed descriptor
	r.since = 0
	if err := r.bgErr(); err != nil {
		_ = r.rawImpl.Close()
		return err
	}
	return r.rawImpl.Close()
}
