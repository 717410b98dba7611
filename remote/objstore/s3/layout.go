package s3

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// layout maps objstore keys to S3 object names and back:
//
//		name = Prefix + salt(key) + enc(key)
//
//	  - Prefix is Options.KeyPrefix, verbatim.
//	  - salt(key) is empty, or (Options.SaltHexDigits = d > 0) the first d
//	    hex digits of FNV-1a-64 over the key's first '/'-separated segment,
//	    then '/'. Every object of one partition directory ("orders-0/...")
//	    shares a salt, so a listing of a partition is one S3 listing, while
//	    different partitions spread over 16^d prefixes (S3 scales request
//	    rates per prefix). A List whose prefix holds no '/' cannot know the
//	    salt and fans out to all 16^d salts, merging the pages.
//	  - enc(key) is the key itself, or (Options.PathSafeKeys) an
//	    order-preserving escape that lets "a" and "a/b" coexist on servers
//	    that store objects as files (versitygw's posix backend): every byte
//	    in 0x01..0x22 ('"' and below, which includes ' ' and '!') becomes
//	    '"' followed by the byte plus 0x40, and the key ends with '!'. So
//	    "a" is stored as the file "a!" and "a/b" as "a/b!" under a directory
//	    "a". The escape is a prefix-free code that keeps byte order, and '!'
//	    sorts below every code, so the names sort exactly as the keys do and
//	    key prefixes are name prefixes: List needs no re-sorting. A name
//	    that would pass S3's 1024 bytes with the '!' goes without it (no
//	    other key can sit below it), so a 1024-byte key still fits when
//	    there is no prefix and no salt.
//
// S3 names are at most 1024 bytes, so the longest key is 1024 minus
// len(KeyPrefix), minus d+1 with a salt, minus one byte per escaped byte
// with PathSafeKeys; a longer key fails with ErrInvalidKey.
type layout struct {
	prefix    string
	saltDigit int
	pathSafe  bool
}

const (
	escapeByte = '"'
	endByte    = '!'
)

// salts returns every salt of the layout ("" when unsalted).
func (l layout) salts() []string {
	if l.saltDigit == 0 {
		return []string{""}
	}
	n := 1 << (4 * l.saltDigit)
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%0*x/", l.saltDigit, i)
	}
	return out
}

// saltOf returns the salt of a key or of a prefix holding a '/' (both
// determine the first segment).
func (l layout) saltOf(key string) string {
	if l.saltDigit == 0 {
		return ""
	}
	first, _, _ := strings.Cut(key, "/")
	h := fnv.New64a()
	h.Write([]byte(first))
	return fmt.Sprintf("%016x", h.Sum64())[:l.saltDigit] + "/"
}

// listSalts returns the salts a listing of prefix must visit.
func (l layout) listSalts(prefix string) []string {
	if l.saltDigit == 0 {
		return []string{""}
	}
	if strings.Contains(prefix, "/") {
		return []string{l.saltOf(prefix)}
	}
	return l.salts()
}

// maxNameLen is S3's longest object name in bytes (minio-go enforces it).
const maxNameLen = 1024

// name returns the S3 object name of a key; ok is false when it would be
// longer than S3 allows.
func (l layout) name(key string) (string, bool) {
	salt := l.saltOf(key)
	n := l.prefix + salt + l.encodeKey(len(l.prefix)+len(salt), key)
	return n, len(n) <= maxNameLen
}

// encodeKey encodes a whole key (or a startAfter bound) that follows head
// bytes of prefix and salt. With PathSafeKeys it ends in endByte, unless
// that would make the name longer than S3 allows: such a name cannot be a
// directory of any other key's name (which would be longer still), so it
// needs no end mark, and leaving it off keeps order (a name that is a
// proper prefix of another sorts first either way).
func (l layout) encodeKey(head int, key string) string {
	if !l.pathSafe {
		return key
	}
	enc := l.encodePrefix(key)
	if head+len(enc)+1 > maxNameLen {
		return enc
	}
	return enc + string(endByte)
}

// encodePrefix encodes a key prefix: k starts with p iff encodeKey(k)
// starts with encodePrefix(p).
func (l layout) encodePrefix(p string) string {
	if !l.pathSafe {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 1)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= escapeByte {
			b.WriteByte(escapeByte)
			b.WriteByte(c + 0x40)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// key decodes an S3 object name listed under salt; ok is false for names
// not written by this layout (foreign objects, which List skips).
func (l layout) key(name, salt string) (string, bool) {
	enc, ok := strings.CutPrefix(name, l.prefix+salt)
	if !ok {
		return "", false
	}
	if !l.pathSafe {
		return enc, true
	}
	if e, ok := strings.CutSuffix(enc, string(endByte)); ok {
		enc = e
	} else if len(name) < maxNameLen {
		return "", false // only names at S3's limit go without the end mark
	}
	var b strings.Builder
	b.Grow(len(enc))
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == escapeByte:
			if i+1 == len(enc) || enc[i+1] < 0x41 || enc[i+1] > escapeByte+0x40 {
				return "", false
			}
			b.WriteByte(enc[i+1] - 0x40)
			i++
		case c < escapeByte:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
