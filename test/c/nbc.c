/* nbc.c: nonblocking collectives: several outstanding on one
 * communicator, completed by Wait, Waitall and Test loops, a blocking
 * collective issued between start and completion, computation overlapped;
 * MPI_Isendrecv(_replace), MPI_Comm_idup and MPI_Alltoallw.
 * Every result line starts with N<rank>; the test compares them with
 * MPICH's. */
#include <mpi.h>
#include <stdio.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("N%d %s\n", rank, l_); fflush(stdout); } while (0)

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);

	MPI_Request r[6];
	int b[4] = {0, 0, 0, 0}, s = rank + 1, sum = 0, g[64], a2a_s[64], a2a_r[64], rs[64], rsb;
	double big[4096], bigsum[4096];
	if (rank == 0)
		for (int i = 0; i < 4; i++)
			b[i] = 7 * (i + 1);
	for (int i = 0; i < 4096; i++)
		big[i] = rank + i * 0.5;
	for (int i = 0; i < size; i++) {
		a2a_s[i] = rank * 100 + i;
		rs[i] = rank + i;
	}
	MPI_Ibcast(b, 4, MPI_INT, 0, MPI_COMM_WORLD, &r[0]);
	MPI_Iallreduce(&s, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]);
	MPI_Iallreduce(big, bigsum, 4096, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &r[2]);
	MPI_Igather(&s, 1, MPI_INT, g, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &r[3]);
	MPI_Ialltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, MPI_COMM_WORLD, &r[4]);
	MPI_Ireduce_scatter_block(rs, &rsb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[5]);
	/* computation while they run */
	double acc = 0;
	for (int i = 0; i < 2000000; i++)
		acc += i * 1e-9;
	/* a blocking collective in between, ordered after them */
	int bs;
	MPI_Allreduce(&rank, &bs, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Waitall(6, r, MPI_STATUSES_IGNORE);
	OUT("Ibcast %d %d %d %d; Iallreduce %d; big max %g %g; Ialltoall %d %d; Ireduce_scatter_block %d; blocking %d; computed %d", b[0],
	    b[1], b[2], b[3], sum, bigsum[0], bigsum[4095], a2a_r[0], a2a_r[size - 1], rsb, bs, acc > 1000);
	if (rank == size - 1)
		OUT("Igather %d %d", g[0], g[size - 1]);

	MPI_Request rb;
	int flag = 0, polls = 0;
	MPI_Ibarrier(MPI_COMM_WORLD, &rb);
	while (!flag) {
		MPI_Test(&rb, &flag, MPI_STATUS_IGNORE);
		polls++;
	}
	OUT("Ibarrier completed by Test, request null %d", rb == MPI_REQUEST_NULL);

	MPI_Comm dup;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	int x = rank, y;
	MPI_Request rd;
	MPI_Iscan(&x, &y, 1, MPI_INT, MPI_SUM, dup, &rd);
	MPI_Wait(&rd, MPI_STATUS_IGNORE);
	MPI_Comm_free(&dup);
	OUT("Iscan on a duplicate %d", y);
	/* Isendrecv and Isendrecv_replace around the ring */
	int right = (rank + 1) % size, left = (rank + size - 1) % size, o = rank * 3, i1 = -1, rep = rank * 5;
	MPI_Request ir[2];
	MPI_Status ist[2];
	MPI_Isendrecv(&o, 1, MPI_INT, right, 8, &i1, 1, MPI_INT, left, 8, MPI_COMM_WORLD, &ir[0]);
	MPI_Isendrecv_replace(&rep, 1, MPI_INT, right, 9, left, 9, MPI_COMM_WORLD, &ir[1]);
	MPI_Waitall(2, ir, ist);
	/* (the status is not compared: MPICH 4.0.2's is not the receive's) */
	OUT("Isendrecv %d; Isendrecv_replace %d", i1, rep);

	/* Comm_idup, used once complete */
	MPI_Comm idup;
	MPI_Request ri;
	MPI_Comm_idup(MPI_COMM_WORLD, &idup, &ri);
	MPI_Wait(&ri, MPI_STATUS_IGNORE);
	int isum;
	MPI_Allreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, idup);
	MPI_Comm_free(&idup);
	OUT("Comm_idup: sum %d", isum);

	/* Alltoallw: an int to and from each rank, at byte displacements */
	int wsc[64], wsd[64], wrc[64], wrd[64];
	MPI_Datatype wst[64], wrt[64];
	int wsend[64];
	for (int i = 0; i < size; i++) {
		wsend[i] = rank * 100 + i;
		wsc[i] = 1;
		wsd[i] = i * (int)sizeof(int);
		wst[i] = MPI_INT;
		wrc[i] = 1;
		wrt[i] = MPI_INT;
	}
	int wr[64];
	for (int i = 0; i < size; i++)
		wrd[i] = i * (int)sizeof(int);
	MPI_Alltoallw(wsend, wsc, wsd, wst, wr, wrc, wrd, wrt, MPI_COMM_WORLD);
	OUT("Alltoallw: %d %d", wr[0], wr[size - 1]);
	MPI_Finalize();
	return 0;
}
