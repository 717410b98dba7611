package record

// ScannerOptions configures a Scanner. The zero value is the default.
type ScannerOptions struct {
	// MaxBatchBytes is the largest batch size accepted. A batch declaring
	// more is corruption, not a torn tail: a crash cannot produce a
	// length no writer would write, so Kafka's log recovery treats it as
	// garbage. 0 means MaxBatchSize (no limit beyond the format's).
	// Kafka: max.message.bytes, plus LogOverhead.
	MaxBatchBytes int
	// StartPos is the position of the input's first byte in the
	// caller's file; errors and Pos report StartPos + offset in input.
	StartPos int64
	// TrustCRC skips the CRC comparison of Batch.Validate (framing, magic
	// and header checks stay): for a caller that computed the CRCs of the
	// input itself and has not let it out of its hands since (a batch
	// from Builder.Finish, appended in the same call). Never for bytes
	// read from a file or a network.
	TrustCRC bool
}

// Scanner walks the batches of a byte slice, as log recovery reads a
// segment: it yields each batch that frames and validates (Batch.Validate)
// and stops at the first that does not.
//
//	s := record.NewScanner(buf, record.ScannerOptions{MaxBatchBytes: max})
//	for s.Next() {
//		b := s.Batch()
//		...
//	}
//	keep := buf[:s.ValidBytes()] // truncate the rest
//	err := s.Err()               // nil, *TornTailError or *CorruptBatchError
//
// A Scanner does not decode records; run an Iter over a batch for that.
type Scanner struct {
	buf  []byte
	opts ScannerOptions
	// valid is the length of the prefix of buf made of yielded batches.
	valid int
	batch Batch
	err   error
}

// NewScanner returns a Scanner over buf.
func NewScanner(buf []byte, opts ScannerOptions) *Scanner {
	s := &Scanner{}
	s.Reset(buf, opts)
	return s
}

// Reset starts scanning buf from its first byte.
func (s *Scanner) Reset(buf []byte, opts ScannerOptions) {
	if opts.MaxBatchBytes <= 0 || opts.MaxBatchBytes > MaxBatchSize {
		opts.MaxBatchBytes = MaxBatchSize
	}
	*s = Scanner{buf: buf, opts: opts}
}

// Next advances to the next batch and reports whether there is a valid
// one. It returns false at the end of the input or at the first torn or
// corrupt batch; Err tells which.
func (s *Scanner) Next() bool {
	if s.err != nil {
		return false
	}
	if s.batch.b != nil {
		s.valid += s.batch.Size()
		s.batch = Batch{}
	}
	rest := s.buf[s.valid:]
	if len(rest) == 0 {
		return false
	}
	pos := s.opts.StartPos + int64(s.valid)
	if len(rest) >= LogOverhead {
		// Check the limit before the torn-tail check: an absurd length
		// is garbage even when it also runs past the end.
		if b := (Batch{b: rest}); LogOverhead+int(b.Length()) > s.opts.MaxBatchBytes {
			err := corruptf(b.BaseOffset(), "declared size %d exceeds the maximum batch size %d",
				LogOverhead+int(b.Length()), s.opts.MaxBatchBytes)
			err.Pos = pos
			s.err = err
			return false
		}
	}
	b, err := ReadBatch(rest)
	if err == nil {
		if cerr := b.validateCRC(!s.opts.TrustCRC); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		s.err = rebase(err, pos)
		return false
	}
	s.batch = b
	return true
}

// rebase sets the position of an error from ReadBatch or validate.
func rebase(err error, pos int64) error {
	switch e := err.(type) {
	case *CorruptBatchError:
		e.Pos = pos
	case *TornTailError:
		e.Pos = pos
	}
	return err
}

// Batch returns the batch the last successful Next framed. It aliases the
// input.
func (s *Scanner) Batch() Batch { return s.batch }

// Pos returns the position of the current batch (StartPos-based), or of
// the byte where scanning stopped.
func (s *Scanner) Pos() int64 { return s.opts.StartPos + int64(s.valid) }

// ValidBytes returns the length of the input prefix made of valid batches
// yielded so far, including the current one: after Next returns false, the
// length to keep (the offset of the first torn or corrupt batch).
func (s *Scanner) ValidBytes() int {
	if s.batch.b != nil {
		return s.valid + s.batch.Size()
	}
	return s.valid
}

// Err returns nil if the scan reached the end of the input cleanly, a
// *TornTailError (ErrTornTail) if the input ends inside a batch, or a
// *CorruptBatchError (ErrCorruption) for a batch that fails a check.
func (s *Scanner) Err() error { return s.err }
