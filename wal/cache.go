package wal

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// ObjectCache keeps whole WAL objects in memory, least recently used
// first out, bounded by their total bytes. A Writer fills it with every
// object it commits (write-through), so that a Reader on the same broker
// serves tail reads without a GET. Objects are immutable, so a cached copy
// is never stale; a deleted object's entry ages out.
//
// It is safe for concurrent use. The cached slices are shared: callers
// must not modify them (the Reader copies before it rewrites offsets).
type ObjectCache struct {
	maxBytes     int64
	hits, misses atomic.Int64

	mu struct {
		sync.Mutex
		entries map[string]*list.Element // of *cacheEntry
		lru     *list.List               // front = most recently used
		bytes   int64
	}
}

type cacheEntry struct {
	key  string
	data []byte
}

// NewObjectCache returns a cache of at most maxBytes bytes (an object
// larger than that is not cached).
func NewObjectCache(maxBytes int64) *ObjectCache {
	c := &ObjectCache{maxBytes: maxBytes}
	c.mu.entries = map[string]*list.Element{}
	c.mu.lru = list.New()
	return c
}

// Get returns the cached object and true, or nil and false.
func (c *ObjectCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.entries[key]
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	c.mu.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).data, true
}

// Put caches data under key, evicting the least recently used objects to
// stay within the bound.
func (c *ObjectCache) Put(key string, data []byte) {
	size := int64(len(data))
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.entries[key]; ok {
		c.mu.lru.MoveToFront(el)
		return
	}
	for c.mu.bytes+size > c.maxBytes {
		c.removeLocked(c.mu.lru.Back())
	}
	c.mu.entries[key] = c.mu.lru.PushFront(&cacheEntry{key: key, data: data})
	c.mu.bytes += size
}

// Remove drops key, if cached.
func (c *ObjectCache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.entries[key]; ok {
		c.removeLocked(el)
	}
}

// REQUIRES: c.mu held.
func (c *ObjectCache) removeLocked(el *list.Element) {
	e := c.mu.lru.Remove(el).(*cacheEntry)
	delete(c.mu.entries, e.key)
	c.mu.bytes -= int64(len(e.data))
}

// CacheMetrics is a snapshot of an ObjectCache's counters.
type CacheMetrics struct {
	Hits, Misses   int64
	Objects, Bytes int64
}

// Metrics returns a snapshot of the counters.
func (c *ObjectCache) Metrics() CacheMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheMetrics{Hits: c.hits.Load(), Misses: c.misses.Load(),
		Objects: int64(len(c.mu.entries)), Bytes: c.mu.bytes}
}
