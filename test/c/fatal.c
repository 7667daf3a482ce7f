/* fatal.c: an error under the default handler (MPI_ERRORS_ARE_FATAL) ends
 * the whole job with a non-zero exit. argv[1] picks the error, made by the
 * last rank: "rank" sends to a rank that does not exist, "null" passes NULL
 * for MPI_Comm_rank's result. The other ranks wait for a message that never
 * comes. Nothing after the error may run. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
	int rank, size, x = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == size - 1) {
		if (argc > 1 && strcmp(argv[1], "null") == 0)
			MPI_Comm_rank(MPI_COMM_WORLD, NULL);
		else
			MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
		printf("F%d survived the error\n", rank);
	} else {
		MPI_Recv(&x, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		printf("F%d received %d\n", rank, x);
	}
	MPI_Finalize();
	return 0;
}
