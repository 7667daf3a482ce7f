package mplite

// This file is mplite's registration cache for the user buffers of the
// handshake protocol (MP_Lite's "last few registrations", thesis 3.7). It
// sits on the VI provider's RegisterMemory, which does not yet use
// rdma.Table; once it does, this file becomes a thin wrapper of rdma.Cache
// and nothing else in the package changes.

import (
	"fmt"
	"unsafe"

	"github.com/ethervia/ethervia/descriptors"
	"github.com/ethervia/ethervia/vi"
)

// regEntry is one registered buffer: invalid (not in the cache), in use
// (users > 0) or cached (users == 0, on the LRU list).
type regEntry struct {
	buf        []byte
	base       uintptr
	h          descriptors.MemHandle
	users      int
	cached     bool // in entries; false for an overflow registration
	prev, next *regEntry
}

// offset returns the offset of b inside e's buffer.
func (e *regEntry) offset(b []byte) uint64 { return uint64(bufAddr(b) - e.base) }

// regCache looks up a buffer before registering it; entries not in use are
// evicted least recently used first. It is used under Comm.mu.
type regCache struct {
	p          *vi.Provider
	ptag       vi.PTag
	access     vi.Access
	maxEntries int
	maxBytes   int64

	entries map[uintptr]*regEntry
	lru     regEntry // sentinel: lru.next is the most recent
	bytes   int64
	hits    uint64
	misses  uint64
}

func bufAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func newRegCache(p *vi.Provider, ptag vi.PTag, access vi.Access, maxEntries int, maxBytes int64) *regCache {
	rc := &regCache{p: p, ptag: ptag, access: access, maxEntries: maxEntries, maxBytes: maxBytes,
		entries: make(map[uintptr]*regEntry)}
	rc.lru.next, rc.lru.prev = &rc.lru, &rc.lru
	return rc
}

func (rc *regCache) unlink(e *regEntry) {
	if e.prev != nil {
		e.prev.next, e.next.prev = e.next, e.prev
		e.prev, e.next = nil, nil
	}
}

// get returns a registration covering buf (non-empty) and holds it until
// put.
func (rc *regCache) get(buf []byte) (*regEntry, error) {
	a := bufAddr(buf)
	end := a + uintptr(len(buf))
	if e := rc.entries[a]; e != nil && uintptr(len(e.buf)) >= uintptr(len(buf)) {
		rc.hits++
		rc.unlink(e)
		e.users++
		return e, nil
	}
	// A buffer inside a registered one (a slice of it) is a hit too.
	for _, e := range rc.entries {
		if a >= e.base && end <= e.base+uintptr(len(e.buf)) {
			rc.hits++
			rc.unlink(e)
			e.users++
			return e, nil
		}
	}
	rc.misses++
	if old := rc.entries[a]; old != nil && old.users == 0 {
		rc.evict(old) // same start, too short: replace it
	}
	for len(rc.entries)+1 > rc.maxEntries || rc.bytes+int64(len(buf)) > rc.maxBytes {
		victim := rc.lru.prev
		if victim == &rc.lru {
			break // everything is in use: register without caching
		}
		rc.evict(victim)
	}
	h, err := rc.p.RegisterMemory(buf, rc.ptag, rc.access)
	if err != nil {
		return nil, fmt.Errorf("mplite: register %d bytes: %w", len(buf), err)
	}
	e := &regEntry{buf: buf, base: a, h: h, users: 1}
	if rc.entries[a] == nil && len(rc.entries) < rc.maxEntries && rc.bytes+int64(len(buf)) <= rc.maxBytes {
		e.cached = true
		rc.entries[a] = e
		rc.bytes += int64(len(buf))
	}
	return e, nil
}

// put releases a registration from get.
func (rc *regCache) put(e *regEntry) {
	if e == nil || e.users == 0 {
		return
	}
	e.users--
	if e.users > 0 {
		return
	}
	if !e.cached {
		_ = rc.p.DeregisterMemory(e.h)
		return
	}
	e.prev, e.next = &rc.lru, rc.lru.next
	rc.lru.next.prev = e
	rc.lru.next = e
}

func (rc *regCache) evict(e *regEntry) {
	rc.unlink(e)
	delete(rc.entries, e.base)
	rc.bytes -= int64(len(e.buf))
	e.cached = false
	_ = rc.p.DeregisterMemory(e.h)
}

// flush deregisters every cached entry not in use.
func (rc *regCache) flush() {
	for rc.lru.prev != &rc.lru {
		rc.evict(rc.lru.prev)
	}
}
