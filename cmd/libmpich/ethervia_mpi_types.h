/* Types of MPICH's ABI (libmpich.so.12) used by the Go exports of
 * cmd/libmpich, copied from Debian's libmpich-dev mpi.h (MPICH 4.0.2).
 * Only types: the prototypes come from cgo's own export header. */
#ifndef ETHERVIA_MPI_TYPES_H
#define ETHERVIA_MPI_TYPES_H
#include <stdint.h> /* uintptr_t: arguments that may hold sentinels, not pointers */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef int MPI_Info;
typedef int MPI_Message;
typedef long MPI_Aint;
typedef int MPI_Fint;
typedef long MPI_Count;
typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;
#endif
