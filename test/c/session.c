/* session.c: the MPI 4.0 sessions model without MPI_Init: process sets,
 * a group from mpi://WORLD, a communicator from it, a reduction on it,
 * mpi://SELF, and MPI_Initialized staying false. Every result line starts
 * with S<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("S%d %s\n", rank, l_); fflush(stdout); } while (0)

int main(void) {
	MPI_Session s;
	MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, wr;
	MPI_Get_library_version(lv, &lvn);
	int np, inited;
	MPI_Session_get_num_psets(s, MPI_INFO_NULL, &np);
	int found = 0;
	for (int i = 0; i < np; i++) {
		char name[256];
		int len = 0;
		MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL);
		len = sizeof name;
		MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
		if (strcmp(name, "mpi://WORLD") == 0 || strcmp(name, "mpi://SELF") == 0)
			found++;
	}
	MPI_Group wg, sg;
	MPI_Group_from_session_pset(s, "mpi://WORLD", &wg);
	MPI_Group_from_session_pset(s, "mpi://SELF", &sg);
	MPI_Comm c, self;
	MPI_Comm_create_from_group(wg, "org.example.session", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
	MPI_Comm_create_from_group(sg, "org.example.self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &self);
	int size, ssize, sum;
	MPI_Comm_rank(c, &rank);
	MPI_Comm_size(c, &size);
	wr = rank;
	printf("V%d %.40s\n", wr, lv);
	MPI_Comm_size(self, &ssize);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c);
	MPI_Initialized(&inited);
	MPI_Info pi;
	char val[64];
	int flag;
	MPI_Session_get_pset_info(s, "mpi://WORLD", &pi);
	MPI_Info_get(pi, "mpi_size", sizeof val - 1, val, &flag);
	MPI_Info_free(&pi);
	OUT("psets found %d; rank %d of %d, self %d, sum %d, initialized %d, mpi_size %s", found, rank, size, ssize, sum, inited,
	    flag ? val : "-");
	MPI_Comm_free(&self);
	MPI_Comm_free(&c);
	MPI_Group_free(&wg);
	MPI_Group_free(&sg);
	MPI_Session_finalize(&s);
	OUT("finalized, null %d", s == MPI_SESSION_NULL);
	return 0;
}
