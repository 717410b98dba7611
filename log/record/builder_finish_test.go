package record

import (
	"bytes"
	"fmt"
	"testing"
)

// TestFinishMatchesAppendTo: Finish returns the bytes AppendTo appends,
// for every codec, across Resets of one Builder; an uncompressed batch is
// the Builder's own buffer (no copy), so the next Reset reuses it.
func TestFinishMatchesAppendTo(t *testing.T) {
	bl := NewBuilder(DefaultBuilderOptions())
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		for round := range 2 {
			opts := DefaultBuilderOptions()
			opts.Compression = c
			bl.Reset(opts)
			for i := range 5 + round {
				bl.Add(1000+int64(i), []byte("k"), bytes.Repeat([]byte{byte(i)}, 300))
			}
			want, err := bl.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := bl.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v round %d: Finish differs from AppendTo", c, round)
			}
			b, err := ReadBatch(got)
			if err != nil || b.Validate() != nil {
				t.Fatalf("%v: finished batch does not validate: %v %v", c, err, b.Validate())
			}
			if c == CompressionNone && &got[HeaderSize] != &bl.records()[0] {
				t.Fatalf("uncompressed Finish copied the records")
			}
		}
	}
	bl.Reset(DefaultBuilderOptions())
	if _, err := bl.Finish(); err == nil {
		t.Fatal("Finish of an empty Builder succeeded")
	}
	var zero Builder // usable without NewBuilder, as before
	zero.Add(1, nil, []byte("v"))
	if got, err := zero.Finish(); err != nil || len(got) == 0 {
		t.Fatal(fmt.Sprint("zero Builder: ", err))
	}
}
