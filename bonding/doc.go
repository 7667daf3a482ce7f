// Package bonding stripes one logical VI connection over k NICs ("rails"),
// as MP_Lite's channel bonding did over several Fast Ethernet cards, and
// keeps the connection alive while at least one rail works.
//
// # Shape
//
// A Bond owns one vi.Provider per rail (Open). Its API mirrors package vi
// so that a vi user can switch with little change: Bond.NewPTag,
// Bond.RegisterMemory (registers on every rail and returns one bond handle),
// Bond.NewCQ, Bond.NewVI, VI.PostSend / PostRecv / SendDone / RecvDone /
// SendWait / RecvWait, CQ.Done / Wait, VI.ConnectPeer, VI.ConnectRequest
// with Bond.ConnectWait and ConnRequest.Accept (or AcceptPeer). Peers are
// named by their MAC on every rail plus a discriminator (Peer). Descriptors
// are the ordinary descriptors.Descriptor; their segments name bond
// handles.
//
// # Connections
//
// ConnectPeer connects every rail peer to peer with the discriminator.
// A requested connection is named by rail 0: VI.ConnectRequest asks on rail
// 0 only, to the peer's rail-0 MAC and the discriminator, and
// Bond.ConnectWait waits on rail 0 only, so that with an expired context it
// is a cheap poll that rejects nothing. A rejection ends ConnectRequest with
// an error matching vi.ErrRejected before any other rail asks. Once rail 0
// is accepted, the requester's rail r ≥ 1 asks at
// discriminator^RailBit^(rail-0 MAC<<8)^r, and ConnRequest.Accept, having
// accepted rail 0, waits for exactly those requests and accepts them on its
// VI's rails: Accept takes about a round trip. Since every requester's
// rails carry its own rail-0 MAC, any number of peers may connect to one
// discriminator at once without their rails being mixed up; one bond should
// not have two requests to the same peer and discriminator under way at
// once, as their rails would look alike. A ConnRequest's Remote knows only
// the rail-0 MAC; Accept learns the others from the rails' requests, and
// AcceptPeer checks them against the MACs the caller knows.
//
// Rail 0 must connect: when it does not, the connection fails (naming rail
// 0 and the peer). The other rails need not, as a rail lost costs
// bandwidth, not messages: a rail whose link is down when the connection is
// made starts down, exactly as if it had died after connecting (RailStats
// shows it not Live, its Failures counted), the connection runs on the
// others, and the rail reconnects in the background, peer to peer, once
// its link is back. The wait for those rails is bounded by the rail wait,
// PeerTimeout clamped to [100 ms, 1 s]. The acceptor waits one rail wait
// from its rail-0 Accept on; the requester, whose wait starts only once
// that Accept reached it, asks for one and a half (or until its context
// ends: once rail 0 is accepted, the call no longer fails for that), so
// that the acceptor, not the requester, normally gives up first;
// ConnectPeer waits one rail wait from rail 0 connecting on. A rail's
// request from a MAC AcceptPeer was not told of is rejected, and fails the
// connection on both ends. Should the ends still disagree
// (an Accept lost until the requester gave up, a requester's context that
// ended early, two peer requests crossing a give-up), the end that took the
// rail for live finds it broken, as any rail that dies: the requester's
// rail VI answers the late Accept with a Disconnect, and failing that the
// live end hears nothing on the rail for PeerTimeout. What it striped onto
// the rail meanwhile goes over the others, and the rail reconnects on both
// ends. Reconnecting needs the peer's MAC on the rail: a plain Accept learns
// it only from the rail's request, so a rail whose request never came stays
// down for that connection (VI.Peer has no MAC for it); AcceptPeer, told
// the MACs, reconnects it like the others.
//
// Discriminators must leave RailBit (bit 62) and ReconnectBit (bit 63)
// clear: rail reconnections use discriminator^ReconnectBit, so first
// connections' rails (bit 62 set), reconnections (bit 63 set) and rail-0 or
// peer connections (both clear) never meet one another.
//
// VI.Disconnect (or Close) aborts a connection attempt under way in another
// goroutine: the attempt fails, and Disconnect returns once it has and the
// VI is Idle, so that a peer's crossing request can be accepted on the same
// VI at once (the rule when two ends ask each other simultaneously: one
// rejects, the other abandons its own request and accepts). Accept itself
// aborts a ConnectRequest or ConnectPeer under way on its VI, so that it
// wins even over a request whose goroutine started only after that
// Disconnect.
//
// # Design
//
// Each bonded VI has one vi.VI per rail at reliable reception, so a rail
// send completes only once the peer has the bytes, and one vi.CQ per rail.
// A rail holds back the acknowledgement a send (not an RDMA write) asks for by
// Options.AckReqDelay, as vi.Options.AckReqDelay says (zero takes
// DefaultAckReqDelay; negative: acknowledge at once), so that the reply of
// a ping-pong carries it instead of a frame of its own ahead of the reply.
// Every bond message carries a 32-byte bond header (wire.go): the bond
// message sequence number (msn), the sender's receive credit, the message
// length, the block offset and length, immediate data, and a kind (data,
// notice, credit, handle query, handle reply).
//
//   - Eager sends below Options.StripeThreshold (2 KiB, as in MP_Lite) go
//     on one rail as one block: the first live rail (the one the peer polls
//     every round) while its queue drains within 500 µs at its measured
//     rate, else the rail that would finish the block first, and such a
//     message may go ahead of RDMA pieces not yet pulled, so that a
//     handshake's reply does not queue behind a bulk transfer. Longer ones
//     are cut into one block per live rail, or into BlockSize (32 KiB)
//     blocks when longer than that, and the blocks are handed out to the
//     rails as they have room (RailSlots in flight each), so a faster rail
//     takes more. The receiver copies each block from the rail's own
//     receive buffers into the user's receive descriptor named by the msn,
//     at the block's offset, and completes the descriptors in msn order
//     when every block has arrived. A bitmap per receive drops blocks that
//     arrive twice.
//   - Credit: every send that consumes a receive takes an msn, and the peer
//     may start message m only when m is below the credit it was told, so a
//     block always finds its receive. Credit rides on every message, and
//     on credit-only messages when the peer runs short.
//   - RDMA writes are cut into pieces that the live rails pull as they
//     drain, each at most two pieces ahead: a faster rail takes more, and
//     no rail idles while another still has a backlog (a split fixed in
//     advance by each rail's measured rate left rails idle at the end of
//     every write whenever the estimates were off). A piece lasts about
//     2 ms at its rail's measured rate (from 32 KiB up to RDMAPiece), so
//     that rails finish a write within about that of each other and what a
//     rail holds in flight, which is what a frame sent behind it waits at
//     a rate-limited switch port, stays near 4 ms (two 256 KiB pieces held
//     a reply 42 ms at 100 Mbit/s). Rails measure their throughput as an
//     EWMA of bytes completed over busy windows of at least 200 µs and
//     64 KiB (RailStats.Rate). The first write to a peer handle asks the peer for the rail
//     handles behind it (query/reply, cached). With immediate data, a notice
//     carrying the immediate follows once every piece has completed, so the
//     remote receive completes exactly once, after all the data landed.
//   - Rail failure: a rail whose VI breaks (peer timeout, link down, a
//     failed completion) is taken out; its outstanding blocks, pieces and
//     control messages go to the other rails, and its credit is announced
//     again. Re-sent blocks are deduplicated by (msn, block), RDMA pieces
//     are idempotent. A background goroutine reconnects the rail peer to
//     peer (discriminator ^ ReconnectBit) with backoff, and the rail is used
//     again. Only when every rail is dead does the VI fail (ErrAllRails) and
//     its descriptors complete with errors.
//   - Progress: a user wait (SendWait, RecvWait, CQ.Wait) spins for
//     SpinTime, polling the rails itself and yielding the processor between
//     rounds (runtime.Gosched, with Options.Yield), so that a goroutine
//     its progress readied (the peer's, in one process, or the user's own)
//     runs at once instead of after the spin; then it blocks. It sleeps in
//     the device of its first live rail (vi.Provider.Block), where the
//     peer's next small message wakes it directly; whatever another rail's
//     goroutine publishes ends that sleep through nic.Interrupter. Only when
//     the device is busy (another VI's goroutine blocks in it) or cannot be
//     interrupted does it sleep on a wake channel instead, the slower path:
//     a rail goroutine's wake-up, then the channel's. A round polls the
//     first live rail, which carries the peer's
//     small messages, and the rails with work in flight or a completion in
//     the last 64 rounds, once each; the quiet ones only every 8th round,
//     as a poll is a system call on most drivers. A CQ polls each rail's
//     device once per round for all the VIs attached to it (the others
//     drain what that poll delivered), and a round that completed nothing
//     skips scheduling. A CQ round skips the VIs that wait only for their
//     rails (quiet) until a rail completion or a post wakes them; while
//     every VI of the bond is quiet, a round only polls the devices of
//     their first live rails and of the rails that recently delivered
//     frames (an RDMA write coming in). One goroutine
//     per rail and connection blocks on that rail's CQ and handles what
//     arrives while nobody polls, and wakes a blocked waiter. While a wait
//     spins, or sleeps in the rail's device, these goroutines stay parked,
//     so that no frame wakes one just
//     to contend with the spinner for the VI (one already waiting on its
//     CQ leaves that wait, vi.CQ.WaitOr, rather than sleep in the device
//     again, where its thread would keep a P that a preempted spinner
//     locked to its thread needs back); the last spinner to block
//     wakes them, and they look again every 10 ms by themselves, so that
//     the peer's messages are taken off the rails and credit flows without
//     any user call. No goroutine or allocation per message.
//
// Both ends must use the same BlockSize and MaxTransfer. RDMA reads are not
// supported on a bond.
package bonding
