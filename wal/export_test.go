package wal

import "time"

// UploadBackoffForTesting returns a draw of the wait before retry
// attempt+1 of a Put.
func (w *Writer) UploadBackoffForTesting(attempt int) time.Duration { return w.uploadBackoff(attempt) }
