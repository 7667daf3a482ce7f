// Package bpf builds the kernel-side filters of Ethervia: the socket filters
// for AF_PACKET sockets (a classic BPF one, and an eBPF one that also counts
// the frames of other jobs it rejects), the XDP steering program that feeds
// AF_XDP sockets (it counts other jobs' frames too), and fault injectors (tc
// and XDP) for testbeds.
//
// Every eBPF program is assembled at run time with the cilium/ebpf asm
// package, so there is no clang step and no committed object file. All
// programs match the fixed Ethervia prefix of package nic: EtherType at
// offset 12, wire version at 14 and the big-endian job key at 18.
//
// Fault injection is configured through an array map holding one entry of
// four u32 thresholds (drop, corrupt, duplicate, reserved); a probability p
// is stored as p*2^32, and 0xffffffff means "always". A fault fires when
// bpf_get_prandom_u32() is below the threshold. Counters live in a per-CPU
// array map and are summed on read.
//
// Loading programs, attaching them and test runs need root (CAP_BPF and
// CAP_NET_ADMIN); SocketFilter does not.
package bpf
