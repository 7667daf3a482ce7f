/*
 * ompi_coll.c: time an MPI library's collectives the way cmd/collbench
 * times mplite's, so that bench/coll.sh can put the two side by side.
 *
 *   ompi_coll [SECS [SIZES [COLLS [sync]]]]
 *
 * SECS   timed seconds per point (default 1)
 * SIZES  comma-separated sizes in bytes (default 1,1024,65536,1048576)
 * COLLS  comma-separated, from bcast, allgather, alltoall, allreduce
 *        (default all four)
 * sync   time every call alone after an untimed barrier (collbench -sync)
 *
 * bytes means what collbench means by it: the whole buffer for bcast and
 * allreduce (a sum of max(1, bytes/8) doubles, so 1 prints as 8), one
 * rank's block for allgather and alltoall. The root is rank 0.
 *
 * Each point runs one untimed call, then a calibration loop that doubles
 * until it lasts an eighth of SECS, then one timed loop of back-to-back
 * calls sized to last SECS (at least 5 calls). The time is the mean per
 * call, the maximum over the ranks. Rank 0 prints, per point:
 *
 *   coll=NAME algo=tuned bytes=N ranks=P us=T
 *
 * (algo=tuned: the library chose the algorithm itself, as Open MPI's
 * coll/tuned component does.) The last call's result is checked on every
 * rank; any mismatch makes the program exit 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

enum { BCAST, ALLGATHER, ALLTOALL, ALLREDUCE, NCOLL };
static const char *coll_name[NCOLL] = {"bcast", "allgather", "alltoall", "allreduce"};

static int nranks, me;
static int sync_calls; /* a barrier before every call, each call timed alone */

/* Elements of an allreduce of n bytes: at least one double. */
static size_t doubles(size_t n) { return n < 8 ? 1 : n / 8; }

static size_t reported_bytes(int c, size_t n) { return c == ALLREDUCE ? doubles(n) * 8 : n; }

/* The value rank r contributes at byte or element i. */
static unsigned char byte_of(int r, size_t i) { return (unsigned char)(r * 31 + i * 7 + 1); }
static double double_of(int r, size_t i) { return (double)(r + 1) + (double)(i % 997); }

static void prepare(int c, size_t n, unsigned char *send, unsigned char *recv)
{
	size_t i;
	if (c == ALLREDUCE) {
		double *d = (double *)send;
		for (i = 0; i < doubles(n); i++)
			d[i] = double_of(me, i);
		memset(recv, 0, doubles(n) * 8);
		return;
	}
	if (c == BCAST) {
		for (i = 0; i < n; i++)
			send[i] = me == 0 ? byte_of(0, i) : 0;
		return;
	}
	/* allgather: my block; alltoall: block b goes to rank b */
	for (i = 0; i < n * (c == ALLTOALL ? (size_t)nranks : 1); i++)
		send[i] = byte_of(me, i);
	memset(recv, 0, n * (size_t)nranks);
}

static void call(int c, size_t n, unsigned char *send, unsigned char *recv)
{
	switch (c) {
	case BCAST:
		MPI_Bcast(send, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD);
		break;
	case ALLTOALL:
		MPI_Alltoall(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD);
		break;
	case ALLREDUCE:
		MPI_Allreduce(send, recv, (int)doubles(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		break;
	}
}

/* Mismatches in the last call's result on this rank. Every call of a loop
 * starts from the same inputs (bcast overwrites with the same data, the
 * others never write their send buffer), so the last result is known. */
static long check(int c, size_t n, const unsigned char *send, const unsigned char *recv)
{
	long bad = 0;
	size_t i;
	int r;
	switch (c) {
	case BCAST:
		for (i = 0; i < n; i++)
			bad += send[i] != byte_of(0, i);
		break;
	case ALLGATHER:
		for (r = 0; r < nranks; r++)
			for (i = 0; i < n; i++)
				bad += recv[(size_t)r * n + i] != byte_of(r, i);
		break;
	case ALLTOALL:
		for (r = 0; r < nranks; r++)
			for (i = 0; i < n; i++)
				bad += recv[(size_t)r * n + i] != byte_of(r, (size_t)me * n + i);
		break;
	case ALLREDUCE: {
		const double *d = (const double *)recv;
		for (i = 0; i < doubles(n); i++) {
			double want = 0;
			for (r = 0; r < nranks; r++)
				want += double_of(r, i);
			bad += d[i] != want;
		}
		break;
	}
	}
	return bad;
}

/* Runs iters calls after a barrier; returns the slowest rank's mean (s).
 * With sync_calls every call follows a barrier of its own, not timed. */
static double loop(int c, size_t n, unsigned char *send, unsigned char *recv, long iters)
{
	double t = 0, start, slowest;
	long k;
	MPI_Barrier(MPI_COMM_WORLD);
	if (sync_calls) {
		for (k = 0; k < iters; k++) {
			MPI_Barrier(MPI_COMM_WORLD);
			start = MPI_Wtime();
			call(c, n, send, recv);
			t += MPI_Wtime() - start;
		}
	} else {
		start = MPI_Wtime();
		for (k = 0; k < iters; k++)
			call(c, n, send, recv);
		t = MPI_Wtime() - start;
	}
	t /= (double)iters;
	MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return slowest;
}

/* Splits a comma list in place; returns the number of items (at most max). */
static int split(char *s, char **item, int max)
{
	int k = 0;
	char *tok;
	for (tok = strtok(s, ","); tok && k < max; tok = strtok(NULL, ","))
		item[k++] = tok;
	return k;
}

int main(int argc, char **argv)
{
	char sizes_arg[512] = "1,1024,65536,1048576";
	char colls_arg[256] = "bcast,allgather,alltoall,allreduce";
	char *item[64];
	size_t sizes[64], maxn = 8;
	int colls[NCOLL], nsizes = 0, ncolls = 0, k, j;
	double secs = 1;
	long bad = 0, allbad = 0;
	unsigned char *send, *recv;

	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	/* Every rank has finished MPI_Init: the script times start-up to here. */
	MPI_Barrier(MPI_COMM_WORLD);
	if (me == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		printf("init_unix=%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
	}
	if (argc > 1 && atof(argv[1]) > 0)
		secs = atof(argv[1]);
	if (argc > 2)
		snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[2]);
	if (argc > 3)
		snprintf(colls_arg, sizeof colls_arg, "%s", argv[3]);
	sync_calls = argc > 4 && strcmp(argv[4], "sync") == 0;
	for (k = split(sizes_arg, item, 64), j = 0; j < k; j++) {
		sizes[nsizes] = (size_t)strtoull(item[j], NULL, 10);
		if (sizes[nsizes] > maxn)
			maxn = sizes[nsizes];
		nsizes++;
	}
	for (k = split(colls_arg, item, 64), j = 0; j < k; j++) {
		int c;
		for (c = 0; c < NCOLL && strcmp(item[j], coll_name[c]) != 0; c++)
			;
		if (c == NCOLL) {
			if (me == 0)
				fprintf(stderr, "ompi_coll: skipping unknown collective %s\n", item[j]);
			continue;
		}
		if (ncolls < NCOLL)
			colls[ncolls++] = c;
	}
	send = malloc(maxn * (size_t)nranks + 8);
	recv = malloc(maxn * (size_t)nranks + 8);
	if (!send || !recv)
		MPI_Abort(MPI_COMM_WORLD, 2);

	for (k = 0; k < ncolls; k++) {
		int c = colls[k];
		for (j = 0; j < nsizes; j++) {
			size_t n = sizes[j];
			long iters = 1;
			double t;
			prepare(c, n, send, recv);
			loop(c, n, send, recv, 1); /* connections, buffers */
			for (;;) {                  /* calibrate */
				t = loop(c, n, send, recv, iters);
				if (t * (double)iters >= secs / 8 || iters >= 1L << 20)
					break;
				iters *= 2;
			}
			iters = (long)(secs / (t > 1e-9 ? t : 1e-9));
			if (iters < 5)
				iters = 5;
			t = loop(c, n, send, recv, iters);
			bad += check(c, n, send, recv);
			if (me == 0) {
				printf("coll=%s algo=tuned bytes=%zu ranks=%d us=%.2f\n",
				       coll_name[c], reported_bytes(c, n), nranks, t * 1e6);
				fflush(stdout);
				fprintf(stderr, "  %s bytes=%zu iters=%ld\n", coll_name[c], n, iters);
			}
		}
	}
	MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (me == 0 && allbad)
		fprintf(stderr, "ompi_coll: %ld result mismatches\n", allbad);
	free(send);
	free(recv);
	MPI_Finalize();
	return allbad ? 1 : 0;
}
