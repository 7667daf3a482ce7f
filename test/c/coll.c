/* Every collective of the subset, on MPI_COMM_WORLD and on communicators
 * from MPI_Comm_split and MPI_Comm_dup. Lines "C<rank> <test>: ..." are
 * compared between runs after sorting. Values are small integers, also in
 * doubles, so that any reduction order gives the same result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

/* one write per line, so that the launcher does not interleave lines */
#define OUT(...) do { char l_[8192]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("C%d %s\n", rank, l_); fflush(stdout); } while (0)

static void check(int rc, const char *what) {
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "rank %d: %s failed: %d\n", rank, what, rc);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

/* sum of ints, weighted by position so that misplaced blocks show */
static long wsum(const int *v, int n) {
	long s = 0;
	for (int i = 0; i < n; i++) s += (long)(i + 1) * v[i];
	return s;
}

static void ints(const char *what, const int *v, int n) {
	char line[4096];
	int o = 0;
	for (int i = 0; i < n && o < 4000; i++) o += snprintf(line + o, sizeof line - o, " %d", v[i]);
	OUT("%s:%s", what, line);
}

/* all collectives on comm; tag names the communicator in the output */
static void colls(MPI_Comm comm, const char *tag) {
	int r, n;
	char what[128];
	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &n);
	OUT("%s: rank %d size %d", tag, r, n);
	check(MPI_Barrier(comm), "Barrier");

	/* Bcast: small and large (beyond the eager limit) from the last rank. */
	int b[4] = {0, 0, 0, 0};
	if (r == n - 1) for (int i = 0; i < 4; i++) b[i] = 11 * (i + 1);
	check(MPI_Bcast(b, 4, MPI_INT, n - 1, comm), "Bcast");
	snprintf(what, sizeof what, "%s bcast", tag);
	ints(what, b, 4);
	int big = 50000;
	double *d = malloc(big * sizeof *d);
	for (int i = 0; i < big; i++) d[i] = r == 0 ? i % 1000 : -1;
	check(MPI_Bcast(d, big, MPI_DOUBLE, 0, comm), "Bcast big");
	double ds = 0;
	for (int i = 0; i < big; i++) ds += d[i];
	OUT("%s bcast big: %.0f", tag, ds);

	/* Reduce and Allreduce with several operations and types. */
	int v[3] = {r + 1, 10 * (r + 1), (r % 2) ? 6 : 3}, out[3] = {0, 0, 0};
	double dv[2] = {r + 0.5, -(r * 2.0)}, dout[2] = {0, 0};
	check(MPI_Reduce(v, out, 3, MPI_INT, MPI_SUM, 0, comm), "Reduce sum");
	if (r == 0) { snprintf(what, sizeof what, "%s reduce sum", tag); ints(what, out, 3); }
	check(MPI_Reduce(dv, dout, 2, MPI_DOUBLE, MPI_MAX, n - 1, comm), "Reduce max");
	if (r == n - 1) OUT("%s reduce max: %.1f %.1f", tag, dout[0], dout[1]);
	check(MPI_Allreduce(dv, dout, 2, MPI_DOUBLE, MPI_MIN, comm), "Allreduce min");
	OUT("%s allreduce min: %.1f %.1f", tag, dout[0], dout[1]);
	check(MPI_Allreduce(v, out, 3, MPI_INT, MPI_PROD, comm), "Allreduce prod");
	snprintf(what, sizeof what, "%s allreduce prod", tag); ints(what, out, 3);
	int ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
	const char *names[] = {"land", "lor", "lxor", "band", "bor", "bxor"};
	for (int k = 0; k < 6; k++) {
		int lv[2] = {r % 2, v[2]}, lo[2];
		check(MPI_Allreduce(lv, lo, 2, MPI_INT, ops[k], comm), "Allreduce logical");
		OUT("%s allreduce %s: %d %d", tag, names[k], lo[0], lo[1]);
	}
	long lv = 1L << (r + 33), lo = 0;
	check(MPI_Allreduce(&lv, &lo, 1, MPI_LONG, MPI_SUM, comm), "Allreduce long");
	OUT("%s allreduce long: %ld", tag, lo);
	unsigned char cv = (unsigned char)(200 + r), co = 0;
	check(MPI_Allreduce(&cv, &co, 1, MPI_UNSIGNED_CHAR, MPI_MAX, comm), "Allreduce uchar");
	OUT("%s allreduce uchar max: %d", tag, co);
	float fv = r * 1.5f, fo = 0;
	check(MPI_Allreduce(&fv, &fo, 1, MPI_FLOAT, MPI_SUM, comm), "Allreduce float");
	OUT("%s allreduce float: %.2f", tag, fo);
	int inplace[2] = {r, 2 * r};
	check(MPI_Allreduce(MPI_IN_PLACE, inplace, 2, MPI_INT, MPI_SUM, comm), "Allreduce in place");
	OUT("%s allreduce inplace: %d %d", tag, inplace[0], inplace[1]);
	/* a long allreduce */
	for (int i = 0; i < big; i++) d[i] = (i % 100) + r;
	double *dr = malloc(big * sizeof *dr);
	check(MPI_Allreduce(d, dr, big, MPI_DOUBLE, MPI_SUM, comm), "Allreduce big");
	ds = 0;
	for (int i = 0; i < big; i++) ds += dr[i] * (i % 7);
	OUT("%s allreduce big: %.0f", tag, ds);
	int rin[2] = {r, 1};
	if (r == 0) {
		check(MPI_Reduce(MPI_IN_PLACE, rin, 2, MPI_INT, MPI_SUM, 0, comm), "Reduce in place");
		OUT("%s reduce inplace: %d %d", tag, rin[0], rin[1]);
	} else {
		check(MPI_Reduce(rin, NULL, 2, MPI_INT, MPI_SUM, 0, comm), "Reduce in place (leaf)");
	}

	/* Scan and Exscan. */
	int sv[2] = {r + 1, 2}, so[2] = {-7, -7};
	check(MPI_Scan(sv, so, 2, MPI_INT, MPI_SUM, comm), "Scan");
	OUT("%s scan: %d %d", tag, so[0], so[1]);
	check(MPI_Scan(sv, so, 2, MPI_INT, MPI_MAX, comm), "Scan max");
	OUT("%s scan max: %d %d", tag, so[0], so[1]);
	so[0] = so[1] = -7;
	check(MPI_Exscan(sv, so, 2, MPI_INT, MPI_SUM, comm), "Exscan");
	if (r > 0) OUT("%s exscan: %d %d", tag, so[0], so[1]);

	/* Gather, Scatter, Allgather, Alltoall (3 ints per rank). */
	int *all = malloc(3 * n * sizeof(int)), *all2 = malloc(3 * n * sizeof(int)), mine[3];
	for (int i = 0; i < 3; i++) mine[i] = 100 * r + i;
	memset(all, 0, 3 * n * sizeof(int));
	check(MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, n / 2, comm), "Gather");
	if (r == n / 2) { snprintf(what, sizeof what, "%s gather", tag); ints(what, all, 3 * n); }
	for (int i = 0; i < 3 * n; i++) all[i] = r == 0 ? 1000 + i : 0;
	memset(mine, 0, sizeof mine);
	check(MPI_Scatter(all, 3, MPI_INT, mine, 3, MPI_INT, 0, comm), "Scatter");
	snprintf(what, sizeof what, "%s scatter", tag); ints(what, mine, 3);
	for (int i = 0; i < 3; i++) mine[i] = 100 * r + i;
	check(MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm), "Allgather");
	snprintf(what, sizeof what, "%s allgather", tag); ints(what, all, 3 * n);
	for (int i = 0; i < 3 * n; i++) all[i] = 1000 * r + i;
	check(MPI_Alltoall(all, 3, MPI_INT, all2, 3, MPI_INT, comm), "Alltoall");
	snprintf(what, sizeof what, "%s alltoall", tag); ints(what, all2, 3 * n);
	/* Allgather in place */
	for (int i = 0; i < 3 * n; i++) all[i] = (i / 3 == r) ? 7 * r + i : -1;
	check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, comm), "Allgather in place");
	snprintf(what, sizeof what, "%s allgather inplace", tag); ints(what, all, 3 * n);

	/* v variants: rank i contributes i+1 ints; displacements leave gaps. */
	int *cnt = malloc(n * sizeof(int)), *dsp = malloc(n * sizeof(int)), tot = 0;
	/* (not a gap before block 0: MPICH 4.0.2's Allgatherv ignores the
	 * displacement on a communicator of one rank) */
	for (int i = 0; i < n; i++) { cnt[i] = i + 1; dsp[i] = tot; tot += i + 2; }
	int *vb = malloc((tot + 1) * sizeof(int)), *mv = malloc((r + 1) * sizeof(int));
	for (int i = 0; i <= r; i++) mv[i] = 10 * r + i;
	for (int i = 0; i <= tot; i++) vb[i] = -1;
	check(MPI_Gatherv(mv, r + 1, MPI_INT, vb, cnt, dsp, MPI_INT, n - 1, comm), "Gatherv");
	if (r == n - 1) { snprintf(what, sizeof what, "%s gatherv", tag); ints(what, vb, tot + 1); }
	for (int i = 0; i <= tot; i++) vb[i] = r == 0 ? 500 + i : -1;
	for (int i = 0; i <= r; i++) mv[i] = -1;
	check(MPI_Scatterv(vb, cnt, dsp, MPI_INT, mv, r + 1, MPI_INT, 0, comm), "Scatterv");
	snprintf(what, sizeof what, "%s scatterv", tag); ints(what, mv, r + 1);
	for (int i = 0; i <= r; i++) mv[i] = 10 * r + i;
	for (int i = 0; i <= tot; i++) vb[i] = -1;
	check(MPI_Allgatherv(mv, r + 1, MPI_INT, vb, cnt, dsp, MPI_INT, comm), "Allgatherv");
	snprintf(what, sizeof what, "%s allgatherv", tag); ints(what, vb, tot + 1);

	/* Alltoallv: rank r sends j+1 ints to rank j, receives r+1 from each. */
	int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
	int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int)), st = 0, rt = 0;
	for (int j = 0; j < n; j++) {
		sc[j] = j + 1; sd[j] = st; st += j + 1;
		rc[j] = r + 1; rd[j] = rt; rt += r + 1;
	}
	int *sv2 = malloc(st * sizeof(int)), *rv2 = malloc(rt * sizeof(int));
	for (int i = 0; i < st; i++) sv2[i] = 1000 * r + i;
	check(MPI_Alltoallv(sv2, sc, sd, MPI_INT, rv2, rc, rd, MPI_INT, comm), "Alltoallv");
	snprintf(what, sizeof what, "%s alltoallv", tag); ints(what, rv2, rt);
	OUT("%s wsums: %ld %ld", tag, wsum(all2, 3 * n), wsum(rv2, rt));
	free(d); free(dr); free(all); free(all2); free(cnt); free(dsp); free(vb); free(mv);
	free(sc); free(sd); free(rc); free(rd); free(sv2); free(rv2);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);
	colls(MPI_COMM_WORLD, "world");

	/* Split by parity, ordered backwards by key. */
	MPI_Comm half, dup, none;
	check(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half), "Comm_split");
	colls(half, rank % 2 ? "odd" : "even");
	check(MPI_Comm_dup(half, &dup), "Comm_dup");
	int x = rank, y = 0;
	check(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup), "Allreduce dup");
	OUT("dup allreduce: %d", y);
	/* Messages on half and dup never match each other. */
	int hr, hn;
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hn);
	if (hn > 1) {
		int a = 1000 + rank, c = 2000 + rank, ra = 0, rc = 0;
		MPI_Request q[2];
		MPI_Irecv(&ra, 1, MPI_INT, (hr + hn - 1) % hn, 0, half, &q[0]);
		MPI_Irecv(&rc, 1, MPI_INT, (hr + hn - 1) % hn, 0, dup, &q[1]);
		check(MPI_Send(&c, 1, MPI_INT, (hr + 1) % hn, 0, dup), "Send dup");
		check(MPI_Send(&a, 1, MPI_INT, (hr + 1) % hn, 0, half), "Send half");
		MPI_Status sts[2];
		check(MPI_Waitall(2, q, sts), "Waitall split");
		OUT("split p2p: half %d dup %d", ra, rc);
	}
	check(MPI_Comm_free(&dup), "Comm_free dup");
	check(MPI_Comm_free(&half), "Comm_free half");
	OUT("freed: %d %d", dup == MPI_COMM_NULL, half == MPI_COMM_NULL);
	/* MPI_UNDEFINED keeps rank 0 out. */
	check(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none), "Comm_split undefined");
	if (none == MPI_COMM_NULL) {
		OUT("undefined: null");
	} else {
		int nn;
		MPI_Comm_size(none, &nn);
		OUT("undefined: size %d", nn);
		MPI_Comm_free(&none);
	}
	/* MPI_COMM_SELF */
	int sr, sn, sv = 5, so = 0;
	MPI_Comm_rank(MPI_COMM_SELF, &sr);
	MPI_Comm_size(MPI_COMM_SELF, &sn);
	check(MPI_Allreduce(&sv, &so, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), "Allreduce self");
	OUT("self: rank %d size %d sum %d", sr, sn, so);
	MPI_Finalize();
	return 0;
}
