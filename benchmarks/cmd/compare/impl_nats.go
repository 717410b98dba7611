package main

// natsImpl drives NATS JetStream's file store (the storage of a JetStream
// stream, github.com/nats-io/nats-server/v2/server, v2.15.2) directly, with
// no server, client or protocol in front of it: one StoreMsg per record (a
// JetStream message, subject "bench", no headers, the 1 KiB value), sequence
// i+1 holds record i.
//
// Configuration, chosen to be what a one-replica JetStream stream with
// default settings gets (stream.go, (*stream).setupStore):
//
//   - Blocks: BlockSize 0, so the store picks its own: 8 MiB message blocks
//     (defaultLargeBlockSize, for a limits-retention stream without
//     MaxBytes). Each block is one file; no preallocation.
//   - Writes: AsyncFlush false ("flush in place"): every StoreMsg writes
//     its record to the block file before returning, one write(2) per
//     message (JetStream allows AsyncFlush only for replicated streams or
//     PersistMode async).
//   - No fsync rows: SyncAlways false and the default SyncInterval (2 min):
//     the page cache, with a background fsync of every block every two
//     minutes (JetStream's default sync_interval), which these runs are too
//     short to reach.
//   - fsync rows: SyncAlways and SyncOnFlush, and FlushAllPending after the
//     batch's last StoreMsg: one fsync of the dirty block(s) (and of the
//     stream state file, if one exists) per batch, as JetStream does for a
//     replicated stream with sync_always. SyncAlways alone would fsync every
//     1 KiB message, 16 or 1024 times per batch.
//   - Reads: the default block cache. The first read in a block loads the
//     whole block (8 MiB) into memory; later reads in it are served from
//     memory until the block has been idle for CacheExpire (10 s, the
//     default) or the GC reclaims the cache (it is held weakly). The warm-up
//     of the point reads therefore loads the whole 256 MiB log into memory.
//     A point read (LoadMsg) returns one 1 KiB message, where tierlog's
//     returns the whole 16 KiB batch holding the offset, as a Kafka fetch
//     does.
//   - No compression (Compression None), no encryption, no limits.
//   - Clean close is Stop, which writes the stream state (index.db) that the
//     next open reads instead of rebuilding; open after a crash rebuilds the
//     state from the blocks.
//
// Its constructor and the store type are unexported, and the only exported
// way in is a whole server with JetStream behind a client connection. The
// adapter binds the constructor and the methods it needs by name with
// go:linkname (natsLinked below). Go's linker does not restrict pull
// linknames into non-standard packages, so the plain build works.
//
// The store's methods are not called through server.StreamStore: the
// adapter holds an opaque pointer, and making an interface value from it
// would need the unexported type's itab.

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/nats-io/nats-server/v2/server"
)

// natsFileStore stands for the unexported *server.fileStore; only pointers
// to it are handled.
type natsFileStore struct{}

//go:linkname natsNewFileStore github.com/nats-io/nats-server/v2/server.newFileStore
func natsNewFileStore(fcfg server.FileStoreConfig, cfg server.StreamConfig) (*natsFileStore, error)

//go:linkname natsStoreMsg github.com/nats-io/nats-server/v2/server.(*fileStore).StoreMsg
func natsStoreMsg(fs *natsFileStore, subject string, hdr, msg []byte, ttl int64) (uint64, int64, error)

//go:linkname natsLoadMsg github.com/nats-io/nats-server/v2/server.(*fileStore).LoadMsg
func natsLoadMsg(fs *natsFileStore, seq uint64, sm *server.StoreMsg) (*server.StoreMsg, error)

//go:linkname natsFlushAllPending github.com/nats-io/nats-server/v2/server.(*fileStore).FlushAllPending
func natsFlushAllPending(fs *natsFileStore) error

//go:linkname natsFastState github.com/nats-io/nats-server/v2/server.(*fileStore).FastState
func natsFastState(fs *natsFileStore, state *server.StreamState)

//go:linkname natsStop github.com/nats-io/nats-server/v2/server.(*fileStore).Stop
func natsStop(fs *natsFileStore) error

// natsStoreMsgView mirrors server.StoreMsg, whose fields are unexported
// and which has no accessors, so that a read can be checked (sequence and
// length). natsLayoutOK compares the two layouts at start.
type natsStoreMsgView struct {
	subj string
	hdr  []byte
	msg  []byte
	buf  []byte
	seq  uint64
	ts   int64
}

var natsLayoutOK = unsafe.Sizeof(server.StoreMsg{}) == unsafe.Sizeof(natsStoreMsgView{})

const natsSubject = "bench"

type natsImpl struct {
	fs   *natsFileStore
	sync bool
	sm   server.StoreMsg // reused by reads
}

const natsName = "NATS JetStream file store"

func (n *natsImpl) Name() string { return natsName }

func (n *natsImpl) Durability(sync bool) string {
	if sync {
		return "SyncAlways+SyncOnFlush, FlushAllPending per batch: fsync of the block before Append returns"
	}
	return "page cache, one write(2) per message (fsync every 2 min by its sync timer, not reached)"
}

func (n *natsImpl) Unsupported(workloadKind) string { return "" }

func (n *natsImpl) Open(dir string, sync bool) error {
	if !natsLayoutOK {
		return errors.New("nats: server.StoreMsg layout changed; update natsStoreMsgView")
	}
	fcfg := server.FileStoreConfig{StoreDir: dir}
	if sync {
		fcfg.SyncAlways, fcfg.SyncOnFlush = true, true
	}
	cfg := server.StreamConfig{Name: "bench", Subjects: []string{natsSubject}, Storage: server.FileStorage}
	fs, err := natsNewFileStore(fcfg, cfg)
	if err != nil {
		return err
	}
	n.fs, n.sync = fs, sync
	return nil
}

func (n *natsImpl) Append(b *batch) error {
	for _, v := range b.values {
		if _, _, err := natsStoreMsg(n.fs, natsSubject, nil, v, 0); err != nil {
			return err
		}
	}
	if n.sync {
		return natsFlushAllPending(n.fs)
	}
	return nil
}

func (n *natsImpl) Close() error {
	if n.fs == nil {
		return nil
	}
	err := natsStop(n.fs)
	n.fs = nil
	return err
}

func (n *natsImpl) ReadAll() (bytes, records int64, err error) {
	var st server.StreamState
	natsFastState(n.fs, &st)
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
		l, err := n.load(seq)
		if err != nil {
			return bytes, records, err
		}
		bytes += int64(l)
		records++
	}
	return bytes, records, nil
}

func (n *natsImpl) ReadRecord(i int64) (int, error) { return n.load(uint64(i) + 1) }

// load reads message seq and checks it is the one asked for.
func (n *natsImpl) load(seq uint64) (int, error) {
	sm, err := natsLoadMsg(n.fs, seq, &n.sm)
	if err != nil {
		return 0, err
	}
	v := (*natsStoreMsgView)(unsafe.Pointer(sm))
	if v.seq != seq || len(v.msg) != recordBytes {
		return 0, fmt.Errorf("nats: LoadMsg(%d) returned sequence %d with %d bytes", seq, v.seq, len(v.msg))
	}
	return len(v.msg), nil
}
