// Package mplite is Ethervia's message-passing layer: MP_Lite's design
// (Turner; Chen's M-VIA module) with MPI's point-to-point semantics, on the
// VI provider of package vi.
//
// Everything goes through a [Comm], a communicator of ranks. [Init]
// returns the world communicator of a rank that a launcher started
// (NewLocalWorld builds n ranks inside one process), and [Comm.Finalize]
// ends it. Point to point, [Comm.Send] and [Comm.Recv] block;
// [Comm.Isend] and [Comm.Irecv] return a [Request] to complete with
// [Request.Wait] or [Waitall]; [Comm.Sendrecv] and [Comm.Probe] are there
// too. The collectives are methods as well: [Comm.Barrier], [Comm.Bcast],
// [Comm.Reduce], [Comm.Allreduce], [Comm.Gather], [Comm.Scatter],
// [Comm.Allgather], [Comm.Alltoall], their v variants, [Comm.Scan] and
// [Comm.Exscan], with typed helpers such as [Allreduce]; [Comm.Split]
// makes sub-communicators; package mplite/cc computes the CC-MPI schedules
// of the phased all-to-alls. The package example is an MPI hello world.
//
// A job is a world of Size ranks. Init builds the world from the
// environment a launcher sets (mprun, MPICH's Hydra, Open MPI, Slurm) and
// finds the other ranks' MAC addresses by raw-Ethernet announcements under
// the job key (package mplite/bootstrap), or from a hostfile. NewLocalWorld
// builds n ranks inside one process over memnic, for tests and examples
// without root.
//
// # Protocols
//
// A message of up to the eager limit (WithEagerLimit, default 64 KiB) is
// copied behind a 40-byte envelope into a pre-registered send buffer and
// posted as one VI send. It lands in one of the receive buffers the peer
// posted for this connection; the VI layer sends only against those
// credits, so an eager message never meets a missing buffer. A longer
// message goes by handshake: a request to send (RTS) carries the envelope;
// once a matching receive is posted, the receiver registers the receive
// buffer (through a registration cache) and answers clear to send (CTS) with
// its handle; the sender writes the data with RDMA writes straight from the
// user's buffer into the user's buffer, the last one with immediate data
// naming the receive, which completes it. An unexpected large message costs
// only its envelope until its receive is posted, and its bytes are moved
// once. Two ranks that Isend large messages to each other do not deadlock:
// the CTS is the receiver's answer to an RTS, never a precondition of one.
//
// # Matching
//
// Receives match by source, tag and communicator context, with AnySource
// and AnyTag, in MPI's non-overtaking order: messages from one source that
// match one receive are matched in the order they were sent. A message
// longer than its receive buffer is an ErrTruncate error (the first
// len(buf) bytes are delivered), not MP_Lite's "one receive absorbs several
// sends". A receive with AnySource takes the unexpected messages of the
// sources in round-robin order, so no sender is starved.
//
// # Memory
//
// Each connection has a fixed set of receive and send buffers
// (WithRecvDepth; by default fewer per connection in jobs of more than 64
// ranks, so that a rank's buffers for all its peers stay within 256 MiB,
// but never fewer than 8). Unexpected eager messages are copied into temporary
// buffers of their own size (powers of two from 256 bytes), and the whole
// buffers count against WithUnexpectedLimit; past it they stay in their
// receive buffers, which are not re-posted, so the sender runs out of
// credits and waits. Nothing is lost and nothing grows without bound. (A
// program that needs more unexpected messages than that from one peer before
// it posts the receive it waits on deadlocks, as MPI allows.)
//
// # Progress
//
// Calls that wait (Wait, Recv, Send, Probe, Finalize) poll the provider for
// WithSpinTime and then block; a progress goroutine per rank drives the
// protocols while no call polls, so Isend and Irecv advance while the user
// computes. The goroutine steps aside while a call polls, so a polling call
// never hands a message to another goroutine. MPLITE_SPIN sets the spin
// time from the environment, and MPLITE_YIELD=1 (WithProcessYield) makes
// polls yield the processor to other processes, for more ranks than CPUs
// (mprun sets it then); yielding ranks spin for YieldSpinTime unless told
// otherwise, and their background goroutines look in only every 10 ms
// while calls wait.
//
// # Connections
//
// Connections open on first use: the first send to a rank, or the first
// receive naming it (a receive from AnySource opens all of them, so that a
// dead rank is noticed). Every rank listens on one discriminator. The rule
// that makes simultaneous first sends resolve to one connection: a rank that
// receives a connection request from rank q while its own request to q is
// pending accepts it if q is lower and rejects it if q is higher; the higher
// rank whose request was rejected waits for the lower rank's request. A job
// of N ranks therefore starts with O(N) bootstrap frames and builds only the
// connections it uses.
//
// # Failures
//
// A rank that dies (or exits without Finalize) is noticed by the VI layer's
// keepalives within the peer timeout (WithPeerTimeout), or at once if its
// provider closed cleanly; every operation on it, and every receive from
// AnySource, then fails with a *PeerError naming the rank (errors.Is
// ErrPeerDead). Nothing waits for ever.
//
// # Rails
//
// With several interfaces in MPLITE_IFACES (mprun -nics K), or with
// NewBondedComm or WithLocalRails, every connection is a bonded VI of
// package bonding, one rail per interface, each rail a network of its own:
// every RDMA write of the handshake is split over the live rails, and a
// rail that dies costs bandwidth, not messages. Beside the bond each
// connection has a lane, a plain VI on rail 0 that carries the messages up
// to the bond's stripe threshold (2 KiB), so that a small message costs
// what it costs over one NIC; longer ones are striped through the bond,
// and messages that overtake on the other way wait their turn. A lane that
// breaks hands what it held to the bond (Stats.LaneFailovers).
// WithBondLane(false) or MPLITE_BOND_LANE=0 sends everything through the
// bond instead; set it on every rank. Connections still open on first use:
// the rank asks on rail 0 and the other rails follow, so rail 0 must be up
// when two ranks first talk; a later rail that is down then joins when it
// comes back. Bootstrap discovery runs on every rail at once. Multicast
// collectives use rail 0 only.
package mplite
