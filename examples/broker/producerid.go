package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerIDBlock is how many producer ids one durable write reserves
// (Kafka: ProducerIdManager's blocks of 1000 from the controller).
const producerIDBlock = 1000

// producerIDs hands out producer ids that never repeat, across restarts
// too: the file holds the end of the reserved block, written atomically
// (a temporary file, fsync, rename, fsync of the directory) before any id
// of the block is handed out. A crash wastes the rest of a block, never
// repeats an id.
type producerIDs struct {
	path string

	mu struct {
		sync.Mutex
		next, end int64 // [next, end) is reserved and unused
	}
}

func openProducerIDs(path string) (*producerIDs, error) {
	p := &producerIDs{path: path}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return p, nil // next = end = 0
	case err != nil:
		return nil, err
	}
	end, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || end < 0 {
		return nil, fmt.Errorf("broker: %s: damaged producer id block %q", path, b)
	}
	p.mu.next, p.mu.end = end, end
	return p, nil
}

// next returns a new producer id.
func (p *producerIDs) next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.next == p.mu.end {
		end := p.mu.end + producerIDBlock
		if err := writeFileAtomic(p.path, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
			return -1, err
		}
		p.mu.end = end
	}
	id := p.mu.next
	p.mu.next++
	return id, nil
}

// writeFileAtomic replaces path with data durably: after it returns, a
// crash leaves the new content; before, the old one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// initProducerID gives an idempotent producer a new id, epoch 0. A
// producer that asks again (KIP-360's epoch bump after an error) gets a
// new id too, as Kafka gives a non-transactional producer. A
// transactional id is the transaction coordinator's
// (initTransactionalProducerID). Library: none (the log's producer state
// learns the id from the producer's first batch, in AppendAsLeader).
func (s *Server) initProducerID(r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		s.initTransactionalProducerID(r, resp)
		return resp
	}
	id, err := s.pids.next()
	if err != nil {
		s.logger.Error("producer id block write failed", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
