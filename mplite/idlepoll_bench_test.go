package mplite

import (
	"fmt"
	"testing"
)

// BenchmarkIdleProgress: one empty progress round of rank 0 of an 8-rank
// world, every connection up, over one NIC and over a bond of two (short
// messages on lanes). A rank that waits repeats it between yields, so on
// a host whose ranks share CPUs its cost is the delay every other rank's
// frame waits for.
func BenchmarkIdleProgress(b *testing.B) {
	for _, rails := range []int{1, 2} {
		b.Run(fmt.Sprintf("rails=%d", rails), func(b *testing.B) {
			var opts []Option
			if rails > 1 {
				opts = append(opts, WithLocalRails(rails))
			}
			comms, err := NewLocalWorld(8, opts...)
			if err != nil {
				b.Fatal(err)
			}
			errc := make(chan error, len(comms))
			for _, c := range comms {
				go func() { errc <- c.Barrier() }()
			}
			for range comms {
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			}
			c := comms[0]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.mu.Lock()
				c.progressFor(nil)
				c.mu.Unlock()
			}
			b.StopTimer()
			for _, c := range comms {
				go func() { errc <- c.Finalize() }()
			}
			for range comms {
				<-errc
			}
		})
	}
}
