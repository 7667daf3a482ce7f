// Package shm carries messages between processes of one host without a
// NIC: the intra-host transport under mplite's ranks that share a node.
//
// Every process creates one Inbox: a file in a shared-memory directory
// (/dev/shm) holding one single-producer, single-consumer ring per process
// that may send to it, and a FIFO next to it that wakes the owner when it
// sleeps. A sender Attaches to the inbox of each process it talks to and
// claims a ring there under its own identity. An entry in a ring is either
// a message (its bytes are in the ring slot) or a write into memory the
// receiver registered: its bytes travel in the slot too, or, when the
// receiver may read the sender's memory, the entry holds only the sender's
// address and the receiver copies the bytes itself in one step with
// process_vm_readv (Linux's cross-memory attach, as Open MPI's vader and
// MPICH's nemesis do).
//
// A long one of those the two ends copy together (Entry.Share): the
// receiver publishes where the bytes go in the entry's slot, and while it
// reads chunks the sender, which waits for the write anyway, writes other
// chunks into it with process_vm_writev (Ring.CopyRemote, Outbox.Help).
//
// An entry is published by its sequence number, stored last in its slot:
// the receiver polls the next slot of each ring and touches nothing else.
// A receiver that is about to sleep says so in its inbox first; a sender
// that sees that after its commit writes a byte to the FIFO.
//
// Both ends run on one host, so integers in the file are in the host's
// byte order. Entries are validated before anything in them is used: a
// process that scribbles on the file can corrupt only the bytes it sends
// (or, by never finishing a chunk of a shared copy it claimed, hold its
// receiver until it exits; processes of one user that may read each
// other's memory trust each other that far).
package shm
