/* big.c: one message of 2^31 - 1 bytes (the largest int count) from rank
 * 0 to rank 1; rank 1 checks a byte of every page and the last. Prints
 * B<rank> lines. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int n = argc > 1 ? atoi(argv[1]) : 2147483647;
	char *b = malloc(n);
	for (long i = 0; i < n; i += 4096)
		b[i] = (char)(i / 4096 + rank);
	b[n - 1] = 7 + rank;
	double t0 = MPI_Wtime();
	int rc;
	if (rank == 0) {
		rc = MPI_Send(b, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
	} else {
		MPI_Status st;
		int cnt;
		long bad = 0;
		rc = MPI_Recv(b, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		for (long i = 0; i < n - 1; i += 4096)
			if (b[i] != (char)(i / 4096))
				bad++;
		printf("B1 rc %d count %d bad %ld last %d\n", rc, cnt, bad, b[n - 1]);
	}
	if (rank == 0)
		printf("B0 rc %d %.2f s\n", rc, MPI_Wtime() - t0);
	MPI_Finalize();
	return 0;
}
