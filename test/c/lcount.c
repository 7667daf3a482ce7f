/* lcount.c: the large-count (_c) forms of MPI 4.0 whose counts come in
 * arrays: the vector collectives (blocking, nonblocking, persistent), the
 * neighbourhood ones, the indexed, struct and subarray constructors, the
 * envelope queries and MPI_Op_create_c. Counts stay below 2^31 (the
 * library's limit). Every result line starts with L<rank>; the test
 * compares them with MPICH's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESULT_TAG 'L'
#include "result.h"

/* A user operation with the large-count signature: inout = in * 3 + inout. */
static void mix(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
	(void)dt;
	for (MPI_Count i = 0; i < *len; i++)
		((int *)inout)[i] += 3 * ((int *)in)[i];
}

int main(int argc, char **argv) {
	start(&argc, &argv);

	/* Rank i contributes i+1 ints; blocks land in reverse order. */
	MPI_Count *counts = malloc(size * sizeof *counts);
	MPI_Aint *displs = malloc(size * sizeof *displs);
	int total = 0;
	for (int i = 0; i < size; i++)
		total += i + 1;
	for (int i = 0, at = total; i < size; i++) {
		counts[i] = i + 1;
		at -= i + 1;
		displs[i] = at;
	}
	int mine[64], *all = malloc(total * sizeof *all);
	for (int k = 0; k <= rank; k++)
		mine[k] = 100 * rank + k;

	int root = size - 1;
	memset(all, 0xff, total * sizeof *all);
	MPI_Gatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
	if (rank == root)
		show("gatherv_c", all, total);

	MPI_Request req;
	memset(all, 0xff, total * sizeof *all);
	MPI_Igatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	if (rank == 0)
		show("igatherv_c", all, total);

	MPI_Gatherv_init_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
	for (int round = 0; round < 2; round++) {
		mine[0] += round;
		memset(all, 0xff, total * sizeof *all);
		MPI_Start(&req);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		if (rank == 0)
			show("gatherv_init_c", all, total);
	}
	MPI_Request_free(&req);
	mine[0] = 100 * rank;

	/* Scatterv: the root hands rank i its i+1 ints back. */
	int got[64];
	memset(got, 0xff, sizeof got);
	for (int i = 0; i < total; i++)
		all[i] = 7 * i;
	MPI_Scatterv_c(all, counts, displs, MPI_INT, got, rank + 1, MPI_INT, 0, MPI_COMM_WORLD);
	show("scatterv_c", got, rank + 2);
	memset(got, 0xff, sizeof got);
	MPI_Iscatterv_c(all, counts, displs, MPI_INT, got, rank + 1, MPI_INT, root, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	show("iscatterv_c", got, rank + 1);

	memset(all, 0xff, total * sizeof *all);
	MPI_Allgatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
	show("allgatherv_c", all, total);
	memset(all, 0xff, total * sizeof *all);
	MPI_Allgatherv_init_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
	MPI_Start(&req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	MPI_Request_free(&req);
	show("allgatherv_init_c", all, total);

	/* Alltoallv: rank r sends j+1 ints to rank j. */
	MPI_Count *sc = malloc(size * sizeof *sc), *rc = malloc(size * sizeof *rc);
	MPI_Aint *sd = malloc(size * sizeof *sd), *rd = malloc(size * sizeof *rd);
	int stot = 0, rtot = 0;
	for (int j = 0; j < size; j++) {
		sc[j] = j + 1, sd[j] = stot, stot += j + 1;
		rc[j] = rank + 1, rd[j] = rtot, rtot += rank + 1;
	}
	int *sb = malloc(stot * sizeof *sb), *rb = malloc(rtot * sizeof *rb);
	for (int k = 0; k < stot; k++)
		sb[k] = 1000 * rank + k;
	memset(rb, 0xff, rtot * sizeof *rb);
	MPI_Alltoallv_c(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD);
	show("alltoallv_c", rb, rtot);
	memset(rb, 0xff, rtot * sizeof *rb);
	MPI_Ialltoallv_c(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	show("ialltoallv_c", rb, rtot);

	/* Alltoallw: byte displacements, a type per peer. */
	MPI_Datatype *types = malloc(size * sizeof *types);
	MPI_Aint *sdb = malloc(size * sizeof *sdb), *rdb = malloc(size * sizeof *rdb);
	for (int j = 0; j < size; j++) {
		types[j] = MPI_INT;
		sdb[j] = sd[j] * sizeof(int);
		rdb[j] = rd[j] * sizeof(int);
	}
	memset(rb, 0xff, rtot * sizeof *rb);
	MPI_Alltoallw_c(sb, sc, sdb, types, rb, rc, rdb, types, MPI_COMM_WORLD);
	show("alltoallw_c", rb, rtot);

	/* Reduce_scatter: rank i gets i+1 sums. */
	MPI_Count *rsc = malloc(size * sizeof *rsc);
	for (int i = 0; i < size; i++)
		rsc[i] = i + 1;
	int *rsin = malloc(total * sizeof *rsin), rsout[64];
	for (int k = 0; k < total; k++)
		rsin[k] = rank * k + 1;
	MPI_Reduce_scatter_c(rsin, rsout, rsc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	show("reduce_scatter_c", rsout, rank + 1);
	MPI_Ireduce_scatter_c(rsin, rsout, rsc, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	show("ireduce_scatter_c", rsout, rank + 1);

	/* A periodic ring: in-neighbours left then right. Unequal counts each
	 * way; two ranks are each other's left and right neighbour, where
	 * MPICH matches such blocks otherwise (nbr.c covers that case). */
	int dims[1] = {size}, periods[1] = {1};
	MPI_Comm ring;
	MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
	MPI_Count nsc[2] = {1, 2}, nrc[2] = {2, 1};
	MPI_Aint nsd[2] = {0, 1}, nrd[2] = {3, 0};
	int nsb[3] = {10 * rank, 10 * rank + 1, 10 * rank + 2}, nrb[5];
	memset(nrb, 0xff, sizeof nrb);
	if (size > 2) {
		MPI_Neighbor_alltoallv_c(nsb, nsc, nsd, MPI_INT, nrb, nrc, nrd, MPI_INT, ring);
		show("neighbor_alltoallv_c", nrb, 5);
	}
	MPI_Count ngc[2] = {1, 1};
	MPI_Aint ngd[2] = {1, 0};
	memset(nrb, 0xff, sizeof nrb);
	MPI_Neighbor_allgatherv_c(nsb, 1, MPI_INT, nrb, ngc, ngd, MPI_INT, ring);
	show("neighbor_allgatherv_c", nrb, 2);
	MPI_Datatype nt[2] = {MPI_INT, MPI_INT};
	MPI_Aint nsdb[2] = {0, 4}, nrdb[2] = {12, 0};
	memset(nrb, 0xff, sizeof nrb);
	if (size > 2) {
		MPI_Ineighbor_alltoallw_c(nsb, nsc, nsdb, nt, nrb, nrc, nrdb, nt, ring, &req);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
		show("ineighbor_alltoallw_c", nrb, 5);
	}
	MPI_Comm_free(&ring);

	/* Constructors: pack a known buffer through each. */
	int src[64], packed[64];
	for (int k = 0; k < 64; k++)
		src[k] = k;
	MPI_Count bl[3] = {2, 1, 3}, dl[3] = {0, 5, 9}, bdl[3] = {0, 20, 36};
	MPI_Datatype t[6];
	MPI_Type_indexed_c(3, bl, dl, MPI_INT, &t[0]);
	MPI_Type_create_hindexed_c(3, bl, bdl, MPI_INT, &t[1]);
	MPI_Type_create_indexed_block_c(3, 2, dl, MPI_INT, &t[2]);
	MPI_Type_create_hindexed_block_c(3, 2, bdl, MPI_INT, &t[3]);
	MPI_Datatype st[3] = {MPI_INT, MPI_CHAR, MPI_DOUBLE};
	MPI_Count sl[3] = {2, 3, 1}, sdl[3] = {0, 8, 16};
	MPI_Type_create_struct_c(3, sl, sdl, st, &t[4]);
	MPI_Count sizes[2] = {6, 8}, subs[2] = {2, 3}, starts[2] = {1, 4};
	MPI_Type_create_subarray_c(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t[5]);
	for (int k = 0; k < 6; k++) {
		MPI_Type_commit(&t[k]);
		int sz, pos = 0;
		MPI_Aint lb, ext;
		MPI_Type_size(t[k], &sz);
		MPI_Type_get_extent(t[k], &lb, &ext);
		memset(packed, 0, sizeof packed);
		MPI_Pack(src, 1, t[k], packed, sizeof packed, &pos, MPI_COMM_SELF);
		OUT("type %d: size %d lb %ld extent %ld packed %d", k, sz, (long)lb, (long)ext, pos);
		if (k != 4)
			show("  bytes", packed, pos / 4);
	}
	MPI_Count ni, na, nc, nd;
	int comb;
	MPI_Datatype vec;
	MPI_Type_vector(3, 2, 5, MPI_INT, &vec);
	MPI_Type_get_envelope_c(vec, &ni, &na, &nc, &nd, &comb);
	OUT("envelope_c of a vector: %ld %ld %ld %ld combiner %s", (long)ni, (long)na, (long)nc, (long)nd,
	    comb == MPI_COMBINER_VECTOR ? "vector" : "other");
	int ci[3];
	MPI_Aint ca[1];
	MPI_Count cc[1];
	MPI_Datatype cd[1];
	MPI_Type_get_contents_c(vec, ni, na, nc, nd, ci, ca, cc, cd);
	OUT("contents_c: %d %d %d %s", ci[0], ci[1], ci[2], cd[0] == MPI_INT ? "MPI_INT" : "other");
	MPI_Type_free(&vec);
	for (int k = 0; k < 6; k++)
		MPI_Type_free(&t[k]);

	/* A user operation of the large-count kind. */
	MPI_Op op;
	MPI_Op_create_c(mix, 0, &op);
	int v[4] = {rank, rank + 1, 2 * rank, 1}, r[4];
	MPI_Allreduce(v, r, 4, MPI_INT, op, MPI_COMM_WORLD);
	show("op_create_c allreduce", r, 4);
	MPI_Reduce_c(v, r, 4, MPI_INT, op, 0, MPI_COMM_WORLD);
	if (rank == 0)
		show("op_create_c reduce_c", r, 4);
	MPI_Op_free(&op);

	/* Over Ethervia, which moves at most 2^31 - 1 elements per call, a
	 * count beyond that is MPI_ERR_COUNT before anything moves (MPICH would
	 * move 8 GB, so it is not asked). Y lines are not compared. */
	if (strstr(library, "Ethervia")) {
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		MPI_Count huge[64];
		for (int j = 0; j < size; j++)
			huge[j] = (MPI_Count)1 << 31;
		int cls[2], code;
		code = MPI_Allgatherv_c(mine, 1, MPI_INT, all, huge, displs, MPI_INT, MPI_COMM_WORLD);
		MPI_Error_class(code, &cls[0]);
		MPI_Datatype bad;
		code = MPI_Type_indexed_c(3, huge, dl, MPI_INT, &bad);
		MPI_Error_class(code, &cls[1]);
		printf("Y%d beyond int: %s %s\n", rank, cls[0] == MPI_ERR_COUNT ? "MPI_ERR_COUNT" : "other",
		       cls[1] == MPI_ERR_COUNT ? "MPI_ERR_COUNT" : "other");
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	}

	MPI_Barrier(MPI_COMM_WORLD);
	OUT("done");
	MPI_Finalize();
	return 0;
}
