package fs

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tierlog/tierlog/remote/objstore"
)

const (
	// dirSuffix ends every directory name. Escaped segments never hold
	// '~', so a directory (key prefix "a/") and a file (key "a") never
	// share a name.
	dirSuffix = "~"
	// tempPrefix starts every temp file. Escaped segments never start
	// with '.'.
	tempPrefix = ".tmp-"
	// maxNameLen is the longest file name most file systems accept.
	maxNameLen = 255
)

// escape turns one key segment into a file name: bytes a-z, 0-9, '-',
// '_' and '.' (except a leading '.') stay, every other byte becomes %XX.
// Upper-case letters are escaped too, so that keys differing only in case
// stay apart on case-insensitive file systems (macOS, Windows).
func escape(seg string) string {
	var b strings.Builder
	b.Grow(escapedLen(seg))
	writeEscaped(&b, seg)
	return b.String()
}

// kept reports whether escape keeps byte c at index i of a segment:
// a-z, 0-9, '-', '_', and '.' unless leading.
func kept(c byte, i int) bool { return plain[c] && (c != '.' || i > 0) }

// plain holds the bytes escape keeps anywhere but at the start ('.' is
// kept only after it).
var plain = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['-'], t['_'], t['.'] = true, true, true
	return t
}()

// unescape inverts escape; ok is false for a name escape cannot produce
// (a foreign file), which listings skip.
func unescape(name string) (seg string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '%':
			if i+2 >= len(name) {
				return "", false
			}
			hi, ok1 := unhex(name[i+1])
			lo, ok2 := unhex(name[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		case kept(c, i):
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	seg = b.String()
	if seg == "" || seg == "." || seg == ".." || escape(seg) != name {
		return "", false
	}
	return seg, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// joinPath returns root joined with the path of a valid key: a separator
// and escaped name per segment, directory names ending in dirSuffix. The
// names need no cleaning: a valid key has no empty, "." or ".." segment,
// and escaped names hold no separator. One allocation: the length is
// counted first (a Get builds this path on every call).
func joinPath(root, key string) (string, error) {
	n := len(root)
	for rest := key; ; {
		seg, tail, isDir := strings.Cut(rest, "/")
		name := escapedLen(seg)
		if isDir {
			name += len(dirSuffix)
		}
		if name > maxNameLen {
			return "", fmt.Errorf("%w: segment %q is %d bytes as a file name, more than %d",
				objstore.ErrInvalidKey, seg, name, maxNameLen)
		}
		n += 1 + name
		if !isDir {
			break
		}
		rest = tail
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(root)
	for rest := key; ; {
		seg, tail, isDir := strings.Cut(rest, "/")
		b.WriteByte(filepath.Separator)
		writeEscaped(&b, seg)
		if !isDir {
			return b.String(), nil
		}
		b.WriteString(dirSuffix)
		rest = tail
	}
}

// escapedLen returns len(escape(seg)).
func escapedLen(seg string) int {
	n := len(seg)
	for i := 0; i < len(seg); i++ {
		if !kept(seg[i], i) {
			n += 2
		}
	}
	return n
}

// writeEscaped writes escape(seg) to b.
func writeEscaped(b *strings.Builder, seg string) {
	const hex = "0123456789ABCDEF"
	run := 0
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; !kept(c, i) {
			b.WriteString(seg[run:i])
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			run = i + 1
		}
	}
	b.WriteString(seg[run:])
}
