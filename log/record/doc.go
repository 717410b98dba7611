// Package record reads and writes Kafka record batches, format v2 (magic
// 2), byte for byte as Kafka does: the unit a partition log appends,
// stores, indexes and serves.
//
// # Batch layout
//
// All integers are big-endian (Kafka DefaultRecordBatch, magic 2).
//
//	offset  size  field                 notes
//	     0     8  BaseOffset            offset of the first record
//	     8     4  Length                batch size - 12 (LogOverhead)
//	    12     4  PartitionLeaderEpoch  -1 = none; NOT covered by the CRC
//	    16     1  Magic                 2
//	    17     4  CRC                   CRC-32C of bytes [21, end)
//	    21     2  Attributes            ---------------------------+
//	    23     4  LastOffsetDelta                                  |
//	    27     8  BaseTimestamp                                    |
//	    35     8  MaxTimestamp                                     | CRC
//	    43     8  ProducerId            -1 = none                  | scope
//	    51     2  ProducerEpoch         -1 = none                  |
//	    53     4  BaseSequence          -1 = none                  |
//	    57     4  RecordsCount                                     |
//	    61     -  Records               one blob if compressed ----+
//
//	Attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
//	bit 3 LogAppendTime, bit 4 transactional, bit 5 control,
//	bit 6 delete horizon in BaseTimestamp.
//
// Each record (Kafka DefaultRecord) is a zig-zag varint Length, then Attributes
// (int8), TimestampDelta (varlong), OffsetDelta (varint), Key and Value
// (varint length, -1 = null, then bytes) and Headers (varint count, then
// per header a key and a nullable value, each with a varint length).
//
// # CRC scope
//
// The CRC covers [21, end): the attributes through the last record byte.
// BaseOffset and PartitionLeaderEpoch lie outside it, so a leader can
// assign offsets (Batch.SetBaseOffset) and stamp its epoch
// (Batch.SetPartitionLeaderEpoch) in place, and the batch stays valid.
//
// # Types
//
// A Batch is a zero-copy view over one batch's bytes, obtained from
// ReadBatch or a Scanner. A Scanner walks concatenated batches (a segment
// file) and stops at the first torn or corrupt one, reporting the valid
// prefix: what log recovery keeps. An Iter decodes a batch's records, with
// no allocation for uncompressed batches and into a reused, size-capped
// buffer for compressed ones; it checks exactly RecordsCount records
// filling the section, with offset deltas strictly increasing within
// [0, LastOffsetDelta]. A Builder writes batches, and AppendEndTxnBatch
// writes transaction markers. Batch.Validate also refuses a records count
// of 0 with bytes after the header and a last offset above MaxInt64;
// Batch.SetMaxTimestamp rewrites the timestamp type and MaxTimestamp and
// recomputes the CRC.
//
// # Codecs
//
// None, gzip (klauspost), snappy (klauspost; written in the xerial
// framing of Kafka's Java producer, read in both xerial and raw-block
// form, since franz-go writes raw blocks), lz4 (pierrec/lz4 v4, the
// standard LZ4 frame) and zstd (klauspost). Decompression is bounded by a
// size limit (default 64 MiB per batch): a batch that expands beyond it is
// a *DecompressedSizeError, never an out-of-memory. franz-go's kmsg and kgo
// compressors are the oracle in the tests, in both directions, for every
// codec, control batches, null keys and values, and headers.
//
// # Errors
//
// Bad input never panics; every length is checked against the bytes that
// remain before it is used, and every count before anything is sized by
// it. Errors are typed and unwrap to sentinels:
//
//	*TornTailError          ErrTornTail              input ends inside a batch
//	*CorruptBatchError      ErrCorruption            bad CRC, magic, size, field, record
//	*ControlRecordError     ErrCorruption            malformed control key or value
//	*DecompressedSizeError  ErrDecompressedTooLarge  expands past the limit
//	(wrapped)               ErrInvalidArgument       bad Builder use
//
// A torn tail is not corruption: it is what a crash mid-append leaves, and
// recovery truncates it without alarm. A declared size above the
// Scanner's MaxBatchBytes is corruption even when it also runs past the
// end, as in Kafka's log recovery.
//
// # What this package does not do
//
// It does not read older formats (magic 0 and 1), assign offsets across
// batches, check that batches are in offset order, track producer state or
// transactions, or do I/O: it works on byte slices the caller reads and
// writes. Batch, Iter, Builder, Scanner and Decompressor are not safe for
// concurrent use; distinct values may be used from distinct goroutines.
package record
