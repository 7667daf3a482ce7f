//go:build race

package bonding

// The race detector cannot see the order that frames through a kernel
// socket give: a peer's next RDMA write into a buffer the test has read
// looks like a race to it.
const raceEnabled = true
