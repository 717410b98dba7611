package segment

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// maxIovecs bounds the buffers of one vectored read (Linux's IOV_MAX is
// 1024).
const maxIovecs = 1024

// ReadvAt reads consecutive bytes of the log file from off into bufs, one
// after the other, as ReadAt would into their concatenation: a remote
// copy reads the segment straight into its framed layout (each block in
// front of the trailer its checksum goes to) with one vectored pread per
// upload read, rather than one pread per block or a read and a copy. It
// returns the bytes read; fewer than the buffers hold only with an error
// (io.EOF when the segment ends first). A file without a descriptor
// (vfs.NewMem) is read buffer by buffer.
func (s *Segment) ReadvAt(bufs [][]byte, off int64) (int, error) {
	want := 0
	for _, b := range bufs {
		want += len(b)
	}
	n, err := s.span(off, want)
	if err != nil || n == 0 {
		return 0, err
	}
	// Cut the buffers at the segment's end.
	cut := bufs
	if n < want {
		cut = make([][]byte, 0, len(bufs))
		for left := n; left > 0; {
			b := bufs[len(cut)]
			b = b[:min(len(b), left)]
			cut = append(cut, b)
			left -= len(b)
		}
	}
	if err := s.readvAt(cut, off); err != nil {
		return 0, err
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// readvAt fills bufs from pos, or fails with an I/O error.
func (s *Segment) readvAt(bufs [][]byte, pos int64) error {
	fd := s.logFile.Fd()
	if fd == vfs.InvalidFd || !readvSupported {
		for _, b := range bufs {
			if err := s.readAt(b, pos); err != nil {
				return err
			}
			pos += int64(len(b))
		}
		return nil
	}
	for len(bufs) > 0 {
		batch := bufs[:min(len(bufs), maxIovecs)]
		got, err := preadv(fd, batch, pos)
		if got == 0 && err == nil {
			err = io.ErrUnexpectedEOF // the file is shorter than its size
		}
		if err != nil {
			return ioErr("read", s.logPath, err)
		}
		pos += int64(got)
		// Drop the buffers filled; a short read resumes inside one.
		for got > 0 {
			if got >= len(bufs[0]) {
				got -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			rest := append([][]byte{bufs[0][got:]}, bufs[1:]...)
			bufs, got = rest, 0
		}
	}
	return nil
}
