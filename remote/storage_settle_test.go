package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

// serverLikeStore is a store whose indexes Put, once the client gives up
// on it (its context cancelled), still takes effect later, as a server
// that received the whole request applies it after the client closed the
// connection. Its data Put fails, but only once the indexes Put is under
// way.
type serverLikeStore struct {
	objstore.Store
	indexesStarted chan struct{}
	dataFailed     chan struct{}
	failOnce       sync.Once
	late           sync.WaitGroup
	applyLate      chan struct{} // closed by the test: late Puts land
}

func (s *serverLikeStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	switch {
	case strings.HasSuffix(key, "indexes"):
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		close(s.indexesStarted)
		<-s.dataFailed
		// The answer waits until the client gives up, when it can: a
		// copy that cancels its other uploads once one fails does so
		// right after the data Put's error, which without this wait
		// could come after the check below (the test then passed with
		// the guard off: seen once in the mutation check). A client whose
		// context is never done waits for every answer.
		if done := ctx.Done(); done != nil {
			<-done
		}
		if ctx.Err() == nil {
			return s.Store.Put(context.Background(), key, bytes.NewReader(b), size, opts)
		}
		s.late.Add(1)
		go func() {
			defer s.late.Done()
			<-s.applyLate
			_ = s.Store.Put(context.Background(), key, bytes.NewReader(b), size, opts)
		}()
		return ctx.Err()
	case strings.Contains(key, "data"):
		<-s.indexesStarted
		s.failOnce.Do(func() { close(s.dataFailed) })
		return errors.New("injected: data put failed")
	}
	return s.Store.Put(ctx, key, r, size, opts)
}

// A failed copy does not return while one of its uploads is still in
// flight: a cancelled request may still be applied by the store, after
// the cleanup of the failed copy listed the segment's objects, and leave
// an object of no segment behind (seen against the S3 test server with
// faults, under load). The copy waits for every upload's answer, so the
// cleanup that follows it deletes everything the copy stored.
func TestFailedCopySettlesItsUploads(t *testing.T) {
	store := &serverLikeStore{Store: newMemStore(), indexesStarted: make(chan struct{}),
		dataFailed: make(chan struct{}), applyLate: make(chan struct{})}
	s := newTestStorage(t, store, StorageOptions{ChunkSize: 700, DataObjectBytes: 2000})
	c := newTestCopy(storageTopic, 3, 0, 5000, false)
	ctx := context.Background()
	_, err := s.CopySegment(ctx, &c.m, c.data)
	require.Error(t, err)
	require.NoError(t, s.DeleteSegment(ctx, &c.m)) // the failed copy's cleanup
	close(store.applyLate)
	store.late.Wait()
	require.Empty(t, listKeys(t, store.Store), "objects left after the cleanup of a failed copy")
}
