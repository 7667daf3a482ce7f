/* mpi.h: the MPI subset of Ethervia's libmpich.so.12 (cmd/libmpich).
 *
 * Generated from Debian libmpich-dev's MPICH 4.0.2 mpi.h and mpi_proto.h:
 * every value is MPICH's, so programs built against this header and against
 * MPICH's own run on either library. Only the implemented functions are
 * declared; the library also exports the rest of MPICH's functions, which
 * fail with MPI_ERR_OTHER. Use the mpicc script next to this directory. */
#ifndef ETHERVIA_MPI_H
#define ETHERVIA_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
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

/* Null handles */
#define MPI_COMM_NULL            ((MPI_Comm)0x04000000)
#define MPI_OP_NULL              ((MPI_Op)0x18000000)
#define MPI_DATATYPE_NULL        ((MPI_Datatype)0x0c000000)
#define MPI_REQUEST_NULL         ((MPI_Request)0x2c000000)
#define MPI_ERRHANDLER_NULL      ((MPI_Errhandler)0x14000000)

/* Communicators */
#define MPI_COMM_WORLD           ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF            ((MPI_Comm)0x44000001)

/* Datatypes (contiguous, predefined; the size is in bits 8-15) */
#define MPI_CHAR                 ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR          ((MPI_Datatype)0x4c000118)
#define MPI_UNSIGNED_CHAR        ((MPI_Datatype)0x4c000102)
#define MPI_BYTE                 ((MPI_Datatype)0x4c00010d)
#define MPI_WCHAR                ((MPI_Datatype)0x4c00040e)
#define MPI_SHORT                ((MPI_Datatype)0x4c000203)
#define MPI_UNSIGNED_SHORT       ((MPI_Datatype)0x4c000204)
#define MPI_INT                  ((MPI_Datatype)0x4c000405)
#define MPI_UNSIGNED             ((MPI_Datatype)0x4c000406)
#define MPI_LONG                 ((MPI_Datatype)0x4c000807)
#define MPI_UNSIGNED_LONG        ((MPI_Datatype)0x4c000808)
#define MPI_FLOAT                ((MPI_Datatype)0x4c00040a)
#define MPI_DOUBLE               ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_DOUBLE          ((MPI_Datatype)0x4c00100c)
#define MPI_LONG_LONG_INT        ((MPI_Datatype)0x4c000809)
#define MPI_UNSIGNED_LONG_LONG   ((MPI_Datatype)0x4c000819)
#define MPI_LONG_LONG            MPI_LONG_LONG_INT
#define MPI_PACKED               ((MPI_Datatype)0x4c00010f)
#define MPI_INT8_T               ((MPI_Datatype)0x4c000137)
#define MPI_INT16_T              ((MPI_Datatype)0x4c000238)
#define MPI_INT32_T              ((MPI_Datatype)0x4c000439)
#define MPI_INT64_T              ((MPI_Datatype)0x4c00083a)
#define MPI_UINT8_T              ((MPI_Datatype)0x4c00013b)
#define MPI_UINT16_T             ((MPI_Datatype)0x4c00023c)
#define MPI_UINT32_T             ((MPI_Datatype)0x4c00043d)
#define MPI_UINT64_T             ((MPI_Datatype)0x4c00083e)
#define MPI_C_BOOL               ((MPI_Datatype)0x4c00013f)
#define MPI_AINT                 ((MPI_Datatype)0x4c000843)
#define MPI_OFFSET               ((MPI_Datatype)0x4c000844)
#define MPI_COUNT                ((MPI_Datatype)0x4c000845)

/* Operations */
#define MPI_MAX                  (MPI_Op)(0x58000001)
#define MPI_MIN                  (MPI_Op)(0x58000002)
#define MPI_SUM                  (MPI_Op)(0x58000003)
#define MPI_PROD                 (MPI_Op)(0x58000004)
#define MPI_LAND                 (MPI_Op)(0x58000005)
#define MPI_BAND                 (MPI_Op)(0x58000006)
#define MPI_LOR                  (MPI_Op)(0x58000007)
#define MPI_BOR                  (MPI_Op)(0x58000008)
#define MPI_LXOR                 (MPI_Op)(0x58000009)
#define MPI_BXOR                 (MPI_Op)(0x5800000a)

/* Other constants */
#define MPI_ERRORS_ARE_FATAL     ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN        ((MPI_Errhandler)0x54000001)
#define MPI_MAX_PROCESSOR_NAME   128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_ERROR_STRING     512
#define MPI_UNDEFINED            (-32766)
#define MPI_BSEND_OVERHEAD       96
#define MPI_BOTTOM               (void *)0
#define MPI_PROC_NULL            (-1)
#define MPI_ANY_SOURCE           (-2)
#define MPI_ROOT                 (-3)
#define MPI_ANY_TAG              (-1)
#define MPI_VERSION              4
#define MPI_SUBVERSION           0
#define MPI_IN_PLACE             (void *) -1
#define MPI_STATUS_IGNORE        (MPI_Status *)1
#define MPI_STATUSES_IGNORE      (MPI_Status *)1
#define MPI_THREAD_SINGLE        0
#define MPI_THREAD_FUNNELED      1
#define MPI_THREAD_SERIALIZED    2
#define MPI_THREAD_MULTIPLE      3

/* Error classes */
#define MPI_SUCCESS              0
#define MPI_ERR_BUFFER           1
#define MPI_ERR_COUNT            2
#define MPI_ERR_TYPE             3
#define MPI_ERR_TAG              4
#define MPI_ERR_COMM             5
#define MPI_ERR_RANK             6
#define MPI_ERR_ROOT             7
#define MPI_ERR_OP               9
#define MPI_ERR_ARG              12
#define MPI_ERR_UNKNOWN          13
#define MPI_ERR_TRUNCATE         14
#define MPI_ERR_OTHER            15
#define MPI_ERR_INTERN           16
#define MPI_ERR_IN_STATUS        17
#define MPI_ERR_PENDING          18
#define MPI_ERR_REQUEST          19

int MPI_Abort(MPI_Comm comm, int errorcode);
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Buffer_attach(void *buffer, int size);
int MPI_Buffer_detach(void *buffer_addr, int *size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Error_class(int errorcode, int *errorclass);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Finalize(void);
int MPI_Finalized(int *flag);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Get_processor_name(char *name, int *resultlen);
int MPI_Get_version(int *version, int *subversion);
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Initialized(int *flag);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Query_thread(int *provided);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPI_Request_free(MPI_Request *request);
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]);
int MPI_Testany(int count, MPI_Request array_of_requests[], int *indx, int *flag, MPI_Status *status);
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *indx, MPI_Status *status);
double MPI_Wtick(void);
double MPI_Wtime(void);

#ifdef __cplusplus
}
#endif
#endif
