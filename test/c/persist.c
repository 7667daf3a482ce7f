/* persist.c: persistent requests (Send_init, Ssend_init, Bsend_init,
 * Recv_init, Start, Startall, inactive requests in Wait and Waitall,
 * Request_free), persistent collectives (MPI 4.0) and MPI_Cancel of
 * receives with MPI_Test_cancelled. Every
 * result line starts with R<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;
#define OUT(...) do { char l_[512]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("R%d %s\n", rank, l_); fflush(stdout); } while (0)

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, flag;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);
	int left = (rank + size - 1) % size, right = (rank + 1) % size;

	/* a persistent ring, five rounds, standard then synchronous sends */
	int out, in, sum = 0;
	MPI_Request reqs[2];
	MPI_Status sts[2], sts3[3];
	MPI_Recv_init(&in, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &reqs[0]);
	MPI_Send_init(&out, 1, MPI_INT, right, 1, MPI_COMM_WORLD, &reqs[1]);
	for (int i = 0; i < 5; i++) {
		out = rank * 100 + i;
		MPI_Startall(2, reqs);
		MPI_Waitall(2, reqs, sts);
		sum += in;
	}
	OUT("persistent ring: sum %d source %d tag %d handles kept %d", sum, sts[0].MPI_SOURCE, sts[0].MPI_TAG,
	    reqs[0] != MPI_REQUEST_NULL && reqs[1] != MPI_REQUEST_NULL);
	MPI_Status st;
	st.MPI_SOURCE = -7;
	MPI_Wait(&reqs[0], &st);
	OUT("wait on an inactive request: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
	MPI_Request_free(&reqs[0]);
	MPI_Request_free(&reqs[1]);
	OUT("freed %d", reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL);

	int big[3000];
	for (int i = 0; i < 3000; i++)
		big[i] = rank + i;
	int got[3000];
	MPI_Recv_init(got, 3000, MPI_INT, left, 2, MPI_COMM_WORLD, &reqs[0]);
	MPI_Ssend_init(big, 3000, MPI_INT, right, 2, MPI_COMM_WORLD, &reqs[1]);
	long total = 0;
	for (int i = 0; i < 3; i++) {
		MPI_Start(&reqs[0]);
		MPI_Start(&reqs[1]);
		MPI_Waitall(2, reqs, sts);
		for (int k = 0; k < 3000; k++)
			total += got[k];
	}
	OUT("persistent synchronous 12000-byte sends: total %ld", total);
	MPI_Request_free(&reqs[0]);
	MPI_Request_free(&reqs[1]);

	int bufsize = 1 << 16;
	void *bbuf = malloc(bufsize);
	MPI_Buffer_attach(bbuf, bufsize);
	MPI_Bsend_init(&out, 1, MPI_INT, right, 3, MPI_COMM_WORLD, &reqs[1]);
	out = rank + 1000;
	MPI_Start(&reqs[1]);
	MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
	MPI_Recv(&in, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &st);
	OUT("persistent buffered send: %d", in);
	MPI_Request_free(&reqs[1]);
	MPI_Buffer_detach(&bbuf, &bufsize);
	free(bbuf);

	/* cancelling a receive nothing matches, then one already matched */
	MPI_Request r;
	MPI_Irecv(&in, 1, MPI_INT, left, 99, MPI_COMM_WORLD, &r);
	MPI_Cancel(&r);
	MPI_Wait(&r, &st);
	MPI_Test_cancelled(&st, &flag);
	OUT("cancelled an unmatched receive: %d", flag);
	MPI_Irecv(&in, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &r);
	MPI_Send(&rank, 1, MPI_INT, right, 4, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	flag = 0;
	while (!flag)
		MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
	MPI_Cancel(&r);
	MPI_Wait(&r, &st);
	MPI_Test_cancelled(&st, &flag);
	OUT("cancelled a matched receive: %d, got %d from %d", flag, in, st.MPI_SOURCE);

	/* persistent collectives, each started three times */
	int ain, aout, bval[2], total2 = 0;
	MPI_Request pc[3];
	MPI_Allreduce_init(&ain, &aout, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &pc[0]);
	MPI_Bcast_init(bval, 2, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &pc[1]);
	MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &pc[2]);
	for (int i = 0; i < 3; i++) {
		ain = rank + i;
		if (rank == size - 1) {
			bval[0] = i * 10;
			bval[1] = i * 10 + 1;
		}
		MPI_Startall(3, pc);
		MPI_Waitall(3, pc, sts3);
		total2 += aout + bval[0] + bval[1];
	}
	OUT("persistent collectives: %d, handles kept %d", total2, pc[0] != MPI_REQUEST_NULL && pc[2] != MPI_REQUEST_NULL);
	for (int i = 0; i < 3; i++)
		MPI_Request_free(&pc[i]);

	MPI_Finalize();
	return 0;
}
