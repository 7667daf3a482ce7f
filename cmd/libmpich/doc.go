// Command libmpich is Ethervia's MPICH-ABI shared library: a subset of MPI
// over package mplite that programs linked against MPICH's libmpich.so.12
// run on unmodified, chosen with LD_LIBRARY_PATH.
//
// Build (from the module root; no make):
//
//	go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 \
//	    -o libmpich.so.12 ./cmd/libmpich
//
// Every constant of the ABI (handles of communicators, datatypes,
// operations and requests, MPI_Status's layout, MPI_STATUS_IGNORE, error
// codes, MPI_ANY_SOURCE/TAG, MPI_PROC_NULL, MPI_Fint) is MPICH 4.0.2's, read
// from Debian's libmpich-dev mpi.h. Communicators and requests are Go objects
// behind integer handles (tables); no Go pointer is handed to C.
//
// Datatypes: the contiguous predefined ones (MPICH encodes their size in bits
// 8-15 of the handle). Derived datatypes and the pair types of
// MPI_MINLOC/MPI_MAXLOC fail with MPI_ERR_TYPE and a message on stderr.
//
// MPI_Ssend is synchronous: it is mplite's Ssend, which always takes the
// handshake protocol, whose clear-to-send only a matched receive sends. Tags
// are limited to mplite's MaxTag.
//
// Errors never abort: every failing call prints "libmpich(ethervia): ..." on
// stderr and returns its MPI error code (as with MPI_ERRORS_RETURN). Every
// other MPI_ function of MPICH's mpi_proto.h is exported (stubs.c, generated
// by gen_stubs.go) and fails with MPI_ERR_OTHER (MPI_ERR_TYPE for the
// MPI_Type_ constructors) and a message naming it.
//
// The library bootstraps like mplite.Init: under mprun, or under Hydra's
// mpiexec through PMI_RANK and PMI_SIZE.
package main
