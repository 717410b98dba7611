package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
)

// Options configures a Server.
type Options struct {
	// Addr is the listen address, host:port ("127.0.0.1:0" picks a port).
	Addr string
	// Dir holds everything the broker keeps: the log directory (Dir/logs,
	// a logmanager directory), the producer id block (Dir/producer-id-block)
	// the transaction coordinator's state (Dir/transaction-state) and the
	// committed offsets (Dir/consumer-offsets).
	Dir string
	// Partitions is the partition count of an auto-created topic. Default 1.
	Partitions int32
	// Logger receives the broker's events. Default slog.Default().
	Logger *slog.Logger
	// FlushMessages fsyncs a log after this many records (Kafka:
	// flush.messages); 1 fsyncs every append before it is acknowledged.
	// Default 0, Kafka's: no fsync by count, so with one replica a crash
	// of the machine (not of the process) can lose acknowledged records.
	FlushMessages int64
	// FS is where the logs and the committed offsets live. Default
	// vfs.Default (tests inject faults and crashes).
	FS vfs.FS
	// BaselinePlainFile makes Produce append to a plain file per
	// partition in Dir/plain instead of the log (baseline.go): the
	// compare command's baseline for produce through this broker. Not
	// for use otherwise: nothing is validated and Fetch sees nothing.
	BaselinePlainFile bool
	// TransactionAbortInterval is how often transactions older than their
	// timeout are aborted. Default 10s. Kafka:
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	TransactionAbortInterval time.Duration

	// SegmentBytes is the size at which a log's active segment rolls.
	// Default 1 GiB. Kafka: segment.bytes.
	SegmentBytes int64
	// RetentionCheckInterval is how often local retention runs on every
	// log (deleting, with the remote tier on, only segments already
	// copied). Default 5 min; negative: never. Kafka:
	// log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration

	// RemoteDisabled turns the remote tier (KIP-405) off: logs are local
	// only. Default false: on, with the objects in Dir/remote (or S3) and
	// their metadata in Dir/remote-metadata. Kafka:
	// remote.log.storage.system.enable and remote.storage.enable.
	RemoteDisabled bool
	// S3, when S3.Bucket is set, keeps the remote tier's objects in S3.
	S3 S3Options
	// RemoteTaskInterval is the delay between two runs of a partition's
	// copy task (and of its remote retention). Default 30 s. Kafka:
	// remote.log.manager.task.interval.ms.
	RemoteTaskInterval time.Duration
	// LocalRetentionMs and LocalRetentionBytes bound what stays on local
	// disk once copied. Default log.LocalRetentionDefault (-2: follow
	// retention.ms, 7 days, and retention.bytes, none);
	// log.RetentionNone for zero (keep only the active segment). Kafka:
	// local.retention.ms, local.retention.bytes.
	LocalRetentionMs    int64
	LocalRetentionBytes int64

	// beforeAnswer, when set, is called with a request's API key after
	// the request is handled and before its response is written (tests
	// hold answers back to kill the broker between the two).
	beforeAnswer func(key int16)
}

// maxRequestSize bounds a request's size field (Kafka: socket.request.max.bytes).
const maxRequestSize = 100 << 20

// Server is a single-node Kafka broker on a logmanager.Manager.
type Server struct {
	opts   Options
	logger *slog.Logger
	ln     net.Listener
	mgr    *logmanager.Manager
	tier   *tier // nil with Options.RemoteDisabled
	topics *topics
	pids   *producerIDs
	plain  *plainFiles // Options.BaselinePlainFile, else nil
	txns   *txnCoordinator
	// offsets are the consumer groups' committed offsets (offsets_store.go).
	offsets *offsets

	// ctx ends at Close: it ends the long polls of in-flight fetches.
	ctx    context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed bool
		conns  map[net.Conn]struct{}
	}
	wg        sync.WaitGroup // the accept loop and the connections
	closeOnce sync.Once
	closeErr  error
}

// Start opens the log directory (logmanager.Open finds the partitions
// and restores their high watermarks), loads the topics it holds, ends
// the transactions the last run left open (recoverTransactions), and
// starts accepting connections.
func Start(opts Options) (*Server, error) {
	if opts.Partitions <= 0 {
		opts.Partitions = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Dir == "" {
		return nil, errors.New("broker: no -dir")
	}
	s := &Server{opts: opts, logger: opts.Logger}
	s.mu.conns = map[net.Conn]struct{}{}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	pids, err := openProducerIDs(filepath.Join(opts.Dir, "producer-id-block"))
	if err != nil {
		return nil, err
	}
	s.pids = pids
	if opts.BaselinePlainFile {
		s.plain = &plainFiles{dir: filepath.Join(opts.Dir, "plain"), files: map[string]*plainFile{}}
		if err := os.MkdirAll(s.plain.dir, 0o755); err != nil {
			return nil, err
		}
	}
	if s.txns, err = openTxnCoordinator(filepath.Join(opts.Dir, "transaction-state")); err != nil {
		return nil, err
	}
	offsetsFS := opts.FS
	if offsetsFS == nil {
		offsetsFS = vfs.Default
	}
	if s.offsets, err = openOffsets(offsetsFS, filepath.Join(opts.Dir, offsetsDirName)); err != nil {
		return nil, err
	}
	if !opts.RemoteDisabled {
		if s.tier, err = openTier(opts, s.logger); err != nil {
			return nil, err
		}
	}
	logOpts := tierLogOptions(opts)
	logOpts.FlushMessages, logOpts.SegmentBytes = opts.FlushMessages, opts.SegmentBytes
	// Library: logmanager.Open opens every partition's log.UnifiedLog.
	mgr, err := logmanager.Open(context.Background(), logmanager.Options{
		Dirs:                   []string{filepath.Join(opts.Dir, "logs")},
		FS:                     opts.FS,
		Log:                    logOpts,
		RetentionCheckInterval: opts.RetentionCheckInterval,
		// Checkpoint the high watermarks often: a crash (not a clean
		// Close, which always writes them) loses at most this much.
		HighWatermarkCheckpointInterval: time.Second,
		OnDirOffline: func(f logmanager.DirFailure) {
			s.logger.Error("log directory offline: its partitions answer KAFKA_STORAGE_ERROR until a restart",
				"dir", f.Dir, "cause", f.Cause, "partitions", len(f.Partitions))
		},
	})
	if err != nil {
		s.closeTier()
		return nil, fmt.Errorf("broker: open the log directory: %w", err)
	}
	s.mgr = mgr
	s.topics = loadTopics(mgr, opts.Partitions)
	if err := s.commitLogEnds(); err != nil {
		_ = s.closeStorage()
		return nil, err
	}
	if err := s.recoverTransactions(); err != nil {
		_ = s.closeStorage()
		return nil, err
	}
	s.registerTiered()

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		_ = s.closeStorage()
		return nil, err
	}
	s.ln = ln
	s.wg.Add(2)
	go s.accept()
	go s.abortExpiredTransactions(cmp.Or(opts.TransactionAbortInterval, defaultTxnAbortInterval))
	s.logger.Info("broker listening", "addr", ln.Addr().String(), "dir", opts.Dir, "topics", s.topics.count())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close shuts down cleanly: it stops accepting, ends the long polls,
// lets every connection finish the request it is serving (and no more),
// stops the remote tier's tasks (a copy in flight is cancelled; its
// dangling objects are deleted by the next start's first copy run), then
// closes the log manager, which checkpoints the high watermarks and
// writes the clean-shutdown marker, and last the remote metadata and the
// object store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		for c := range s.mu.conns {
			// A read blocked between requests returns at once; a request
			// being served is answered first (handle does not read).
			_ = c.SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
		_ = s.ln.Close()
		s.cancel()
		s.wg.Wait()
		s.closeErr = s.closeStorage()
		if s.plain != nil {
			s.plain.close()
		}
		s.logger.Info("broker closed", "err", s.closeErr)
	})
	return s.closeErr
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve reads requests from one connection and answers them in order, one
// at a time, as Kafka requires.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	var size [4]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxRequestSize {
			s.logger.Warn("request too large, closing the connection", "size", n, "remote", c.RemoteAddr().String())
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		out, err := s.handleRaw(buf)
		if err != nil {
			s.logger.Warn("bad request, closing the connection", "err", err, "remote", c.RemoteAddr().String())
			return
		}
		if out == nil {
			continue // acks=0 produce: no response
		}
		if s.opts.beforeAnswer != nil && len(buf) >= 2 {
			s.opts.beforeAnswer(int16(binary.BigEndian.Uint16(buf)))
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// header is a request header (v1, or v2 with tagged fields).
type header struct {
	key, version int16
	correlation  int32
	clientID     *string
}

// parseHeader reads the header up to the client id; the tagged fields of
// a v2 header come after it, skipped by the caller when the request is
// flexible.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < 10 {
		return h, nil, fmt.Errorf("request of %d bytes: %w", len(b), io.ErrUnexpectedEOF)
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.correlation = int32(binary.BigEndian.Uint32(b[4:]))
	l := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if l >= 0 {
		if int(l) > len(b) {
			return h, nil, fmt.Errorf("client id of %d bytes: %w", l, io.ErrUnexpectedEOF)
		}
		id := string(b[:l])
		h.clientID = &id
		b = b[l:]
	}
	return h, b, nil
}

// skipTags skips a tagged-field section (uvarint count, then per field a
// uvarint tag, a uvarint size and the bytes).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged fields count")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tagged field size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// handleRaw parses one request and returns the framed response, nil for
// none. An error closes the connection (Kafka does the same for a request
// it cannot parse or an API version it does not serve).
func (s *Server) handleRaw(b []byte) ([]byte, error) {
	h, body, err := parseHeader(b)
	if err != nil {
		return nil, err
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, fmt.Errorf("unknown API key %d", h.key)
	}
	v, ok := supported[h.key]
	if !ok || h.version < v.min || h.version > v.max {
		if h.key == kmsg.ApiVersions.Int16() {
			// KIP-511: a version 0 answer naming the version to retry
			// with; the rest of the request is not read.
			return frame(h, unsupportedApiVersions(), false), nil
		}
		return nil, fmt.Errorf("%s v%d not served (range %d-%d)", kmsg.NameForKey(h.key), h.version, v.min, v.max)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	resp, err := s.handle(req)
	if err != nil || resp == nil {
		return nil, err
	}
	resp.SetVersion(h.version)
	// ApiVersions answers with a v0 header always, so that a client that
	// does not know the broker's versions yet can read it.
	return frame(h, resp, resp.IsFlexible() && h.key != kmsg.ApiVersions.Int16()), nil
}

// frame writes the size, the response header (the correlation id, and
// an empty tagged-field section in a v1 header) and the body.
func frame(h header, resp kmsg.Response, flexibleHeader bool) []byte {
	out := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(out[4:], uint32(h.correlation))
	if flexibleHeader {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// handle dispatches one parsed request; it returns nil for no response.
func (s *Server) handle(req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return s.apiVersions(r), nil
	case *kmsg.MetadataRequest:
		return s.metadata(r), nil
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(r), nil
	case *kmsg.ProduceRequest:
		resp := s.produce(r)
		if r.Acks == 0 {
			return nil, nil // an untyped nil: no response
		}
		return resp, nil
	case *kmsg.FetchRequest:
		return s.fetch(r), nil
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(r), nil
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(r), nil
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(r), nil
	case *kmsg.AddPartitionsToTxnRequest:
		return s.addPartitionsToTxn(r), nil
	case *kmsg.EndTxnRequest:
		return s.endTxn(r), nil
	case *kmsg.OffsetCommitRequest:
		return s.offsetCommit(r), nil
	case *kmsg.OffsetFetchRequest:
		return s.offsetFetch(r), nil
	case *kmsg.OffsetForLeaderEpochRequest:
		return s.offsetForLeaderEpoch(r), nil
	}
	return nil, fmt.Errorf("%T is in the supported table but has no handler", req)
}

// hostPort is the address clients are told to connect to: the listener's.
func (s *Server) hostPort() (string, int32) {
	a, ok := s.ln.Addr().(*net.TCPAddr)
	if !ok {
		return s.ln.Addr().String(), 0
	}
	return a.IP.String(), int32(a.Port)
}

// commitLogEnds moves each log's high watermark to its log end offset at
// start. The high watermark comes back from the checkpoint, which after a
// crash (a kill -9) can be older than records already acknowledged;
// with one replica everything on the log is on every replica, so it is
// committed, as Kafka's leader does when it becomes leader with only
// itself in the ISR (Partition.makeLeader, maybeIncrementLeaderHW).
// Without this, acknowledged records stay invisible to consumers until
// the next produce to their partition.
func (s *Server) commitLogEnds() error {
	for _, p := range s.mgr.Partitions() {
		if p.Future {
			continue
		}
		l, err := s.mgr.Get(p.Partition)
		if err != nil {
			s.logger.Warn("partition not served", "topic", p.Partition.Topic, "partition", p.Partition.Partition, "err", err)
			continue
		}
		if _, err := l.MaybeIncrementHighWatermark(l.LogEndOffset()); err != nil {
			return fmt.Errorf("broker: commit the log end of %s-%d: %w", p.Partition.Topic, p.Partition.Partition, err)
		}
	}
	return nil
}

// errorCode is the Kafka error code for a log's error. An I/O error also
// takes the log's directory offline (logmanager.Manager.ReportError,
// Kafka's LogDirFailureChannel): its partitions then answer
// KAFKA_STORAGE_ERROR without touching the disk again. Library:
// kafkaerr.ErrorCode.
func (s *Server) errorCode(l *log.UnifiedLog, err error) int16 {
	if s.mgr.ReportError(l, err) {
		s.logger.Error("I/O error: log directory taken offline", "dir", l.Dir(), "err", err)
	}
	return kafkaerr.ErrorCode(err)
}
