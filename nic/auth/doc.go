// Package auth authenticates Ethervia frames with a secret that every
// member of a job holds and nobody else does.
//
// Wrap puts a device behind the authentication: every frame it sends gets
// a 24-byte trailer (a 64-bit counter and a 16-byte GMAC tag over the whole
// frame, prefix and counter included), and every frame it receives is
// verified and stripped of its trailer before the caller sees it. Frames
// with a missing or wrong tag, and frames whose counter was seen before
// (replays), are dropped and counted in Stats (RxBadTag, RxReplayed) before
// any layer above parses a byte of them.
//
// The construction is AES-256-GCM with an empty plaintext (GMAC) from the
// standard library, keyed by HKDF-SHA256 of the secret and the job key. The
// 16-byte nonce is the sender's address (MAC and endpoint, taken from the
// frame) and the counter, so no two frames of a job share a nonce as long
// as each address belongs to one open device at a time. A device's counter
// starts at the wall clock in nanoseconds and grows by one per frame, so a
// device reopened under the same address starts above where the last one
// stopped. The receiver keeps, per authenticated sender, the highest
// counter and a window of the 256 below it.
//
// A job-wide key authenticates membership, not rank: any holder of the
// secret can claim any address. The threat it answers is a host on the LAN
// without the secret (docs/security.md).
package auth
