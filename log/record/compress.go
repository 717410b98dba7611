package record

import (
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressor holds a Builder's encoders, created on first use and reused,
// each for one level at a time. The settings follow Kafka's Java producer
// so that batches look like the ones a Kafka client writes: gzip at level
// 6, snappy in xerial framing with 32 KiB blocks, lz4 frames with 64 KiB
// independent blocks and no content checksum (KafkaLZ4BlockOutputStream),
// zstd at level 3.
type compressor struct {
	w sliceWriter

	gz      *gzip.Writer
	gzLevel int
	lz      *lz4.Writer
	lzLevel int
	zs      *zstd.Encoder
	zsLevel int
}

// sliceWriter appends to a slice: the stream encoders write straight into
// the batch being built.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// compress appends src, compressed with c at level (0 = default), to dst.
func (e *compressor) compress(dst []byte, c Compression, level int, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return e.gzip(dst, level, src)
	case CompressionSnappy:
		return appendXerial(dst, src), nil
	case CompressionLZ4:
		return e.lz4(dst, level, src)
	case CompressionZstd:
		return e.zstd(dst, level, src)
	}
	return dst, invalidArgf("builder: unknown compression %d", c)
}

func (e *compressor) gzip(dst []byte, level int, src []byte) ([]byte, error) {
	if level == 0 {
		level = gzip.DefaultCompression
	} else if level < 1 || level > 9 {
		return dst, invalidArgf("builder: gzip level %d not in [1, 9]", level)
	}
	e.w.b = dst
	if e.gz == nil || e.gzLevel != level {
		gz, err := gzip.NewWriterLevel(&e.w, level)
		if err != nil {
			return dst, invalidArgf("builder: gzip level %d: %v", level, err)
		}
		e.gz, e.gzLevel = gz, level
	} else {
		e.gz.Reset(&e.w)
	}
	_, err := e.gz.Write(src)
	if cerr := e.gz.Close(); err == nil {
		err = cerr
	}
	return e.takeOutput(), err
}

func (e *compressor) lz4(dst []byte, level int, src []byte) ([]byte, error) {
	if level < 0 || level > 9 {
		return dst, invalidArgf("builder: lz4 level %d not in [1, 9]", level)
	}
	lvl := lz4Levels[level]
	e.w.b = dst
	if e.lz == nil || e.lzLevel != level {
		lz := lz4.NewWriter(&e.w)
		err := lz.Apply(
			lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.ChecksumOption(false),
			lz4.CompressionLevelOption(lvl))
		if err != nil {
			return dst, invalidArgf("builder: lz4 level %d: %v", level, err)
		}
		e.lz, e.lzLevel = lz, level
	} else {
		e.lz.Reset(&e.w)
	}
	_, err := e.lz.Write(src)
	if cerr := e.lz.Close(); err == nil {
		err = cerr
	}
	return e.takeOutput(), err
}

// takeOutput returns what the stream encoders wrote and drops the
// writer's reference to it.
func (e *compressor) takeOutput() []byte {
	out := e.w.b
	e.w.b = nil
	return out
}

func (e *compressor) zstd(dst []byte, level int, src []byte) ([]byte, error) {
	if level == 0 {
		level = 3 // zstd's and Kafka's default
	} else if level < -131072 || level > 22 {
		return dst, invalidArgf("builder: zstd level %d not in [-131072, 22]", level)
	}
	if e.zs == nil || e.zsLevel != level {
		zs, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)))
		if err != nil {
			return dst, invalidArgf("builder: zstd level %d: %v", level, err)
		}
		e.zs, e.zsLevel = zs, level
	}
	return e.zs.EncodeAll(src, dst), nil
}

// lz4Levels maps a level, 0 (default) to 9, to the lz4 package's level.
var lz4Levels = [...]lz4.CompressionLevel{
	lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4,
	lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9,
}

// appendXerial appends src in snappy-java's xerial framing (see
// xerialMagic), the framing Kafka's Java producer writes and reads.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		maxLen := snappy.MaxEncodedLen(n)
		at := len(dst)
		dst = slices.Grow(dst, 4+maxLen)[:at+4+maxLen]
		// Encode in place, after room for the length.
		block := snappy.Encode(dst[at+4:], src[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}
