/* dtype.c: derived datatypes and the pair types. Constructors, extents
 * and sizes, Pack/Unpack, Get_elements and Get_count, and communication
 * with them: a vector halo exchange, indexed, struct and subarray
 * messages, nonblocking receives into derived types, collectives
 * (Bcast, Gather, Allgather, Alltoall, Allreduce over a derived type of
 * doubles), MINLOC/MAXLOC on MPI_DOUBLE_INT and MPI_2INT. Every result
 * line starts with D<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("D%d %s\n", rank, l_); fflush(stdout); } while (0)

struct particle {
	double x[3];
	int id;
	char tag;
};

#define N 6

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	MPI_Aint lb, ext;
	int sz;

	/* a column of an N x N grid: vector, halo exchange with both neighbours */
	double grid[N][N];
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			grid[i][j] = rank * 100 + i * 10 + j;
	MPI_Datatype col;
	MPI_Type_vector(N, 1, N, MPI_DOUBLE, &col);
	MPI_Type_commit(&col);
	MPI_Type_size(col, &sz);
	MPI_Type_get_extent(col, &lb, &ext);
	OUT("vector: size %d lb %ld extent %ld", sz, (long)lb, (long)ext);
	MPI_Type_get_true_extent(col, &lb, &ext);
	OUT("vector: true lb %ld true extent %ld", (long)lb, (long)ext);
	MPI_Status st;
	MPI_Sendrecv(&grid[0][N - 2], 1, col, right, 0, &grid[0][0], 1, col, left, 0, MPI_COMM_WORLD, &st);
	int cnt, el;
	MPI_Get_count(&st, col, &cnt);
	MPI_Get_elements(&st, col, &el);
	OUT("halo: column 0 = %g %g %g %g %g %g; count %d elements %d", grid[0][0], grid[1][0], grid[2][0], grid[3][0], grid[4][0],
	    grid[5][0], cnt, el);

	/* indexed: the upper triangle of a matrix */
	int lens[N], disps[N];
	for (int i = 0; i < N; i++) {
		lens[i] = N - i;
		disps[i] = i * N + i;
	}
	MPI_Datatype upper;
	MPI_Type_indexed(N, lens, disps, MPI_DOUBLE, &upper);
	MPI_Type_commit(&upper);
	double m[N][N], m2[N][N];
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			m[i][j] = rank + i + j * 0.5;
			m2[i][j] = -1;
		}
	MPI_Request rq;
	MPI_Irecv(m2, 1, upper, left, 1, MPI_COMM_WORLD, &rq);
	MPI_Send(m, 1, upper, right, 1, MPI_COMM_WORLD);
	MPI_Wait(&rq, &st);
	double tri = 0;
	int untouched = 0;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			if (j >= i)
				tri += m2[i][j];
			else if (m2[i][j] == -1)
				untouched++;
		}
	MPI_Type_size(upper, &sz);
	OUT("indexed (Irecv): sum %g, lower triangle untouched %d, size %d", tri, untouched, sz);

	/* struct, resized to the C struct, broadcast from the last rank */
	struct particle p[3];
	int blens[3] = {3, 1, 1};
	MPI_Aint pdisp[3] = {offsetof(struct particle, x), offsetof(struct particle, id), offsetof(struct particle, tag)};
	MPI_Datatype ptypes[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, ptype0, ptype;
	MPI_Type_create_struct(3, blens, pdisp, ptypes, &ptype0);
	MPI_Type_get_extent(ptype0, &lb, &ext);
	OUT("struct: extent %ld (C says %zu)", (long)ext, sizeof(struct particle));
	MPI_Type_create_resized(ptype0, 0, sizeof(struct particle), &ptype);
	MPI_Type_commit(&ptype);
	memset(p, 0, sizeof p);
	if (rank == size - 1)
		for (int i = 0; i < 3; i++) {
			p[i].x[0] = i;
			p[i].x[1] = i * 2.5;
			p[i].x[2] = -i;
			p[i].id = 40 + i;
			p[i].tag = 'a' + i;
		}
	MPI_Bcast(p, 3, ptype, size - 1, MPI_COMM_WORLD);
	OUT("struct Bcast: %g %g %g %d %c | %g %d %c", p[2].x[0], p[2].x[1], p[2].x[2], p[2].id, p[2].tag, p[1].x[1], p[1].id, p[0].tag);

	/* Pack and Unpack */
	char packed[1024];
	int pos = 0, psize;
	MPI_Pack_size(2, ptype, MPI_COMM_WORLD, &psize);
	MPI_Pack(p, 2, ptype, packed, sizeof packed, &pos, MPI_COMM_WORLD);
	MPI_Pack(&grid[0][0], 1, col, packed, sizeof packed, &pos, MPI_COMM_WORLD);
	struct particle q[2];
	double c2[N][N];
	int upos = 0;
	MPI_Unpack(packed, pos, &upos, q, 2, ptype, MPI_COMM_WORLD);
	MPI_Unpack(packed, pos, &upos, c2, 1, col, MPI_COMM_WORLD);
	OUT("Pack: size bound ok %d, packed %d, unpacked %d: %g %d %c, %g %g", psize >= 2 * (24 + 4 + 1), pos, upos, q[1].x[1], q[1].id,
	    q[1].tag, c2[1][0], c2[5][0]);

	/* subarray: the 2x3 block at (1,2) of a 4x6 array, to the next rank */
	int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
	MPI_Datatype sub;
	MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
	MPI_Type_commit(&sub);
	int a[4][6], b[4][6];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 6; j++) {
			a[i][j] = rank * 1000 + i * 10 + j;
			b[i][j] = 0;
		}
	MPI_Sendrecv(a, 1, sub, right, 2, b, 1, sub, left, 2, MPI_COMM_WORLD, &st);
	MPI_Type_get_extent(sub, &lb, &ext);
	OUT("subarray: %d %d %d / %d %d %d, corners %d %d, extent %ld", b[1][2], b[1][3], b[1][4], b[2][2], b[2][3], b[2][4], b[0][0], b[3][5],
	    (long)ext);

	/* collectives: vectors in Allgather and Gather, contiguous in Alltoall
	 * (predefined reduction operations take predefined types only) */
	MPI_Datatype pair, trip;
	MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
	MPI_Type_commit(&pair);
	int rc;
	double v[6], r[6];
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Allreduce(v, r, 3, pair, MPI_SUM, MPI_COMM_WORLD);
	MPI_Error_class(rc, &rc);
	OUT("MPI_SUM on a derived type refused: %d", rc == MPI_ERR_OP);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	MPI_Type_vector(3, 1, 2, MPI_INT, &trip);
	MPI_Type_commit(&trip);
	int mine[6] = {rank, -1, rank * 2, -1, rank * 3, -1}, all[64];
	MPI_Allgather(mine, 1, trip, all, 3, MPI_INT, MPI_COMM_WORLD);
	OUT("Allgather from a vector: %d %d %d %d %d %d", all[0], all[1], all[2], all[3], all[4], all[5]);
	int gathered[128];
	memset(gathered, 0, sizeof gathered);
	MPI_Gather(mine, 3, MPI_INT, gathered, 1, trip, 0, MPI_COMM_WORLD);
	if (rank == 0)
		OUT("Gather into vectors: %d %d %d %d %d %d %d", gathered[0], gathered[1], gathered[2], gathered[3], gathered[4], gathered[5],
		    gathered[6]);
	int at[64], ar[64];
	for (int i = 0; i < 2 * size; i++)
		at[i] = rank * 100 + i;
	MPI_Datatype two;
	MPI_Type_contiguous(2, MPI_INT, &two);
	MPI_Type_commit(&two);
	MPI_Alltoall(at, 1, two, ar, 2, MPI_INT, MPI_COMM_WORLD);
	OUT("Alltoall: %d %d %d %d", ar[0], ar[1], ar[2 * size - 2], ar[2 * size - 1]);

	/* MINLOC and MAXLOC */
	struct {
		double v;
		int i;
	} dv = {(rank % 2) ? rank * 1.5 : -rank, rank}, dmin, dmax;
	MPI_Allreduce(&dv, &dmin, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
	MPI_Allreduce(&dv, &dmax, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	int iv[4] = {rank % 2, rank, size - rank, rank}, imax[4];
	MPI_Reduce(iv, imax, 2, MPI_2INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
	OUT("MINLOC %g at %d, MAXLOC %g at %d", dmin.v, dmin.i, dmax.v, dmax.i);
	if (rank == 0)
		OUT("2INT MAXLOC: %d at %d, %d at %d", imax[0], imax[1], imax[2], imax[3]);

	/* dup, free, get_elements on a partial message */
	MPI_Datatype cdup;
	MPI_Type_dup(col, &cdup);
	MPI_Type_size(cdup, &sz);
	MPI_Type_free(&cdup);
	OUT("dup size %d, freed null %d", sz, cdup == MPI_DATATYPE_NULL);
	double part[4] = {1, 2, 3, 4}, recvd[N][N];
	MPI_Sendrecv(part, 4, MPI_DOUBLE, right, 3, recvd, 1, col, left, 3, MPI_COMM_WORLD, &st);
	MPI_Get_count(&st, col, &cnt);
	MPI_Get_elements(&st, col, &el);
	OUT("partial: count undefined %d, elements %d, got %g %g", cnt == MPI_UNDEFINED, el, recvd[0][0], recvd[3][0]);

	/* envelopes and contents: decode each constructor, as I/O layers
	 * and tracers do */
	{
		MPI_Datatype v, hv, ix, st, rs, sa, dp, ib, inner[2] = {MPI_INT, MPI_DOUBLE};
		int blens[3] = {2, 1, 3}, disp[3] = {0, 4, 9}, sizes[2] = {6, 5}, subs[2] = {2, 3}, starts[2] = {1, 2};
		MPI_Aint adisp[2] = {0, 8};
		MPI_Type_vector(3, 2, 5, MPI_INT, &v);
		MPI_Type_create_hvector(2, 1, 64, v, &hv);
		MPI_Type_indexed(3, blens, disp, MPI_FLOAT, &ix);
		MPI_Type_create_struct(2, blens, adisp, inner, &st);
		MPI_Type_create_resized(st, -4, 32, &rs);
		MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_CHAR, &sa);
		MPI_Type_dup(ix, &dp);
		MPI_Type_create_indexed_block(2, 4, disp, MPI_SHORT, &ib);
		MPI_Datatype all[] = {MPI_INT, v, hv, ix, st, rs, sa, dp, ib};
		for (int k = 0; k < (int)(sizeof all / sizeof *all); k++) {
			int ni, na, nd, comb;
			MPI_Type_get_envelope(all[k], &ni, &na, &nd, &comb);
			char line[600];
			int off = snprintf(line, sizeof line, "envelope %d: combiner %d ints %d aints %d types %d", k, comb, ni, na, nd);
			if (comb != MPI_COMBINER_NAMED) {
				int is[32];
				MPI_Aint as[8];
				MPI_Datatype ts[4];
				MPI_Type_get_contents(all[k], 32, 8, 4, is, as, ts);
				for (int i = 0; i < ni; i++)
					off += snprintf(line + off, sizeof line - off, " i%d", is[i]);
				for (int i = 0; i < na; i++)
					off += snprintf(line + off, sizeof line - off, " a%ld", (long)as[i]);
				for (int i = 0; i < nd; i++) {
					int tn, ta, td, tc, sz;
					MPI_Type_get_envelope(ts[i], &tn, &ta, &td, &tc);
					MPI_Type_size(ts[i], &sz);
					off += snprintf(line + off, sizeof line - off, " t(comb %d size %d)", tc, sz);
					if (tc != MPI_COMBINER_NAMED)
						MPI_Type_free(&ts[i]);
				}
			}
			OUT("%s", line);
		}
		MPI_Type_free(&v);
		MPI_Type_free(&hv);
		MPI_Type_free(&ix);
		MPI_Type_free(&st);
		MPI_Type_free(&rs);
		MPI_Type_free(&sa);
		MPI_Type_free(&dp);
		MPI_Type_free(&ib);
	}

	/* derived datatypes on both sides of the vector collectives: a
	 * column of a row-major matrix as the receive type of Allgatherv and
	 * Gatherv, a resized pair for Alltoallv and Scatterv */
	{
		MPI_Datatype colv, colr, pr, prr;
		int M[8][64];
		MPI_Type_vector(8, 1, 64, MPI_INT, &colv);
		MPI_Type_create_resized(colv, 0, sizeof(int), &colr); /* one column, next one int along */
		MPI_Type_commit(&colr);
		int mine[8], *vc = malloc(size * sizeof(int)), *vd = malloc(size * sizeof(int));
		for (int i = 0; i < 8; i++)
			mine[i] = 100 * rank + i;
		for (int i = 0; i < size; i++)
			vc[i] = 1, vd[i] = 2 * i; /* rank i's column lands at column 2i */
		for (int i = 0; i < 8; i++)
			for (int j = 0; j < 64; j++)
				M[i][j] = -1;
		MPI_Allgatherv(mine, 8, MPI_INT, M, vc, vd, colr, MPI_COMM_WORLD);
		OUT("Allgatherv into columns: %d %d %d %d %d", M[0][0], M[7][0], M[0][1], M[3][2], M[7][2 * (size - 1)]);
		for (int i = 0; i < 8; i++)
			for (int j = 0; j < 64; j++)
				M[i][j] = -1;
		MPI_Gatherv(mine, 8, MPI_INT, M, vc, vd, colr, size - 1, MPI_COMM_WORLD);
		if (rank == size - 1)
			OUT("Gatherv into columns: %d %d %d", M[0][0], M[5][2], M[7][2 * (size - 1)]);
		MPI_Type_contiguous(2, MPI_INT, &pr);
		MPI_Type_create_resized(pr, 0, 3 * sizeof(int), &prr); /* pairs 3 ints apart */
		MPI_Type_commit(&prr);
		int sp[3 * 64], rp[3 * 64], *ac = malloc(size * sizeof(int)), *ad = malloc(size * sizeof(int));
		for (int i = 0; i < 3 * size; i++)
			sp[i] = 1000 * rank + i, rp[i] = -1;
		for (int i = 0; i < size; i++)
			ac[i] = 1, ad[i] = i;
		MPI_Alltoallv(sp, ac, ad, prr, rp, ac, ad, prr, MPI_COMM_WORLD);
		OUT("Alltoallv of resized pairs: %d %d %d %d", rp[0], rp[1], rp[2], rp[3 * (size - 1) + 1]);
		int two[2] = {-1, -1};
		MPI_Scatterv(sp, ac, ad, prr, two, 2, MPI_INT, 0, MPI_COMM_WORLD);
		OUT("Scatterv of resized pairs: %d %d", two[0], two[1]);
		MPI_Type_free(&colv);
		MPI_Type_free(&colr);
		MPI_Type_free(&pr);
		MPI_Type_free(&prr);
		free(vc);
		free(vd);
		free(ac);
		free(ad);
	}

	/* long runs: 512 KiB as 64 rows of 8 KiB (a subarray) into 128 blocks
	 * of 4 KiB 5 KiB apart (a vector), past the eager limit: the library
	 * may write the blocks straight into place */
	{
		enum { ROWS = 64, COLS = 2048, VB = 128, VLEN = 512, VSTRIDE = 640 };
		double *plane = malloc(sizeof(double) * ROWS * COLS), *blocks = malloc(sizeof(double) * VB * VSTRIDE);
		for (int i = 0; i < ROWS * COLS; i++)
			plane[i] = rank * 1e6 + i;
		for (int i = 0; i < VB * VSTRIDE; i++)
			blocks[i] = -1;
		int sizes[2] = {ROWS, COLS}, subs[2] = {ROWS, COLS / 2}, starts[2] = {0, COLS / 4};
		MPI_Datatype half, vec;
		MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &half);
		MPI_Type_vector(VB, VLEN, VSTRIDE, MPI_DOUBLE, &vec);
		MPI_Type_commit(&half);
		MPI_Type_commit(&vec);
		MPI_Request rq;
		MPI_Irecv(blocks, 1, vec, left, 7, MPI_COMM_WORLD, &rq);
		MPI_Send(plane, 1, half, right, 7, MPI_COMM_WORLD);
		MPI_Wait(&rq, &st);
		MPI_Get_count(&st, vec, &cnt);
		double sum = 0;
		int gaps = 0, order = 1;
		for (int b = 0; b < VB; b++)
			for (int j = 0; j < VSTRIDE; j++) {
				double v = blocks[b * VSTRIDE + j];
				if (j >= VLEN) {
					gaps += v == -1;
					continue;
				}
				int k = b * VLEN + j; /* message element k: row k / 1024, column 512 + k % 1024 */
				order &= v == left * 1e6 + (k / (COLS / 2)) * COLS + COLS / 4 + k % (COLS / 2);
				sum += v;
			}
		OUT("long runs: count %d, sum %.0f, in order %d, gaps untouched %d of %d", cnt, sum, order, gaps, VB * (VSTRIDE - VLEN));
		/* and back, vector to subarray, with Isend and Recv */
		for (int i = 0; i < ROWS * COLS; i++)
			plane[i] = -1;
		MPI_Isend(blocks, 1, vec, left, 8, MPI_COMM_WORLD, &rq);
		MPI_Recv(plane, 1, half, right, 8, MPI_COMM_WORLD, &st);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		int back = 1, untouched = 0;
		for (int i = 0; i < ROWS * COLS; i++) {
			int c = i % COLS;
			if (c < COLS / 4 || c >= 3 * COLS / 4)
				untouched += plane[i] == -1;
			else
				back &= plane[i] == rank * 1e6 + i;
		}
		OUT("long runs back: own values %d, untouched %d", back, untouched);
		MPI_Type_free(&half);
		MPI_Type_free(&vec);
		free(plane);
		free(blocks);
	}

	MPI_Type_free(&col);
	MPI_Type_free(&upper);
	MPI_Type_free(&ptype0);
	MPI_Type_free(&ptype);
	MPI_Type_free(&sub);
	MPI_Type_free(&pair);
	MPI_Type_free(&trip);
	MPI_Type_free(&two);
	MPI_Finalize();
	return 0;
}
