package fs

import (
	"io"
	"os"
)

// writeAll writes r (which yields exactly size bytes, then io.EOF) to f.
// A body longer than one copy buffer is copied in a pipeline: a second
// goroutine fills the next buffer while this one writes the last, so the
// cost of producing the bytes (a copy from the source's page cache, a
// checksum computed as a segment is read) overlaps the write instead of
// adding to it. Two buffers circulate; the reader goroutine has ended
// when writeAll returns, so r is not read after it.
func writeAll(f *os.File, r io.Reader, size int64) error {
	first := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(first)
	if size <= int64(len(*first)) {
		// The struct hides (*os.File).ReadFrom, whose fallback for a
		// non-file source copies in 32 KiB writes.
		_, err := io.CopyBuffer(struct{ io.Writer }{f}, r, *first)
		return err
	}
	second := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(second)

	type filled struct {
		buf  *[]byte
		n    int
		err  error // io.EOF: the last buffer
		last bool
	}
	free := make(chan *[]byte, 2)
	full := make(chan filled, 2) // never blocks: two buffers circulate
	stop := make(chan struct{})
	free <- first
	free <- second
	go func() {
		defer close(full)
		for {
			var b *[]byte
			select {
			case b = <-free:
			case <-stop:
				return
			}
			n, err := io.ReadFull(r, *b)
			switch err {
			case nil:
				full <- filled{buf: b, n: n}
				continue
			case io.EOF, io.ErrUnexpectedEOF:
				full <- filled{buf: b, n: n, last: true}
			default:
				full <- filled{buf: b, n: n, err: err, last: true}
			}
			return
		}
	}()
	var err error
	for c := range full {
		if err == nil && c.n > 0 {
			_, err = f.Write((*c.buf)[:c.n])
		}
		if err == nil {
			err = c.err
		}
		if c.last {
			continue // full closes next
		}
		if err != nil {
			close(stop)
			for range full { // wait for the reader's last read
			}
			return err
		}
		free <- c.buf
	}
	return err
}
