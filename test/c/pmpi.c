/* pmpi.c: the profiling interface. This program defines MPI_Send and
 * MPI_Allreduce itself, counts the calls and passes them on to PMPI_Send
 * and PMPI_Allreduce, as tracers do; the library must still do the work.
 * Every result line starts with W<rank>; the test compares them with
 * MPICH's. */
#include <mpi.h>
#include <stdio.h>

static int rank, size, sends, allreduces;
#define OUT(...) do { char l_[512]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("W%d %s\n", rank, l_); fflush(stdout); } while (0)

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
	sends++;
	return PMPI_Send(buf, count, dt, dest, tag, comm);
}

int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	allreduces++;
	return PMPI_Allreduce(s, r, count, dt, op, comm);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, x = rank, y, sum;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);
	for (int i = 0; i < 3; i++) {
		if (rank % 2 == 0) {
			MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
			MPI_Recv(&y, 1, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&y, 1, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
		}
	}
	MPI_Allreduce(&y, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	PMPI_Allreduce(&y, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* not counted */
	OUT("received %d, sum %d; intercepted %d sends and %d allreduces", y, sum, sends, allreduces);
	MPI_Finalize();
	return 0;
}
