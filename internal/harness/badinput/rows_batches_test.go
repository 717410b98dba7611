package badinput

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

func init() { rowSets = append(rowSets, batchRows, moreBatchRows, ioRows) }

// Header field offsets of a v2 batch (Kafka's DefaultRecordBatch).
const (
	bMagic           = 16
	bCRC             = 17
	bAttributes      = 21
	bLastOffsetDelta = 23
	bMaxTimestamp    = 35
	bProducerID      = 43
	bBaseSequence    = 53
	bRecordsCount    = 57
)

const batchNowMs = 1_000_000

// batchLog is an empty log on a memory file system with a fixed clock and
// one record appended at offset 0 in epoch 0, so that "readable to 1"
// shows a refused append added nothing.
func batchLog(t *testing.T, fsys vfs.FS, opts log.Options) *log.UnifiedLog {
	t.Helper()
	opts.FS = fsys
	opts.Now = func() time.Time { return time.UnixMilli(batchNowMs) }
	l, err := log.Open("p0", opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := l.AppendAsLeader(clientBatch(t, record.DefaultBuilderOptions(), 1, nil), 0, log.OriginClient); err != nil {
		t.Fatalf("first append: %v", err)
	}
	return l
}

// clientBatch builds n records and applies damage, then fixes the Length
// field and CRC so that only checks past the CRC can see the damage.
func clientBatch(t *testing.T, o record.BuilderOptions, n int, damage func([]byte) []byte) []byte {
	t.Helper()
	b := record.NewBuilder(o)
	for i := 0; i < n; i++ {
		b.Add(batchNowMs, []byte("k"), []byte("value"))
	}
	buf, err := b.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if damage != nil {
		buf = damage(buf)
	}
	return fixBatch(buf)
}

func fixBatch(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	binary.BigEndian.PutUint32(b[bCRC:], crc32.Checksum(b[bAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func set32(off int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], uint32(v)); return b }
}

func setAttr(bits int16) func([]byte) []byte {
	return func(b []byte) []byte {
		a := binary.BigEndian.Uint16(b[bAttributes:])
		binary.BigEndian.PutUint16(b[bAttributes:], a|uint16(bits))
		return b
	}
}

func both(fs ...func([]byte) []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		for _, f := range fs {
			b = f(b)
		}
		return b
	}
}

func codec(c record.Compression) record.BuilderOptions {
	o := record.DefaultBuilderOptions()
	o.Compression = c
	return o
}

// readableTo returns the end of the run of records that read back at
// consecutive offsets from 0, each batch with a valid CRC.
func readableTo(t *testing.T, l *log.UnifiedLog) int64 {
	t.Helper()
	info, err := l.Read(nil, 0, 16<<20, log.IsolationLogEnd, true)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	next := int64(0)
	var it record.Iter
	for s := record.NewScanner(info.Records, record.ScannerOptions{}); s.Next(); {
		for it.Reset(s.Batch()); it.Next() && it.Record().Offset == next; next++ {
		}
	}
	return next
}

// leaderRow appends batch (built inside run) as a leader append with
// origin and reports the outcome.
func leaderRow(damage string, want error, wantTo int64, opts log.Options, origin log.AppendOrigin,
	batch func(t *testing.T) []byte) row {
	return row{area: areaClient, damage: damage, want: outcome{err: want, readableTo: wantTo},
		run: func(t *testing.T) outcome {
			l := batchLog(t, vfs.NewMem(), opts)
			_, err := l.AppendAsLeader(batch(t), 0, origin)
			return outcome{err: err, readableTo: readableTo(t, l)}
		}}
}

// followerRow appends batch as a follower fetch in epoch 0.
func followerRow(damage string, want error, wantTo int64, batch func(t *testing.T) []byte) row {
	return row{area: areaFollower, damage: damage, want: outcome{err: want, readableTo: wantTo},
		run: func(t *testing.T) outcome {
			l := batchLog(t, vfs.NewMem(), log.Options{})
			_, err := l.AppendAsFollower(batch(t), 0)
			return outcome{err: err, readableTo: readableTo(t, l)}
		}}
}

// replicated builds a follower's batch of n records at base in epoch.
func replicated(t *testing.T, base int64, epoch int32, n int, damage func([]byte) []byte) []byte {
	o := record.DefaultBuilderOptions()
	o.BaseOffset, o.PartitionLeaderEpoch = base, epoch
	return clientBatch(t, o, n, damage)
}

func batchRows() []row {
	def := record.DefaultBuilderOptions()
	plain := func(n int, damage func([]byte) []byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return clientBatch(t, def, n, damage) }
	}
	idem := record.DefaultBuilderOptions()
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 7, 0, -1
	bomb := func(t *testing.T) []byte {
		b := record.NewBuilder(codec(record.CompressionZstd))
		b.Add(batchNowMs, nil, make([]byte, 1<<20))
		buf, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	none := log.Options{}
	client := log.OriginClient
	return []row{
		leaderRow("records count below last offset delta + 1", log.ErrInvalidRecord, 1, none, client,
			plain(3, set32(bLastOffsetDelta, 5))),
		leaderRow("records count above the records present", log.ErrInvalidRecord, 1, none, client,
			plain(3, both(set32(bLastOffsetDelta, 3), set32(bRecordsCount, 4)))),
		leaderRow("last offset delta 0x7fffffff", log.ErrInvalidRecord, 1, none, client,
			plain(1, set32(bLastOffsetDelta, math.MaxInt32))),
		leaderRow("records are garbage varints", log.ErrInvalidRecord, 1, none, client,
			plain(2, func(b []byte) []byte {
				copy(b[record.HeaderSize:], bytes.Repeat([]byte{0xff}, len(b)-record.HeaderSize))
				return b
			})),
		leaderRow("offset deltas out of order", log.ErrInvalidRecord, 1, none, client,
			plain(2, func(b []byte) []byte {
				// Each record: length, attributes, timestamp delta 0,
				// offset delta. Swap the first two offset deltas.
				first := record.HeaderSize
				n, k := record.Varint(b[first:])
				second := first + k + int(n)
				b[first+k+2], b[second+k+2] = b[second+k+2], b[first+k+2]
				return b
			})),
		leaderRow("empty batch: records count 0", log.ErrInvalidRecord, 1, none, client,
			plain(1, func(b []byte) []byte { return set32(bRecordsCount, 0)(b[:record.HeaderSize]) })),
		leaderRow("batch CRC mismatch", log.ErrCorruption, 1, none, client,
			func(t *testing.T) []byte {
				b := clientBatch(t, def, 2, nil)
				b[len(b)-1] ^= 0x40
				return b
			}),
		leaderRow("magic byte 1", log.ErrCorruption, 1, none, client,
			plain(1, func(b []byte) []byte { b[bMagic] = 1; return b })),
		leaderRow("batch cut short", log.ErrCorruption, 1, none, client,
			func(t *testing.T) []byte { b := clientBatch(t, def, 2, nil); return b[:len(b)-3] }),
		leaderRow("client base offset not 0", log.ErrInvalidRecord, 1, none, client,
			func(t *testing.T) []byte {
				b := clientBatch(t, def, 1, nil)
				binary.BigEndian.PutUint64(b, 42) // outside the CRC
				return b
			}),
		leaderRow("control batch from a client", log.ErrInvalidRecord, 1, none, client,
			plain(1, setAttr(record.AttrControl))),
		leaderRow("control batch from the coordinator without a marker", log.ErrInvalidRecord, 1, none,
			log.OriginCoordinator, func(t *testing.T) []byte {
				o := idem
				o.BaseSequence, o.Control, o.Transactional = -1, true, true
				return clientBatch(t, o, 1, nil)
			}),
		leaderRow("producer sets LogAppendTime", log.ErrInvalidTimestamp, 1, none, client,
			plain(1, setAttr(record.AttrTimestampType))),
		leaderRow("timestamp beyond message.timestamp.after.max.ms", log.ErrInvalidTimestamp, 1,
			log.Options{MessageTimestampAfterMaxMs: 10}, client,
			func(t *testing.T) []byte {
				b := record.NewBuilder(def)
				b.Add(batchNowMs+11, nil, []byte("v"))
				buf, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				return buf
			}),
		leaderRow("idempotent batch without a sequence", log.ErrInvalidRecord, 1, none, client,
			func(t *testing.T) []byte { return clientBatch(t, idem, 1, nil) }),
		leaderRow("transactional batch without a producer id", log.ErrInvalidRecord, 1, none, client,
			plain(1, setAttr(record.AttrTransactional))),
		leaderRow("gzip section garbage", log.ErrCorruption, 1, none, client,
			func(t *testing.T) []byte {
				return clientBatch(t, codec(record.CompressionGzip), 3, func(b []byte) []byte {
					for i := record.HeaderSize + 10; i < len(b); i++ {
						b[i] ^= 0x5a
					}
					return b
				})
			}),
		leaderRow("zstd bomb beyond the decompression bound", log.ErrRecordTooLarge, 1,
			log.Options{MaxDecompressedBytes: 64 << 10}, client, bomb),
		leaderRow("batch above max.message.bytes", log.ErrRecordTooLarge, 1,
			log.Options{MaxMessageBytes: 100}, client, plain(10, nil)),
		leaderRow("lz4 batch (legitimate)", nil, 4, none, client,
			func(t *testing.T) []byte { return clientBatch(t, codec(record.CompressionLZ4), 3, nil) }),
		leaderRow("MaxTimestamp disagrees with records (corrected)", nil, 3, none, client,
			plain(2, func(b []byte) []byte {
				binary.BigEndian.PutUint64(b[bMaxTimestamp:], math.MaxInt64)
				return b
			})),

		followerRow("last offset overflows int64", log.ErrCorruption, 1,
			func(t *testing.T) []byte {
				// Built at 1, moved outside the CRC: the builder refuses it.
				b := replicated(t, 1, 0, 3, nil)
				binary.BigEndian.PutUint64(b, math.MaxInt64)
				return b
			}),
		followerRow("records count 0 with records present", log.ErrCorruption, 1,
			func(t *testing.T) []byte { return replicated(t, 1, 0, 2, set32(bRecordsCount, 0)) }),
		followerRow("batch CRC mismatch", log.ErrCorruption, 1,
			func(t *testing.T) []byte {
				b := replicated(t, 1, 0, 2, nil)
				b[bProducerID] ^= 1
				return b
			}),
		followerRow("first offset below the log end offset", log.ErrUnexpectedAppendOffset, 1,
			func(t *testing.T) []byte { return replicated(t, 0, 0, 2, nil) }),
		followerRow("last offsets not increasing", log.ErrOffsetsOutOfOrder, 1,
			func(t *testing.T) []byte {
				return append(replicated(t, 5, 0, 2, nil), replicated(t, 3, 0, 2, nil)...)
			}),
		followerRow("batch without a leader epoch", log.ErrInvalidRecord, 1,
			func(t *testing.T) []byte { return replicated(t, 1, -1, 2, nil) }),
		// The leader validated the records and the CRC covers them; like
		// Kafka's follower path, a follower does not decode them.
		followerRow("undecodable records under a valid CRC (accepted)", nil, 1,
			func(t *testing.T) []byte {
				return replicated(t, 1, 0, 2, func(b []byte) []byte { b[record.HeaderSize] = 0xff; return b })
			}),
		followerRow("batch from a newer leader epoch (skipped)", nil, 1,
			func(t *testing.T) []byte { return replicated(t, 1, 9, 2, nil) }),
		followerRow("sequence field garbage (not checked)", nil, 3,
			func(t *testing.T) []byte { return replicated(t, 1, 0, 2, set32(bBaseSequence, -7)) }),
	}
}

// errnoFS fails writes (or syncs) to segment files with errno once armed.
func errnoFS(armed *atomic.Bool, errno syscall.Errno) vfs.FS {
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind == errorfs.OpFileWriteAt && strings.HasSuffix(op.Path, ".log") {
			return &fs.PathError{Op: "write", Path: op.Path, Err: errno}
		}
		return nil
	}))
}

// ioRow injects errno into segment writes after the first record, then
// appends twice: the first failure takes the log offline, so the second
// append (with the fault gone) must fail with the same kind.
func ioRow(damage string, errno syscall.Errno, want error) row {
	return row{area: areaSegment, damage: damage, want: outcome{err: want, readableTo: 1},
		run: func(t *testing.T) outcome {
			var armed atomic.Bool
			l := batchLog(t, errnoFS(&armed, errno), log.Options{})
			armed.Store(true)
			b := clientBatch(t, record.DefaultBuilderOptions(), 1, nil)
			if _, err := l.AppendAsLeader(b, 0, log.OriginClient); err == nil {
				t.Fatal("append succeeded under an injected write error")
			}
			armed.Store(false)
			_, err := l.AppendAsLeader(clientBatch(t, record.DefaultBuilderOptions(), 1, nil), 0, log.OriginClient)
			return outcome{err: err, readableTo: readableTo(t, l)}
		}}
}

func ioRows() []row {
	return []row{
		ioRow("disk full writing the active segment (log offline)", syscall.ENOSPC, log.ErrNoSpace),
		ioRow("permission denied writing the active segment (log offline)", syscall.EACCES, log.ErrPermission),
		ioRow("device I/O error writing the active segment (log offline)", syscall.EIO, log.ErrIO),
		{area: areaDirName, damage: "partition directory is a file", want: outcome{err: log.ErrNotDir, readableTo: -1},
			run: func(t *testing.T) outcome {
				dir := filepath.Join(t.TempDir(), "p0")
				f, err := vfs.Default.Create(dir, vfs.WriteCategoryUnspecified)
				if err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
				_, err = log.Open(dir, log.Options{})
				return outcome{err: err, readableTo: -1}
			}},
		{area: areaSegment, damage: "segment .log is a directory", want: outcome{err: log.ErrIsDir, readableTo: -1},
			run: func(t *testing.T) outcome {
				dir := filepath.Join(t.TempDir(), "p0")
				if err := vfs.Default.MkdirAll(filepath.Join(dir, "00000000000000000000.log"), 0o755); err != nil {
					t.Fatal(err)
				}
				_, err := log.Open(dir, log.Options{})
				return outcome{err: err, readableTo: -1}
			}},
	}
}

// moreBatchRows covers each codec's decoder, the record fields one by one,
// multi-batch appends and the producer state.
func moreBatchRows() []row {
	def := record.DefaultBuilderOptions()
	none := log.Options{}
	client := log.OriginClient
	garbled := func(c record.Compression) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			return clientBatch(t, codec(c), 4, func(b []byte) []byte {
				for i := record.HeaderSize; i < len(b); i++ {
					b[i] ^= 0xa5
				}
				return b
			})
		}
	}
	countAbove := func(c record.Compression) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			return clientBatch(t, codec(c), 3, both(set32(bLastOffsetDelta, 3), set32(bRecordsCount, 4)))
		}
	}
	// record0 returns a batch of one record whose encoding (after the
	// length varint) is body, so that each field can be damaged alone.
	record0 := func(body ...byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			return clientBatch(t, def, 1, func(b []byte) []byte {
				b = append(b[:record.HeaderSize], byte(len(body)<<1)) // zigzag length
				return append(b, body...)
			})
		}
	}
	idem := func(seq int32) record.BuilderOptions {
		o := record.DefaultBuilderOptions()
		o.ProducerID, o.ProducerEpoch, o.BaseSequence = 7, 0, seq
		return o
	}
	return []row{
		leaderRow("snappy section garbage", log.ErrCorruption, 1, none, client, garbled(record.CompressionSnappy)),
		leaderRow("lz4 section garbage", log.ErrCorruption, 1, none, client, garbled(record.CompressionLZ4)),
		leaderRow("zstd section garbage", log.ErrCorruption, 1, none, client, garbled(record.CompressionZstd)),
		leaderRow("gzip records count above the records present", log.ErrInvalidRecord, 1, none, client,
			countAbove(record.CompressionGzip)),
		leaderRow("snappy records count above the records present", log.ErrInvalidRecord, 1, none, client,
			countAbove(record.CompressionSnappy)),
		leaderRow("zstd records count above the records present", log.ErrInvalidRecord, 1, none, client,
			countAbove(record.CompressionZstd)),
		leaderRow("unknown compression codec 6", log.ErrCorruption, 1, none, client,
			func(t *testing.T) []byte { return clientBatch(t, def, 1, setAttr(6)) }),
		// attributes 0, timestamp delta 0, offset delta 0, key length,
		// value length, header count (zigzag varints).
		leaderRow("record key length beyond the record", log.ErrInvalidRecord, 1, none, client,
			record0(0, 0, 0, 40, 0, 0)),
		leaderRow("record header count negative", log.ErrInvalidRecord, 1, none, client,
			record0(0, 0, 0, 1, 1, 3)),
		leaderRow("record header key null", log.ErrInvalidRecord, 1, none, client,
			record0(0, 0, 0, 1, 1, 2, 1, 0)),
		leaderRow("record with bytes after its headers", log.ErrInvalidRecord, 1, none, client,
			record0(0, 0, 0, 1, 1, 0, 7, 7)),
		leaderRow("record with null key and value (legitimate)", nil, 2, none, client,
			record0(0, 0, 0, 1, 1, 0)),
		leaderRow("timestamp before message.timestamp.before.max.ms", log.ErrInvalidTimestamp, 1,
			log.Options{MessageTimestampBeforeMaxMs: 10}, client,
			func(t *testing.T) []byte {
				b := record.NewBuilder(def)
				b.Add(batchNowMs-11, nil, []byte("v"))
				buf, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				return buf
			}),
		leaderRow("delete horizon set by a producer", log.ErrInvalidRecord, 1, none, client,
			func(t *testing.T) []byte { return clientBatch(t, def, 1, setAttr(record.AttrDeleteHorizon)) }),
		leaderRow("producer id with a negative producer epoch", log.ErrInvalidRecord, 1, none, client,
			func(t *testing.T) []byte {
				o := idem(0)
				o.ProducerEpoch = -5
				return clientBatch(t, o, 1, nil)
			}),
		leaderRow("second batch of an append invalid (nothing written)", log.ErrInvalidRecord, 1, none, client,
			func(t *testing.T) []byte {
				good := clientBatch(t, def, 2, nil)
				return append(good, clientBatch(t, def, 2, set32(bLastOffsetDelta, 4))...)
			}),
		leaderRow("garbage after a good batch (nothing written)", log.ErrCorruption, 1, none, client,
			func(t *testing.T) []byte { return append(clientBatch(t, def, 2, nil), 1, 2, 3, 4, 5) }),
		{area: areaClient, damage: "idempotent batch out of sequence",
			want: outcome{err: log.ErrOutOfOrderSequence, readableTo: 3}, run: func(t *testing.T) outcome {
				// Sequences 0 and 1 are in the log; 5 does not follow.
				l := batchLog(t, vfs.NewMem(), log.Options{})
				if _, err := l.AppendAsLeader(clientBatch(t, idem(0), 2, nil), 0, client); err != nil {
					t.Fatal(err)
				}
				_, err := l.AppendAsLeader(clientBatch(t, idem(5), 1, nil), 0, client)
				return outcome{err: err, readableTo: readableTo(t, l)}
			}},
		{area: areaClient, damage: "idempotent batch retried (duplicate, nothing written)",
			want: outcome{readableTo: 3}, run: func(t *testing.T) outcome {
				l := batchLog(t, vfs.NewMem(), log.Options{})
				if _, err := l.AppendAsLeader(clientBatch(t, idem(0), 2, nil), 0, client); err != nil {
					t.Fatal(err)
				}
				info, err := l.AppendAsLeader(clientBatch(t, idem(0), 2, nil), 0, client)
				if err == nil && (!info.Duplicate || info.FirstOffset != 1) {
					t.Fatalf("retry not reported as the duplicate of offset 1: %+v", info)
				}
				return outcome{err: err, readableTo: readableTo(t, l)}
			}},
		leaderRow("coordinator transaction marker (legitimate)", nil, 2, none, log.OriginCoordinator,
			func(t *testing.T) []byte {
				b, err := record.AppendEndTxnBatch(nil, idem(-1), batchNowMs, record.ControlAbort, 0)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}),
		{area: areaClient, damage: "LogAppendTime log stamps its clock (legitimate)",
			want: outcome{readableTo: 3}, run: func(t *testing.T) outcome {
				l := batchLog(t, vfs.NewMem(), log.Options{MessageTimestampType: record.LogAppendTime})
				b := record.NewBuilder(def)
				b.Add(5, nil, []byte("a")) // producer times far from the clock
				b.Add(6, nil, []byte("b"))
				buf, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				info, err := l.AppendAsLeader(buf, 0, client)
				if err == nil && info.MaxTimestamp != batchNowMs {
					t.Fatalf("max timestamp %d, want the log's clock %d", info.MaxTimestamp, batchNowMs)
				}
				return outcome{err: err, readableTo: readableTo(t, l)}
			}},

		followerRow("unknown compression codec 7", log.ErrCorruption, 1,
			func(t *testing.T) []byte { return replicated(t, 1, 0, 2, setAttr(7)) }),
		followerRow("records count above last offset delta + 1", log.ErrCorruption, 1,
			func(t *testing.T) []byte { return replicated(t, 1, 0, 2, set32(bRecordsCount, 3)) }),
		followerRow("batch cut short", log.ErrCorruption, 1,
			func(t *testing.T) []byte { b := replicated(t, 1, 0, 2, nil); return b[:len(b)-1] }),
		followerRow("batches overlap (last offsets still increase)", log.ErrOffsetsOutOfOrder, 1,
			func(t *testing.T) []byte { return append(replicated(t, 1, 0, 3, nil), replicated(t, 2, 0, 3, nil)...) }),
		followerRow("magic byte 0", log.ErrCorruption, 1,
			func(t *testing.T) []byte {
				return replicated(t, 1, 0, 2, func(b []byte) []byte { b[bMagic] = 0; return b })
			}),
		// Not decompressed on the follower path (Kafka's does not either).
		followerRow("gzip section garbage under a valid CRC (accepted)", nil, 1,
			func(t *testing.T) []byte {
				o := codec(record.CompressionGzip)
				o.BaseOffset, o.PartitionLeaderEpoch = 1, 0
				return clientBatch(t, o, 2, func(b []byte) []byte { b[len(b)-2] ^= 0xff; return b })
			}),
	}
}
