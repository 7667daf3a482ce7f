/* mplite.h: MP_Lite's C API over Ethervia (libmplite.so, cmd/libmplite).
 *
 * Signatures follow MP_Lite's mplite.h as the MP_Lite papers and README
 * describe it (MP_Send/MP_Recv(buf, nbytes, peer, tag), MP_ASend/MP_ARecv
 * with a message id, MP_Bcast(ptr, nbytes, root), global in-place sums and
 * extrema). Where the sources are silent the choices are marked GUESS.
 * The functions return nothing: an error prints a message on stderr and
 * ends the process (exit status 1), as MP_Lite does. */
#ifndef ETHERVIA_MPLITE_H
#define ETHERVIA_MPLITE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Wildcards of MP_Recv and MP_ARecv: source -1 is MP_Lite's any source;
 * tag -1 for any tag is a GUESS. */
#define MP_ANY_SOURCE (-1)
#define MP_ANY_TAG    (-1)

void MP_Init(int *argc, char ***argv);
void MP_Finalize(void);
void MP_Nprocs(int *nprocs);
void MP_Myproc(int *myproc);

void MP_Send(void *buf, int nbytes, int dest, int tag);
void MP_Recv(void *buf, int nbytes, int src, int tag);
void MP_ASend(void *buf, int nbytes, int dest, int tag, int *msg_id);
void MP_ARecv(void *buf, int nbytes, int src, int tag, int *msg_id);
void MP_Wait(int *msg_id);

/* Source, tag and length of the last message MP_Recv or MP_Wait received
 * (MP_Lite's MP_Get_Last_*; signatures a GUESS). */
void MP_Get_Last_Source(int *src);
void MP_Get_Last_Tag(int *tag);
void MP_Get_Last_Size(int *nbytes);

void MP_Sync(void);                               /* barrier */
void MP_Bcast(void *ptr, int nbytes, int root);
void MP_dSum(double *ptr, int n);                 /* in place, every rank gets the result */
void MP_iSum(int *ptr, int n);
void MP_dMax(double *ptr, int n);
void MP_dMin(double *ptr, int n);

double MP_Time(void);                             /* seconds */

#ifdef __cplusplus
}
#endif
#endif
