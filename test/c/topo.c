/* topo.c: groups (Comm_group, incl, excl, ranges, union, intersection,
 * difference, translate_ranks, compare), communicators from groups
 * (Comm_create, Comm_compare), and Cartesian topologies (Dims_create,
 * Cart_create, coords, rank, shift, sub, get, Topo_test), graph and
 * distributed graph topologies. Every result
 * line starts with G<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("G%d %s\n", rank, l_); fflush(stdout); } while (0)

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, r, n;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);

	/* groups */
	MPI_Group world, evens, odds, firsttwo, u, x, d, rev;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	int ev[64], ne = 0, rv[64];
	for (int i = 0; i < size; i += 2)
		ev[ne++] = i;
	for (int i = 0; i < size; i++)
		rv[i] = size - 1 - i;
	MPI_Group_incl(world, ne, ev, &evens);
	MPI_Group_excl(world, ne, ev, &odds);
	int range[1][3] = {{0, 1, 1}};
	MPI_Group_range_incl(world, 1, range, &firsttwo);
	MPI_Group_incl(world, size, rv, &rev);
	MPI_Group_union(odds, firsttwo, &u);
	MPI_Group_intersection(evens, firsttwo, &x);
	MPI_Group_difference(world, firsttwo, &d);
	int su, sx, sd, re, ro;
	MPI_Group_size(u, &su);
	MPI_Group_size(x, &sx);
	MPI_Group_size(d, &sd);
	MPI_Group_rank(evens, &re);
	MPI_Group_rank(odds, &ro);
	OUT("groups: union %d intersection %d difference %d; rank in evens %d in odds %d", su, sx, sd, re, ro);
	int in[3] = {0, 1, MPI_PROC_NULL}, outr[3];
	MPI_Group_translate_ranks(firsttwo, 2, in, rev, outr);
	MPI_Group_translate_ranks(world, 3, in, evens, outr + 0);
	OUT("translate: %d %d %d", outr[0], outr[1] == MPI_UNDEFINED ? -99 : outr[1], outr[2] == MPI_PROC_NULL);
	int c1, c2, c3;
	MPI_Group_compare(world, world, &c1);
	MPI_Group_compare(world, rev, &c2);
	MPI_Group_compare(world, evens, &c3);
	OUT("group compare: %d %d %d", c1, c2, c3);
	MPI_Comm ecomm, rcomm, dup;
	MPI_Comm_create(MPI_COMM_WORLD, evens, &ecomm);
	MPI_Comm_create(MPI_COMM_WORLD, rev, &rcomm);
	if (ecomm != MPI_COMM_NULL) {
		int s, sum;
		MPI_Comm_rank(ecomm, &r);
		MPI_Comm_size(ecomm, &s);
		MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ecomm);
		OUT("evens comm: rank %d of %d, sum of world ranks %d", r, s, sum);
		MPI_Comm_free(&ecomm);
	} else {
		OUT("not in the evens comm");
	}
	MPI_Comm_rank(rcomm, &r);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &c1);
	MPI_Comm_compare(MPI_COMM_WORLD, dup, &c2);
	MPI_Comm_compare(MPI_COMM_WORLD, rcomm, &c3);
	OUT("reversed comm rank %d; comm compare %d %d %d", r, c1, c2, size > 1 ? c3 : -1);
	MPI_Comm_free(&rcomm);
	MPI_Comm_free(&dup);
	MPI_Group_free(&world);
	MPI_Group_free(&evens);
	MPI_Group_free(&odds);
	MPI_Group_free(&firsttwo);
	MPI_Group_free(&rev);
	MPI_Group_free(&u);
	MPI_Group_free(&x);
	MPI_Group_free(&d);
	OUT("freed group is MPI_GROUP_NULL %d", d == MPI_GROUP_NULL);

	/* Dims_create */
	int cases[][2] = {{4, 2}, {6, 2}, {8, 3}, {12, 2}, {16, 3}, {24, 3}, {36, 2}, {60, 3}, {30, 3}, {7, 2}, {64, 3}, {48, 4}};
	if (rank == 0)
		for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
			int dims[4] = {0, 0, 0, 0};
			MPI_Dims_create(cases[k][0], cases[k][1], dims);
			OUT("dims_create(%d, %d) = %d %d %d %d", cases[k][0], cases[k][1], dims[0], dims[1], dims[2], dims[3]);
		}
	int fixed[3] = {0, 2, 0};
	MPI_Dims_create(12, 3, fixed);
	OUT("dims_create(12, {0,2,0}) = %d %d %d", fixed[0], fixed[1], fixed[2]);

	/* a periodic-by-non-periodic grid over the world */
	int dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2];
	MPI_Dims_create(size, 2, dims);
	MPI_Comm grid;
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
	int topo;
	MPI_Topo_test(grid, &topo);
	MPI_Topo_test(MPI_COMM_WORLD, &n);
	MPI_Comm_rank(grid, &r);
	MPI_Cart_coords(grid, r, 2, coords);
	int back, src0, dst0, src1, dst1;
	MPI_Cart_rank(grid, coords, &back);
	MPI_Cart_shift(grid, 0, 1, &src0, &dst0);
	MPI_Cart_shift(grid, 1, 1, &src1, &dst1);
	OUT("cart %dx%d: topo %d (world %d), rank %d at (%d,%d) back %d; shift0 %d->%d shift1 %d->%d", dims[0], dims[1],
	    topo == MPI_CART, n == MPI_UNDEFINED, r, coords[0], coords[1], back, src0, dst0, src1, dst1);
	int nd, gd[2], gp[2], gc[2];
	MPI_Cartdim_get(grid, &nd);
	MPI_Cart_get(grid, 2, gd, gp, gc);
	OUT("cart_get: %d dims %d %d periods %d %d coords %d %d", nd, gd[0], gd[1], gp[0], gp[1], gc[0], gc[1]);
	int keep[2] = {0, 1};
	MPI_Comm row;
	MPI_Cart_sub(grid, keep, &row);
	int rr, rs, rsum;
	MPI_Comm_rank(row, &rr);
	MPI_Comm_size(row, &rs);
	MPI_Allreduce(&rank, &rsum, 1, MPI_INT, MPI_SUM, row);
	MPI_Cartdim_get(row, &nd);
	OUT("row: rank %d of %d, sum %d, %d dims", rr, rs, rsum, nd);
	MPI_Comm_free(&row);
	MPI_Comm_free(&grid);

	/* a graph: a ring where every node also links to node 0 */
	int index[64], edges[128], ne2 = 0;
	for (int i = 0; i < size; i++) {
		edges[ne2++] = (i + 1) % size;
		if (i != 0)
			edges[ne2++] = 0;
		index[i] = ne2;
	}
	MPI_Comm g;
	MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g);
	int gn, ge, cnt, nb[8];
	MPI_Topo_test(g, &topo);
	MPI_Graphdims_get(g, &gn, &ge);
	MPI_Graph_neighbors_count(g, rank, &cnt);
	MPI_Graph_neighbors(g, rank, 8, nb);
	OUT("graph: topo %d, %d nodes %d edges, %d neighbours, first %d last %d", topo == MPI_GRAPH, gn, ge, cnt, nb[0], nb[cnt - 1]);
	MPI_Comm_free(&g);

	/* a distributed graph: receive from the left, send to the right, weighted */
	int srcs[1] = {(rank + size - 1) % size}, dsts[1] = {(rank + 1) % size}, sw[1] = {rank + 1}, dw[1] = {rank + 2};
	MPI_Comm dg;
	MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, sw, 1, dsts, dw, MPI_INFO_NULL, 0, &dg);
	int indeg, outdeg, weighted, s1[1], w1[1], d1[1], w2[1];
	MPI_Topo_test(dg, &topo);
	MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
	MPI_Dist_graph_neighbors(dg, 1, s1, w1, 1, d1, w2);
	OUT("dist graph: topo %d, in %d out %d weighted %d, source %d (%d) dest %d (%d)", topo == MPI_DIST_GRAPH, indeg, outdeg, weighted,
	    s1[0], w1[0], d1[0], w2[0]);
	MPI_Comm dgu;
	MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dgu);
	MPI_Dist_graph_neighbors_count(dgu, &indeg, &outdeg, &weighted);
	OUT("unweighted dist graph: weighted %d", weighted);
	MPI_Comm_free(&dg);
	MPI_Comm_free(&dgu);
	/* MPI_Comm_create_group: the even ranks, in reverse order, made by
	 * themselves alone while the odd ranks do something else. */
	{
		MPI_Group wg, eg;
		int er[64], ne2 = 0;
		for (int i = (size - 1) / 2 * 2; i >= 0; i -= 2)
			er[ne2++] = i;
		MPI_Comm_group(MPI_COMM_WORLD, &wg);
		MPI_Group_incl(wg, ne2, er, &eg);
		if (rank % 2 == 0) {
			MPI_Comm ec;
			int erank, esize, esum;
			MPI_Comm_create_group(MPI_COMM_WORLD, eg, 17, &ec);
			MPI_Comm_rank(ec, &erank);
			MPI_Comm_size(ec, &esize);
			MPI_Allreduce(&rank, &esum, 1, MPI_INT, MPI_SUM, ec);
			OUT("create_group: %d of %d, sum %d", erank, esize, esum);
			MPI_Comm_free(&ec);
		}
		MPI_Group_free(&eg);
		MPI_Group_free(&wg);
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
