package epochcache

import (
	"slices"
	"testing"
)

// ParseEntries reads what FormatEntries and the tools print, and refuses
// anything else.
func TestParseEntries(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Entry
	}{
		{"", nil}, {"(empty)", nil}, {"3@8", []Entry{{3, 8}}},
		{"2@6,3@8", []Entry{{2, 6}, {3, 8}}}, {"2@6 3@8", []Entry{{2, 6}, {3, 8}}},
	} {
		got, err := ParseEntries(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseEntries(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	es := []Entry{{0, 0}, {4, 40}, {2147483647, 1 << 62}}
	if got, err := ParseEntries(FormatEntries(es)); err != nil || !slices.Equal(got, es) {
		t.Errorf("round trip of %v: %v, %v", es, got, err)
	}
	for _, bad := range []string{"3", "3@", "@8", "x@8", "3@8x", "2147483648@0", "3@8,,4@9x"} {
		if _, err := ParseEntries(bad); err == nil {
			t.Errorf("ParseEntries(%q): no error", bad)
		}
	}
}
