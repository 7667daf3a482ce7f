/* inter.c: intercommunicators. The even and the odd ranks of
 * MPI_COMM_WORLD form two groups (MPI_Comm_split), joined by
 * MPI_Intercomm_create with world ranks 0 and 1 as leaders; each rank
 * exchanges with the rank of its number in the other group (wrapping),
 * checks sizes, groups and MPI_Comm_test_inter, then merges (odds high)
 * and reduces over the merged communicator. Every result line starts with
 * I<rank>; the test compares them with MPICH's. Needs at least 2 ranks. */
#include <mpi.h>
#include <stdio.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("I%d %s\n", rank, l_); fflush(stdout); } while (0)

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);

	MPI_Comm half, inter, merged;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter);
	int lr, ls, rs, flag, hflag;
	MPI_Comm_rank(inter, &lr);
	MPI_Comm_size(inter, &ls);
	MPI_Comm_remote_size(inter, &rs);
	MPI_Comm_test_inter(inter, &flag);
	MPI_Comm_test_inter(half, &hflag);
	OUT("inter: rank %d size %d remote %d inter %d half inter %d", lr, ls, rs, flag, hflag);
	MPI_Group lg, rg, wg;
	int lgs, rgs, w0 = 0, tr;
	MPI_Comm_group(inter, &lg);
	MPI_Comm_remote_group(inter, &rg);
	MPI_Group_size(lg, &lgs);
	MPI_Group_size(rg, &rgs);
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	MPI_Group_translate_ranks(rg, 1, &w0, wg, &tr);
	OUT("groups: local %d remote %d, remote rank 0 is world %d", lgs, rgs, tr);
	MPI_Group_free(&lg);
	MPI_Group_free(&rg);
	MPI_Group_free(&wg);

	int peer = lr % rs, got = -1, from = -1;
	MPI_Status st;
	/* every rank sends to remote rank lr % rs; receives from any */
	MPI_Request rq;
	MPI_Isend(&rank, 1, MPI_INT, peer, 5, inter, &rq);
	int expect = 0;
	for (int r = 0; r < rs; r++)
		if (r % ls == lr)
			expect++;
	int sum = 0;
	for (int k = 0; k < expect; k++) {
		MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 5, inter, &st);
		sum += got;
		from = st.MPI_SOURCE;
	}
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	OUT("p2p: got %d messages summing %d, last from remote %d", expect, sum, expect ? from : -1);

	MPI_Intercomm_merge(inter, rank % 2, &merged);
	int mr, ms, msum;
	MPI_Comm_rank(merged, &mr);
	MPI_Comm_size(merged, &ms);
	MPI_Allreduce(&rank, &msum, 1, MPI_INT, MPI_SUM, merged);
	OUT("merged: rank %d of %d, sum %d", mr, ms, msum);

	MPI_Comm_free(&merged);
	MPI_Comm_free(&inter);
	MPI_Comm_free(&half);
	MPI_Finalize();
	return 0;
}
