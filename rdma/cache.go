package rdma

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrCacheFull reports that a registration would exceed the cache's bounds
// and every entry is in use, so nothing can be evicted.
var ErrCacheFull = errors.New("rdma: registration cache full of entries in use")

// EntryState is the state of a cache entry, as in MP_Lite's dynamic
// registration: invalid (not registered), cached (registered, unused) or in
// use (registered and held by a transfer).
type EntryState int

// Entry states.
const (
	Invalid EntryState = iota
	Cached
	InUse
)

// CacheStats count the cache's work.
type CacheStats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes                   int64
}

// cacheEntry is a registered buffer. While cached (no users) it sits on
// the cache's LRU list; the list is intrusive, so a hit allocates nothing.
type cacheEntry struct {
	region     *Region
	base, end  uintptr
	users      int
	prev, next *cacheEntry // LRU links while cached; nil while in use
}

// Cache looks up a buffer's registration before registering it, so a
// buffer used for many large messages is registered once. Entries not in use
// are evicted least recently used first when the bounds would be exceeded;
// entries in use never are. It is safe for concurrent use.
type Cache struct {
	table      Registry
	tag        PTag
	access     Access
	maxEntries int
	maxBytes   int64

	mu      sync.Mutex
	entries map[uintptr]*cacheEntry // by buffer start address
	lru     cacheEntry              // sentinel: lru.next is the most recent
	bytes   int64
	stats   CacheStats
}

// Registry is where a Cache registers its buffers: a Table, or something
// that registers in several tables at once (a bond registers on every rail
// and names the region by one rail's).
type Registry interface {
	Register(buf []byte, tag PTag, acc Access) (*Region, error)
	Deregister(r *Region) error
}

// NewCache returns a cache that registers buffers in t under tag with the
// given rights, holding at most maxEntries regions and maxBytes bytes.
func NewCache(t Registry, tag PTag, acc Access, maxEntries int, maxBytes int64) *Cache {
	c := &Cache{table: t, tag: tag, access: acc, maxEntries: maxEntries, maxBytes: maxBytes,
		entries: make(map[uintptr]*cacheEntry)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

func key(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Get returns a region covering buf and marks it in use until Put. A buffer
// that starts a registered one, or lies inside one (a slice of it), is a hit.
// Go's collector does not move heap objects, so a buffer's address names
// it. A hit allocates nothing.
func (c *Cache) Get(buf []byte) (*Region, error) {
	if len(buf) == 0 {
		return nil, ErrEmpty
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key(buf)
	end := k + uintptr(len(buf))
	if e, ok := c.entries[k]; ok {
		if end <= e.end {
			c.stats.Hits++
			c.use(e)
			return e.region, nil
		}
		// Too small: replace it if nobody holds it.
		if e.users > 0 {
			return nil, fmt.Errorf("rdma: cache: %d-byte buffer: %w", len(buf), ErrCacheFull)
		}
		if err := c.evict(e); err != nil {
			return nil, err
		}
	}
	for _, e := range c.entries {
		if k >= e.base && end <= e.end {
			c.stats.Hits++
			c.use(e)
			return e.region, nil
		}
	}
	c.stats.Misses++
	for c.overBounds(len(buf)) {
		back := c.lru.prev
		if back == &c.lru {
			if c.aloneTooBig(len(buf)) {
				// It could never fit: register it anyway, over the
				// bound until it is released and evicted, rather than
				// refuse a message for its size.
				break
			}
			return nil, fmt.Errorf("rdma: cache: %d-byte buffer: %w", len(buf), ErrCacheFull)
		}
		if err := c.evict(back); err != nil {
			return nil, err
		}
		c.stats.Evictions++
	}
	r, err := c.table.Register(buf, c.tag, c.access)
	if err != nil {
		return nil, fmt.Errorf("rdma: cache: %w", err)
	}
	e := &cacheEntry{region: r, base: k, end: end}
	c.entries[k] = e
	c.bytes += int64(len(buf))
	c.use(e)
	return r, nil
}

// aloneTooBig reports whether a buffer of n bytes exceeds the bytes bound
// by itself.
func (c *Cache) aloneTooBig(n int) bool { return c.maxBytes > 0 && int64(n) > c.maxBytes }

func (c *Cache) overBounds(n int) bool {
	return (c.maxEntries > 0 && len(c.entries)+1 > c.maxEntries) ||
		(c.maxBytes > 0 && c.bytes+int64(n) > c.maxBytes)
}

func (c *Cache) use(e *cacheEntry) {
	c.unlink(e)
	e.users++
}

// unlink takes e off the LRU list if it is on it.
func (c *Cache) unlink(e *cacheEntry) {
	if e.prev != nil {
		e.prev.next, e.next.prev = e.next, e.prev
		e.prev, e.next = nil, nil
	}
}

func (c *Cache) evict(e *cacheEntry) error {
	if err := c.table.Deregister(e.region); err != nil {
		return fmt.Errorf("rdma: cache: evict: %w", err)
	}
	c.unlink(e)
	delete(c.entries, e.base)
	c.bytes -= int64(e.region.Len())
	return nil
}

// Put returns a region obtained from Get. When its last user puts it, it
// becomes cached and evictable.
func (c *Cache) Put(r *Region) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key(r.buf)]
	if !ok || e.region != r || e.users == 0 {
		return
	}
	e.users--
	if e.users == 0 {
		e.prev, e.next = &c.lru, c.lru.next
		c.lru.next.prev = e
		c.lru.next = e
	}
}

// State returns the state of buf's entry.
func (c *Cache) State(buf []byte) EntryState {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key(buf)]
	switch {
	case !ok:
		return Invalid
	case e.users > 0:
		return InUse
	default:
		return Cached
	}
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = len(c.entries)
	s.Bytes = c.bytes
	return s
}

// Flush deregisters every cached entry; entries in use stay.
func (c *Cache) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for c.lru.prev != &c.lru {
		if err := c.evict(c.lru.prev); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}
