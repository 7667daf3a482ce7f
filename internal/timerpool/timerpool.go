// Package timerpool keeps idle timers for reuse, so that a waiter that
// blocks with a timeout allocates nothing once the pool holds as many
// timers as waiters block at once.
package timerpool

import (
	"sync"
	"time"
)

// Pool is a set of stopped timers. The zero value is ready; it is safe for
// concurrent use.
type Pool struct {
	mu sync.Mutex
	ts []*time.Timer
}

// Get returns a stopped timer.
func (p *Pool) Get() *time.Timer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.ts); n > 0 {
		t := p.ts[n-1]
		p.ts = p.ts[:n-1]
		return t
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// Put returns a timer, stopped, to the pool.
func (p *Pool) Put(t *time.Timer) {
	t.Stop()
	p.mu.Lock()
	p.ts = append(p.ts, t)
	p.mu.Unlock()
}
