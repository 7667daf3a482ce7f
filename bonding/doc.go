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
// with Bond.ConnectWait and ConnRequest.Accept. Peers are named by their
// MAC on every rail plus a discriminator (Peer). Descriptors are the
// ordinary descriptors.Descriptor; their segments name bond handles.
//
// # Design
//
// Each bonded VI has one vi.VI per rail at reliable reception, so a rail
// send completes only once the peer has the bytes, and one vi.CQ per rail.
// Every bond message carries a 32-byte bond header (wire.go): the bond
// message sequence number (msn), the sender's receive credit, the message
// length, the block offset and length, immediate data, and a kind (data,
// notice, credit, handle query, handle reply).
//
//   - Eager sends below Options.StripeThreshold (2 KiB, as in MP_Lite) go
//     on one rail as one block. Longer ones are cut into one block per live
//     rail, or into BlockSize (32 KiB) blocks when longer than that, and the
//     blocks are handed out to the rails as they have room (RailSlots in
//     flight each), so a faster rail takes more. The receiver copies each
//     block from the rail's own receive buffers into the user's receive
//     descriptor named by the msn, at the block's offset, and completes
//     the descriptors in msn order when every block has arrived. A bitmap
//     per receive drops blocks that arrive twice.
//   - Credit: every send that consumes a receive takes an msn, and the peer
//     may start message m only when m is below the credit it was told, so a
//     block always finds its receive. Credit rides on every message, and
//     on credit-only messages when the peer runs short.
//   - RDMA writes are split into one contiguous segment per live rail,
//     sized in proportion to each rail's measured throughput (an EWMA of
//     bytes completed over busy windows of at least 200 µs; equal at the
//     start; every rail keeps at least an eighth of its equal share so that
//     it stays measured), and each segment is cut into RDMAPiece rail
//     writes. The first write to a peer handle asks the peer for the rail
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
//   - Progress: one goroutine per rail and connection blocks on that rail's
//     CQ and handles what arrives; user waits spin for SpinTime, then block
//     on a wake channel. No goroutine or allocation per message.
//
// Both ends must use the same BlockSize and MaxTransfer. RDMA reads are not
// supported on a bond.
package bonding
