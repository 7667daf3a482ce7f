// Package pmi speaks the process-management interface that MPI launchers
// offer their ranks: PMI-1's "simple" wire protocol (MPICH's Hydra, Slurm's
// mpi/pmi2 plugin, which also answers PMI-1) and PMI-2's (srun --mpi=pmi2,
// Hydra). A rank learns its rank, the job size and the job's name, and
// exchanges strings with the other ranks through the launcher's key-value
// store: Put, then Fence (a barrier that makes every rank's puts visible),
// then Get.
//
// The launcher hands over a connected socket in PMI_FD (with PMI_RANK and
// PMI_SIZE), or for PMI-1 a TCP address in PMI_PORT with the rank's id in
// PMI_ID. FromEnv reads them; New wraps a connection a caller made.
//
// Server is the other end, written from the same protocol: mprun runs it,
// and tests use it to launch ranks the way Slurm and Hydra do.
//
// Messages of PMI-1 are lines of space-separated key=value pairs, "cmd=..."
// first. Messages of PMI-2 start with their length in six ASCII characters
// (digits padded with spaces), followed by "cmd=...;" and key=value; pairs
// in which a ';' inside a value is written twice. Both protocols are
// lock-step: one request, one response.
package pmi
