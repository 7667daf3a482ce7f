/* nbr.c: neighbourhood collectives (MPI 3.0 section 7.6) on Cartesian,
 * graph and distributed graph communicators, blocking, nonblocking and
 * persistent, with a derived datatype on the receive side; and
 * MPI_Dist_graph_create (edges named by any rank). Every result line
 * starts with H<rank>; the test compares them with MPICH's. */
#include <stdio.h>
#include <stdlib.h>

#define RESULT_TAG 'H'
#include "result.h"

static int cmpint(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int main(int argc, char **argv) {
	start(&argc, &argv);

	/* A 2-D grid, periodic in the first dimension only: the halo exchange
	 * of a stencil code. Off the non-periodic edge the neighbour is
	 * MPI_PROC_NULL and the receive slot keeps its value (-1). */
	int dims[2] = {0, 0}, periods[2] = {1, 0};
	MPI_Dims_create(size, 2, dims);
	MPI_Comm cart;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
	int sb[4], rb[4];
	for (int i = 0; i < 4; i++)
		sb[i] = 100 * rank + i, rb[i] = -1;
	MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, cart);
	show("cart alltoall", rb, 4);
	for (int i = 0; i < 4; i++)
		rb[i] = -1;
	MPI_Neighbor_allgather(&rank, 1, MPI_INT, rb, 1, MPI_INT, cart);
	show("cart allgather", rb, 4);

	/* Nonblocking, twice in flight, then persistent, started twice. */
	int rb2[4];
	MPI_Request rq[2];
	for (int i = 0; i < 4; i++)
		rb[i] = rb2[i] = -1;
	int two = 2 * rank;
	MPI_Ineighbor_allgather(&rank, 1, MPI_INT, rb, 1, MPI_INT, cart, &rq[0]);
	MPI_Ineighbor_allgather(&two, 1, MPI_INT, rb2, 1, MPI_INT, cart, &rq[1]);
	MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
	MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
	show("cart iallgather 1", rb, 4);
	show("cart iallgather 2", rb2, 4);
	MPI_Request pr;
	MPI_Neighbor_alltoall_init(sb, 1, MPI_INT, rb, 1, MPI_INT, cart, MPI_INFO_NULL, &pr);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 4; i++)
			sb[i] = 1000 * round + 100 * rank + i, rb[i] = -1;
		MPI_Start(&pr);
		MPI_Wait(&pr, MPI_STATUS_IGNORE);
		show(round ? "cart persistent 1" : "cart persistent 0", rb, 4);
	}
	MPI_Request_free(&pr);

	/* A ring as a graph topology (both neighbours, a multigraph at two
	 * ranks), with alltoallv and a strided receive type. */
	int *index = malloc(size * sizeof *index), *edges = malloc(2 * size * sizeof *edges);
	for (int i = 0; i < size; i++) {
		index[i] = 2 * (i + 1);
		edges[2 * i] = (i + size - 1) % size;
		edges[2 * i + 1] = (i + 1) % size;
	}
	MPI_Comm ring;
	MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &ring);
	int sv[6], sc[2] = {2, 2}, sd[2] = {0, 3}, rv[6] = {-1, -1, -1, -1, -1, -1}, rc[2] = {2, 2}, rd[2] = {4, 1};
	for (int i = 0; i < 6; i++)
		sv[i] = 10 * rank + i;
	MPI_Neighbor_alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, ring);
	show("ring alltoallv", rv, 6);
	/* Each neighbour's two ints land 2 apart: a vector type on receive. */
	MPI_Datatype every2;
	MPI_Type_vector(2, 1, 2, MPI_INT, &every2);
	MPI_Type_commit(&every2);
	int pair[2] = {rank, -rank}, spread[8];
	for (int i = 0; i < 8; i++)
		spread[i] = -7;
	int rcv[2] = {1, 1}, dsp[2] = {0, 1};
	/* extent of every2 is 3 ints: neighbour 0 at 0 and 2, neighbour 1 at 3 and 5 */
	MPI_Neighbor_allgatherv(pair, 2, MPI_INT, spread, rcv, dsp, every2, ring);
	show("ring allgatherv vector", spread, 8);
	MPI_Type_free(&every2);

	/* MPI_Dist_graph_create: rank 0 names every edge i -> i+1 and i -> i+2
	 * (mod size) with weights; the others name none. */
	int n = 0, *srcs = NULL, *degs = NULL, *dsts = NULL, *wts = NULL;
	if (rank == 0) {
		n = size;
		srcs = malloc(size * sizeof *srcs);
		degs = malloc(size * sizeof *degs);
		dsts = malloc(2 * size * sizeof *dsts);
		wts = malloc(2 * size * sizeof *wts);
		for (int i = 0; i < size; i++) {
			srcs[i] = i, degs[i] = 2;
			dsts[2 * i] = (i + 1) % size, dsts[2 * i + 1] = (i + 2) % size;
			wts[2 * i] = i + 1, wts[2 * i + 1] = i + 2;
		}
	}
	MPI_Comm dg;
	MPI_Dist_graph_create(MPI_COMM_WORLD, n, srcs, degs, dsts, wts, MPI_INFO_NULL, 0, &dg);
	int indeg, outdeg, weighted;
	MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
	OUT("dist counts in %d out %d weighted %d", indeg, outdeg, weighted);
	int in[4], inw[4], out[4], outw[4];
	MPI_Dist_graph_neighbors(dg, 4, in, inw, 4, out, outw);
	/* The order of edges named by one rank is not fixed by MPI: sort. */
	qsort(in, indeg, sizeof *in, cmpint);
	qsort(inw, indeg, sizeof *inw, cmpint);
	qsort(out, outdeg, sizeof *out, cmpint);
	qsort(outw, outdeg, sizeof *outw, cmpint);
	show("dist in", in, indeg);
	show("dist in weights", inw, indeg);
	show("dist out", out, outdeg);
	show("dist out weights", outw, outdeg);
	/* alltoallw over it: every out-neighbour gets this rank's number as an
	 * int, received as ints at byte displacements. */
	int w1[4] = {rank, rank, rank, rank}, w2[4] = {-1, -1, -1, -1}, wc[4] = {1, 1, 1, 1};
	MPI_Aint wsd[4] = {0, 4, 8, 12}, wrd[4] = {0, 4, 8, 12};
	MPI_Datatype wt[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
	MPI_Neighbor_alltoallw(w1, wc, wsd, wt, w2, wc, wrd, wt, dg);
	qsort(w2, indeg, sizeof *w2, cmpint);
	show("dist alltoallw", w2, indeg);

	MPI_Comm_free(&dg);
	MPI_Comm_free(&ring);
	MPI_Comm_free(&cart);
	free(index);
	free(edges);
	free(srcs);
	free(degs);
	free(dsts);
	free(wts);
	MPI_Barrier(MPI_COMM_WORLD);
	OUT("done");
	MPI_Finalize();
	return 0;
}
