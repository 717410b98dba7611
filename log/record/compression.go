package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tierlog/tierlog/internal/base"
)

// Compression is the codec of a batch's records, attribute bits 0-2.
type Compression int8

// The five codecs of the v2 format. Kafka: CompressionType.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// DefaultMaxDecompressedBytes is the decompression limit when none is set:
// 64 MiB, well above Kafka's default max.message.bytes (1 MiB) and
// fetch.max.bytes (50 MiB).
const DefaultMaxDecompressedBytes = 64 << 20

// xerialMagic starts the snappy framing of snappy-java's
// SnappyOutputStream, which Kafka's Java producer writes. It is followed by
// two big-endian int32s (version 1, minimum compatible version 1) and then
// by blocks: a big-endian int32 length and a raw snappy block.
//
//	+--------------------+---------+--------+-----+------------+-----+
//	| \x82SNAPPY\x00 (8) | ver (4) | compat | len | snappy blk | ... |
//	+--------------------+---------+--------+-----+------------+-----+
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	// xerialBlockSize is snappy-java's default block size, what Kafka
	// writes.
	xerialBlockSize = 32 << 10
)

// Decompressor decompresses batch records into a buffer it owns and
// reuses, never beyond a size limit. The zero value is ready to use with
// DefaultMaxDecompressedBytes. A Decompressor is not safe for concurrent
// use.
type Decompressor struct {
	// limit is the most bytes one call may produce; 0 means the default.
	limit int

	buf  []byte
	src  bytes.Reader // reused so the stream readers do not allocate one
	gz   *gzip.Reader
	lz   *lz4.Reader
	zstd *zstd.Decoder
}

// NewDecompressor returns a Decompressor that fails any input expanding
// beyond maxBytes (0 means DefaultMaxDecompressedBytes).
func NewDecompressor(maxBytes int) *Decompressor {
	d := &Decompressor{}
	d.SetLimit(maxBytes)
	return d
}

// SetLimit changes the decompression limit (0 means the default).
func (d *Decompressor) SetLimit(maxBytes int) {
	if maxBytes < 0 {
		maxBytes = 0
	}
	if maxBytes != d.limit && d.zstd != nil {
		// The zstd decoder enforces the limit itself; rebuild it lazily.
		d.zstd.Close()
		d.zstd = nil
	}
	d.limit = maxBytes
}

// Limit returns the decompression limit in bytes.
func (d *Decompressor) Limit() int {
	if d.limit == 0 {
		return DefaultMaxDecompressedBytes
	}
	return d.limit
}

// Decompress returns src decompressed with codec c. The result aliases the
// Decompressor's buffer and is valid until the next call; for
// CompressionNone it is src itself.
//
// It returns a *DecompressedSizeError if the output would exceed the
// limit, and a *CorruptBatchError (BaseOffset undefined) if the codec
// rejects src.
func (d *Decompressor) Decompress(c Compression, src []byte) ([]byte, error) {
	out, err := d.decompress(c, src)
	if err != nil {
		return nil, d.wrapErr(err, c, base.UndefinedOffset)
	}
	return out, nil
}

// errTooLarge is the internal signal for an output beyond the limit; it
// becomes a *DecompressedSizeError once the caller knows the base offset.
var errTooLarge = errors.New("too large")

func (d *Decompressor) wrapErr(err error, c Compression, baseOffset int64) error {
	if errors.Is(err, errTooLarge) {
		return &DecompressedSizeError{BaseOffset: baseOffset, Compression: c, Limit: d.Limit()}
	}
	return &CorruptBatchError{
		BaseOffset: baseOffset,
		Reason:     fmt.Sprintf("%s decompression failed", c),
		Err:        err,
	}
}

func (d *Decompressor) decompress(c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		if len(src) > d.Limit() {
			return nil, errTooLarge
		}
		return src, nil
	case CompressionGzip:
		return d.gunzip(src)
	case CompressionSnappy:
		return d.unsnappy(src)
	case CompressionLZ4:
		return d.unlz4(src)
	case CompressionZstd:
		return d.unzstd(src)
	}
	return nil, fmt.Errorf("unknown codec %d", int8(c))
}

func (d *Decompressor) gunzip(src []byte) ([]byte, error) {
	d.src.Reset(src)
	if d.gz == nil {
		gz, err := gzip.NewReader(&d.src)
		if err != nil {
			return nil, err
		}
		d.gz = gz
	} else if err := d.gz.Reset(&d.src); err != nil {
		return nil, err
	}
	return d.readAll(d.gz, len(src))
}

func (d *Decompressor) unlz4(src []byte) ([]byte, error) {
	d.src.Reset(src)
	if d.lz == nil {
		d.lz = lz4.NewReader(&d.src)
	} else {
		d.lz.Reset(&d.src)
	}
	return d.readAll(d.lz, len(src))
}

func (d *Decompressor) unzstd(src []byte) ([]byte, error) {
	if d.zstd == nil {
		// One goroutine-free decoder per Decompressor. The decoder itself
		// enforces the limit, also for frames without a content size.
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(d.Limit())))
		if err != nil {
			return nil, err
		}
		d.zstd = dec
	}
	out, err := d.zstd.DecodeAll(src, d.buf[:0])
	if cap(out) > cap(d.buf) {
		d.buf = out[:0]
	}
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// unsnappy accepts both framings found in Kafka logs: snappy-java's xerial
// framing (Kafka's Java producer) and a single raw snappy block (franz-go,
// librdkafka).
func (d *Decompressor) unsnappy(src []byte) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.HasPrefix(src, xerialMagic) {
		return d.snappyBlocks(src, false)
	}
	return d.snappyBlocks(src[xerialHeaderSize:], true)
}

// snappyBlocks decodes one raw block, or xerial length-prefixed blocks. It
// sums the blocks' declared decoded lengths against the limit before
// growing the buffer, so a hostile length never allocates.
func (d *Decompressor) snappyBlocks(src []byte, xerial bool) ([]byte, error) {
	total := 0
	for rem := src; len(rem) > 0 || !xerial; {
		block := rem
		if xerial {
			if len(rem) < 4 {
				return nil, errors.New("xerial block length cut")
			}
			n := binary.BigEndian.Uint32(rem)
			if uint64(n) > uint64(len(rem)-4) {
				return nil, fmt.Errorf("xerial block of %d bytes, %d left", n, len(rem)-4)
			}
			block, rem = rem[4:4+n], rem[4+n:]
		}
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return nil, err
		}
		if n > d.Limit()-total {
			return nil, errTooLarge
		}
		total += n
		if !xerial {
			break
		}
	}
	out := d.grow(total)[:0]
	for rem := src; len(rem) > 0 || !xerial; {
		block := rem
		if xerial {
			n := binary.BigEndian.Uint32(rem)
			block, rem = rem[4:4+n], rem[4+n:]
		}
		n, _ := snappy.DecodedLen(block) // checked above
		dec, err := snappy.Decode(out[len(out):len(out)+n], block)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(dec)]
		if !xerial {
			break
		}
	}
	return out, nil
}

// grow returns the buffer with a capacity of at least n bytes.
func (d *Decompressor) grow(n int) []byte {
	if cap(d.buf) < n {
		d.buf = make([]byte, 0, n)
	}
	return d.buf[:n]
}

// readAll reads r to EOF into the buffer, failing with errTooLarge as soon
// as the output exceeds the limit: the limit bounds memory however small
// the input. srcLen seeds the first allocation.
func (d *Decompressor) readAll(r io.Reader, srcLen int) ([]byte, error) {
	limit := d.Limit()
	if cap(d.buf) == 0 {
		d.buf = make([]byte, 0, min(max(4*srcLen, 64<<10), limit))
	}
	out := d.buf[:0]
	for {
		if len(out) == cap(out) {
			if len(out) >= limit {
				var probe [1]byte
				if n, err := io.ReadFull(r, probe[:]); n > 0 {
					return nil, errTooLarge
				} else if err != io.EOF {
					return nil, err
				}
				return out, nil
			}
			grown := make([]byte, len(out), min(2*cap(out)+(64<<10), limit))
			copy(grown, out)
			out = grown
			d.buf = out[:0]
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
