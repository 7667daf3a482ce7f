// Package wake holds the one-slot wake-up channels of completion queues
// and work queues: a waiter blocks on a chan struct{} of capacity 1, and
// whoever completes something signals it without ever blocking. A signal
// sent while nobody waits is kept, so the next waiter does not sleep
// through it; signals sent meanwhile merge into that one.
package wake

// Signal wakes one waiter on c (a channel of capacity 1) without blocking.
func Signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Take consumes a signal pending on c without blocking and reports
// whether there was one.
func Take(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
