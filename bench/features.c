/* features.c: two paths real MPI programs take, for bench/features.sh,
 * built against both MPIs from this one source (mpicc.mpich for our
 * library, mpicc.openmpi for Open MPI). Two ranks.
 *
 *   halo N: an N x N grid of doubles; each rank sends its last column to
 *   the other (an MPI_Type_vector of N doubles, stride N) and receives the
 *   other's into its first column, with MPI_Sendrecv. Prints the time per
 *   exchange.
 *
 *   face R: an R x C grid of doubles (R * C = 128 Ki doubles, 1 MiB);
 *   each rank sends the middle half of every row (an
 *   MPI_Type_create_subarray: R runs of C/2 doubles, 512 KiB in all) to the
 *   other and receives the other's into the same place, with
 *   MPI_Sendrecv. Past the eager limit: the runs may move by RDMA
 *   directly. Prints the time per exchange, and that of the same 512 KiB
 *   as one contiguous block ("face rows=0").
 *
 *   overlap M: an MPI_Iallreduce of M doubles started, a computation of
 *   about the allreduce's own time run, then MPI_Wait. Prints the
 *   allreduce alone, the computation alone and both: both close to the
 *   larger of the two means the collective progressed while the program
 *   computed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

static void compute(long iters) {
	double acc = 0;
	for (long i = 0; i < iters; i++)
		acc += (double)i * 1e-9;
	sink = acc;
}

int main(int argc, char **argv) {
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int other = 1 - rank;
	int ns[] = {64, 512, 2048};
	for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++) {
		int n = ns[k];
		double *g = malloc(sizeof(double) * n * n);
		for (long i = 0; i < (long)n * n; i++)
			g[i] = rank + i;
		MPI_Datatype col;
		MPI_Type_vector(n, 1, n, MPI_DOUBLE, &col);
		MPI_Type_commit(&col);
		int reps = n <= 64 ? 2000 : n <= 512 ? 500 : 100;
		double best = 1e9;
		for (int t = 0; t < 3; t++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < reps; i++)
				MPI_Sendrecv(&g[n - 1], 1, col, other, 0, &g[0], 1, col, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			double dt = (MPI_Wtime() - t0) / reps;
			if (dt < best)
				best = dt;
		}
		if (rank == 0)
			printf("halo n=%d us=%.2f\n", n, best * 1e6);
		MPI_Type_free(&col);
		free(g);
	}
	int rs[] = {0, 64, 128};
	for (unsigned k = 0; k < sizeof rs / sizeof rs[0]; k++) {
		int rows = rs[k] ? rs[k] : 1, cols = (128 << 10) / rows;
		double *g = malloc(sizeof(double) * rows * cols), *h = malloc(sizeof(double) * rows * cols);
		for (long i = 0; i < (long)rows * cols; i++)
			g[i] = rank + i;
		int sizes[2] = {rows, cols}, subs[2] = {rows, cols / 2}, starts[2] = {0, cols / 4};
		MPI_Datatype face;
		if (rs[k] == 0)
			MPI_Type_contiguous(cols / 2, MPI_DOUBLE, &face);
		else
			MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_DOUBLE, &face);
		MPI_Type_commit(&face);
		int reps = 100;
		double best = 1e9;
		for (int t = 0; t < 3; t++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < reps; i++)
				MPI_Sendrecv(g, 1, face, other, 0, h, 1, face, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			double dt = (MPI_Wtime() - t0) / reps;
			if (dt < best)
				best = dt;
		}
		if (rank == 0)
			printf("face rows=%d us=%.2f\n", rs[k], best * 1e6);
		MPI_Type_free(&face);
		free(g);
		free(h);
	}
	int ms[] = {1024, 65536};
	for (unsigned k = 0; k < sizeof ms / sizeof ms[0]; k++) {
		int m = ms[k];
		double *s = malloc(sizeof(double) * m), *r = malloc(sizeof(double) * m);
		for (int i = 0; i < m; i++)
			s[i] = rank + i;
		int reps = 50;
		MPI_Request q;
		/* the allreduce alone */
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < reps; i++) {
			MPI_Iallreduce(s, r, m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
			MPI_Wait(&q, MPI_STATUS_IGNORE);
		}
		double ta = (MPI_Wtime() - t0) / reps;
		/* a computation as long */
		long iters = 1000;
		double tc = 0;
		while (tc < ta) {
			iters *= 2;
			double c0 = MPI_Wtime();
			compute(iters);
			tc = MPI_Wtime() - c0;
		}
		MPI_Allreduce(MPI_IN_PLACE, &iters, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
		double c0 = MPI_Wtime();
		for (int i = 0; i < reps; i++)
			compute(iters);
		tc = (MPI_Wtime() - c0) / reps;
		/* both */
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int i = 0; i < reps; i++) {
			MPI_Iallreduce(s, r, m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
			compute(iters);
			MPI_Wait(&q, MPI_STATUS_IGNORE);
		}
		double tb = (MPI_Wtime() - t0) / reps;
		if (rank == 0)
			printf("overlap m=%d allreduce_us=%.1f compute_us=%.1f both_us=%.1f\n", m, ta * 1e6, tc * 1e6, tb * 1e6);
		free(s);
		free(r);
	}
	MPI_Finalize();
	return 0;
}
