package record

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzLimit keeps zip bombs in fuzz inputs cheap.
const fuzzLimit = 4 << 20

// FuzzScan scans arbitrary bytes as a segment. It checks that the scanner
// never panics, that its valid prefix holds only batches that validate
// and whose records decode (or fail typed), that decoding twice gives the
// same result, and that franz-go reads the same header fields, and the
// same records of uncompressed batches.
func FuzzScan(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewScanner(data, ScannerOptions{MaxBatchBytes: 1 << 20})
		it := NewIter(IterOptions{MaxDecompressedBytes: fuzzLimit})
		for s.Next() {
			checkFuzzBatch(t, it, s.Batch())
		}
		valid := s.ValidBytes()
		require.LessOrEqual(t, valid, len(data))
		err := s.Err()
		if valid == len(data) {
			require.NoError(t, err)
		} else {
			var te *TornTailError
			var ce *CorruptBatchError
			require.True(t, errors.As(err, &te) || errors.As(err, &ce), "untyped %T %v", err, err)
			require.Equal(t, errors.Is(err, ErrTornTail), !errors.Is(err, ErrCorruption))
		}
		// The valid prefix rescans cleanly to the same batches.
		s2, _ := scanAll(data[:valid], ScannerOptions{MaxBatchBytes: 1 << 20})
		require.NoError(t, s2.Err())
		require.Equal(t, valid, s2.ValidBytes())
	})
}

// FuzzBatch treats arbitrary bytes as one batch whose length and CRC are
// fixed up, so that mutations reach the header checks, the codecs and the
// record decoder instead of stopping at the CRC.
func FuzzBatch(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		if b, err := ReadBatch(seed.data); err == nil {
			f.Add(b.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < HeaderSize || len(data) > 1<<20 {
			return
		}
		buf := append([]byte{}, data...)
		buf[offMagic] = Magic
		fixup(buf)
		b, err := ReadBatch(buf)
		require.NoError(t, err)
		if err := b.Validate(); err != nil {
			require.ErrorIs(t, err, ErrCorruption)
			return
		}
		checkFuzzBatch(t, NewIter(IterOptions{MaxDecompressedBytes: fuzzLimit}), b)
	})
}

// checkFuzzBatch checks one batch that passed Validate.
func checkFuzzBatch(t *testing.T, it *Iter, b Batch) {
	require.NoError(t, b.Validate())
	first, err1 := fuzzDecode(it, b)
	second, err2 := fuzzDecode(NewIter(IterOptions{MaxDecompressedBytes: fuzzLimit}), b)
	require.Equal(t, first, second, "decoding twice differs")
	require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2))
	if err1 != nil {
		var ce *CorruptBatchError
		var se *DecompressedSizeError
		require.True(t, errors.As(err1, &ce) || errors.As(err1, &se), "untyped %T %v", err1, err1)
	}

	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(b.Bytes()), "franz-go rejects a valid batch")
	requireSameHeader(t, kb, b)
	if b.Compression() != CompressionNone || err1 != nil {
		return
	}
	_, krecs, err := kmsgParse(b.Bytes())
	require.NoError(t, err, "franz-go rejects records we accept")
	require.Len(t, krecs, len(first))
	it.Reset(b)
	for i := 0; it.Next(); i++ {
		requireSameRecord(t, &krecs[i], b, it.Record())
	}
	require.NoError(t, it.Err())
}

// fuzzDecode renders every record of b as text, for comparison.
func fuzzDecode(it *Iter, b Batch) ([]string, error) {
	it.Reset(b)
	var out []string
	for it.Next() {
		r := it.Record()
		s := fmt.Sprintf("%d %d %d %d key=%q/%v value=%q/%v", r.Offset, r.OffsetDelta, r.Timestamp,
			r.Attributes, r.Key, r.Key == nil, r.Value, r.Value == nil)
		for h := r.Headers(); h.Next(); {
			s += fmt.Sprintf(" h[%q]=%q/%v", h.Key(), h.Value(), h.Value() == nil)
		}
		out = append(out, s)
	}
	return out, it.Err()
}

type fuzzSeed struct {
	name string
	data []byte
}

// fuzzSeeds returns the seed inputs: valid batches of every codec, a
// control batch, concatenations, a torn tail and a bad CRC.
func fuzzSeeds(t testing.TB) []fuzzSeed {
	var seeds []fuzzSeed
	add := func(name string, data []byte) { seeds = append(seeds, fuzzSeed{name, data}) }
	for _, c := range allCodecs {
		opts := DefaultBuilderOptions()
		opts.BaseOffset = 10
		opts.Compression = c
		add("valid-"+c.String(), build(t, opts, mixedRecords()[:5]...))
	}
	opts := DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 3, 1, 0, true
	opts.TimestampType, opts.LogAppendTime = LogAppendTime, 99
	add("transactional-log-append-time", build(t, opts, numbered(3, 0)...))
	marker, err := AppendEndTxnBatch(nil, opts, 5, ControlCommit, 2)
	require.NoError(t, err)
	add("control-commit", marker)

	segment, starts := concat(t, 4)
	add("concat-4", segment)
	add("torn-tail", segment[:starts[3]+30])
	badCRC := append([]byte{}, segment...)
	badCRC[starts[2]+40] ^= 0x10
	add("bad-crc", badCRC)
	add("garbage-length", append(append([]byte{}, segment[:starts[1]]...), bytes.Repeat([]byte{0xff}, 20)...))
	add("empty-batch", rawBatch(nil, 0, 4))
	add("short", segment[:11])
	return seeds
}

var genCorpus = flag.Bool("gen-corpus", false, "rewrite testdata/fuzz/{FuzzScan,FuzzBatch} from fuzzSeeds")

// TestGenerateFuzzCorpus writes the seed corpus committed under
// testdata/fuzz when run with -gen-corpus; otherwise it checks that the
// committed files still parse as valid seeds.
func TestGenerateFuzzCorpus(t *testing.T) {
	for _, target := range []string{"FuzzScan", "FuzzBatch"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if *genCorpus {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, s := range fuzzSeeds(t) {
				data := s.data
				if target == "FuzzBatch" {
					b, err := ReadBatch(data)
					if err != nil {
						continue
					}
					data = b.Bytes()
				}
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(body), 0o644))
			}
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.NotEmpty(t, entries, "%s has no committed corpus; run with -gen-corpus", dir)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(b, []byte("go test fuzz v1\n")), e.Name())
		}
	}
}
