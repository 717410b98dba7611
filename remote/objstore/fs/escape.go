package fs

import (
	"fmt"
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
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

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
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
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

// names returns the directory names and the file name of a valid key.
func names(key string) (dirs []string, file string, err error) {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		name := escape(seg)
		if i < len(segs)-1 {
			name += dirSuffix
		}
		if len(name) > maxNameLen {
			return nil, "", fmt.Errorf("%w: segment %q is %d bytes as a file name, more than %d",
				objstore.ErrInvalidKey, seg, len(name), maxNameLen)
		}
		if i < len(segs)-1 {
			dirs = append(dirs, name)
		} else {
			file = name
		}
	}
	return dirs, file, nil
}
