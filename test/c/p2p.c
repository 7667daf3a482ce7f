/* Point-to-point over MPI: results on stdout, one line per fact, each line
 * "P<rank> <test>: ..." so that runs can be compared after sorting. Lines
 * starting "T<rank> " are timings, checked apart (Ssend's synchrony).
 * Any number of ranks >= 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

static int rank, size;

/* now is CLOCK_MONOTONIC in seconds: one clock for every rank of a host */
static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* one write per line, so that the launcher does not interleave lines */
#define OUT(...) do { char l_[8192]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("P%d %s\n", rank, l_); fflush(stdout); } while (0)

static void check(int rc, const char *what) {
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, "rank %d: %s failed: %d\n", rank, what, rc);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

static void ring(int count) {
	/* every rank sends count doubles to the next, receives from the previous */
	double *s = malloc(count * sizeof *s), *r = malloc(count * sizeof *r);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	MPI_Request q[2];
	MPI_Status st[2];
	for (int i = 0; i < count; i++) {
		s[i] = rank * 1000 + i % 977;
		r[i] = -1;
	}
	check(MPI_Irecv(r, count, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &q[0]), "Irecv");
	check(MPI_Isend(s, count, MPI_DOUBLE, next, 7, MPI_COMM_WORLD, &q[1]), "Isend");
	check(MPI_Waitall(2, q, st), "Waitall");
	double sum = 0;
	int bad = 0;
	for (int i = 0; i < count; i++) {
		sum += r[i];
		if (r[i] != prev * 1000 + i % 977) bad++;
	}
	int n;
	MPI_Get_count(&st[0], MPI_DOUBLE, &n);
	OUT("ring %d: from %d tag %d count %d sum %.0f bad %d null %d", count, st[0].MPI_SOURCE,
	    st[0].MPI_TAG, n, sum, bad, q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL);
	free(s);
	free(r);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv); /* which library runs: not compared */
	int flag;
	MPI_Initialized(&flag);
	OUT("size %d initialized %d", size, flag);

	/* Sendrecv around the ring, small, at the eager limit and large. */
	int s[10], r[10];
	for (int i = 0; i < 10; i++) s[i] = rank * 100 + i;
	MPI_Status st;
	check(MPI_Sendrecv(s, 10, MPI_INT, (rank + 1) % size, 3, r, 10, MPI_INT, (rank + size - 1) % size, 3,
			   MPI_COMM_WORLD, &st), "Sendrecv");
	OUT("sendrecv: from %d tag %d: %d %d %d ... %d", st.MPI_SOURCE, st.MPI_TAG, r[0], r[1], r[2], r[9]);
	ring(1);
	ring(1536);
	ring(100000);

	/* ANY_SOURCE, status fields, Get_count: rank 0 receives rank+1 ints with
	 * tag 10+rank from every other rank. */
	if (rank == 0) {
		int got[64][2];
		for (int k = 1; k < size; k++) {
			int buf[64];
			check(MPI_Recv(buf, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), "Recv any");
			int n;
			MPI_Get_count(&st, MPI_INT, &n);
			got[st.MPI_SOURCE][0] = st.MPI_TAG;
			got[st.MPI_SOURCE][1] = n;
			int ok = 1;
			for (int i = 0; i < n; i++) ok &= buf[i] == st.MPI_SOURCE * 7 + i;
			if (!ok) OUT("anysource: bad data from %d", st.MPI_SOURCE);
		}
		for (int k = 1; k < size; k++) OUT("anysource: from %d tag %d count %d", k, got[k][0], got[k][1]);
	} else {
		int buf[64];
		for (int i = 0; i <= rank; i++) buf[i] = rank * 7 + i;
		check(MPI_Send(buf, rank + 1, MPI_INT, 0, 10 + rank, MPI_COMM_WORLD), "Send");
	}

	/* (rank 0 received one message from every other rank before these) */
	MPI_Barrier(MPI_COMM_WORLD);

	/* Get_count with other datatypes, Probe and Iprobe. */
	if (rank == 1) {
		double d[7] = {1, 2, 3, 4, 5, 6, 7};
		short h[3] = {-1, -2, -3};
		check(MPI_Send(d, 7, MPI_DOUBLE, 0, 42, MPI_COMM_WORLD), "Send d");
		check(MPI_Send(h, 3, MPI_SHORT, 0, 9, MPI_COMM_WORLD), "Send h");
	} else if (rank == 0) {
		double d[100];
		int n;
		check(MPI_Probe(1, 42, MPI_COMM_WORLD, &st), "Probe");
		MPI_Get_count(&st, MPI_BYTE, &n);
		OUT("probe: from %d tag %d bytes %d", st.MPI_SOURCE, st.MPI_TAG, n);
		check(MPI_Recv(d, 100, MPI_DOUBLE, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st), "Recv d");
		int nd, ni, nb, nl;
		MPI_Get_count(&st, MPI_DOUBLE, &nd);
		MPI_Get_count(&st, MPI_INT, &ni);
		MPI_Get_count(&st, MPI_BYTE, &nb);
		MPI_Get_count(&st, MPI_LONG_DOUBLE, &nl);
		OUT("getcount: tag %d double %d int %d byte %d longdouble-undefined %d sum %.0f", st.MPI_TAG, nd, ni,
		    nb, nl == MPI_UNDEFINED, d[0] + d[6]);
		do MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, &st); while (!flag);
		MPI_Get_count(&st, MPI_SHORT, &n);
		OUT("iprobe: from %d tag %d shorts %d", st.MPI_SOURCE, st.MPI_TAG, n);
		short h[3];
		check(MPI_Recv(h, 3, MPI_SHORT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "Recv h");
		OUT("shorts: %d %d %d", h[0], h[1], h[2]);
	}

	/* MPI_PROC_NULL. */
	check(MPI_Sendrecv(s, 1, MPI_INT, MPI_PROC_NULL, 1, r, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st),
	      "Sendrecv null");
	int n;
	MPI_Get_count(&st, MPI_INT, &n);
	OUT("procnull: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);

	/* Truncation is an error of class MPI_ERR_TRUNCATE. */
	if (rank == 1) {
		check(MPI_Send(s, 10, MPI_INT, 0, 5, MPI_COMM_WORLD), "Send trunc");
	} else if (rank == 0) {
		int rc = MPI_Recv(r, 5, MPI_INT, 1, 5, MPI_COMM_WORLD, &st), cls;
		MPI_Error_class(rc, &cls);
		OUT("truncate: class %d is MPI_ERR_TRUNCATE %d", cls, cls == MPI_ERR_TRUNCATE);
	}

	/* Waitany, Testall, Test: rank 0 gathers one int from everyone. */
	if (rank == 0) {
		MPI_Request q[64];
		int v[64];
		q[0] = MPI_REQUEST_NULL;
		for (int k = 1; k < size; k++) MPI_Irecv(&v[k], 1, MPI_INT, k, 20, MPI_COMM_WORLD, &q[k]);
		int idx, seen = 0;
		for (int k = 1; k < size; k++) {
			check(MPI_Waitany(size, q, &idx, &st), "Waitany");
			seen |= 1 << idx;
			if (st.MPI_SOURCE != idx || v[idx] != idx * idx) OUT("waitany: bad %d", idx);
		}
		check(MPI_Waitany(size, q, &idx, &st), "Waitany none");
		OUT("waitany: seen %#x then undefined %d", seen, idx == MPI_UNDEFINED);
	} else {
		int v = rank * rank;
		MPI_Request q;
		MPI_Isend(&v, 1, MPI_INT, 0, 20, MPI_COMM_WORLD, &q);
		MPI_Status ts[1];
		do MPI_Testall(1, &q, &flag, ts); while (!flag);
		OUT("testall: done %d", q == MPI_REQUEST_NULL);
	}

	/* Bsend and Rsend. */
	{
		int bsz = 1 << 16;
		void *bb = malloc(bsz);
		MPI_Buffer_attach(bb, bsz);
		int x = rank + 500, y = -1;
		MPI_Request q;
		MPI_Irecv(&y, 1, MPI_INT, (rank + size - 1) % size, 30, MPI_COMM_WORLD, &q);
		MPI_Barrier(MPI_COMM_WORLD);
		check(MPI_Bsend(&x, 1, MPI_INT, (rank + 1) % size, 30, MPI_COMM_WORLD), "Bsend");
		check(MPI_Wait(&q, MPI_STATUS_IGNORE), "Wait b");
		OUT("bsend: got %d", y);
		MPI_Irecv(&y, 1, MPI_INT, (rank + size - 1) % size, 31, MPI_COMM_WORLD, &q);
		MPI_Barrier(MPI_COMM_WORLD);
		check(MPI_Rsend(&x, 1, MPI_INT, (rank + 1) % size, 31, MPI_COMM_WORLD), "Rsend");
		check(MPI_Wait(&q, MPI_STATUS_IGNORE), "Wait r");
		OUT("rsend: got %d", y);
		void *ba;
		MPI_Buffer_detach(&ba, &bsz);
		OUT("detach: same buffer %d", ba == bb);
		free(bb);
	}

	/* Ssend is synchronous: rank 1 delays its receives by 0.3 s each and
	 * prints the time (CLOCK_MONOTONIC, shared by the ranks of one host) just
	 * before it posts each; rank 0 prints when each Ssend returned (small,
	 * large, and a small one after a plain Send of the same tag that rank 1
	 * receives first). Each Ssend must return after its receive was posted. */
	if (rank == 0 || rank == 1) {
		static double big[200000];
		int v = 77, w;
		double t[3];
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			check(MPI_Ssend(&v, 1, MPI_INT, 1, 50, MPI_COMM_WORLD), "Ssend small");
			t[0] = now();
			check(MPI_Ssend(big, 200000, MPI_DOUBLE, 1, 51, MPI_COMM_WORLD), "Ssend large");
			t[1] = now();
			check(MPI_Send(&v, 1, MPI_INT, 1, 52, MPI_COMM_WORLD), "Send before Ssend");
			check(MPI_Ssend(&v, 1, MPI_INT, 1, 52, MPI_COMM_WORLD), "Ssend after Send");
			t[2] = now();
			printf("T0 ssend returned %.6f %.6f %.6f\n", t[0], t[1], t[2]);
			fflush(stdout);
		} else {
			usleep(300000);
			t[0] = now();
			check(MPI_Recv(&w, 1, MPI_INT, 0, 50, MPI_COMM_WORLD, &st), "Recv ssend small");
			usleep(300000);
			t[1] = now();
			check(MPI_Recv(big, 200000, MPI_DOUBLE, 0, 51, MPI_COMM_WORLD, &st), "Recv ssend large");
			check(MPI_Recv(&w, 1, MPI_INT, 0, 52, MPI_COMM_WORLD, &st), "Recv send");
			usleep(300000);
			t[2] = now();
			check(MPI_Recv(&w, 1, MPI_INT, 0, 52, MPI_COMM_WORLD, &st), "Recv ssend after send");
			printf("T1 recv posted %.6f %.6f %.6f\n", t[0], t[1], t[2]);
			fflush(stdout);
			OUT("ssend: got %d", w);
		}
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
	}

	double tick = MPI_Wtick();
	int ver, sub, len;
	char name[MPI_MAX_PROCESSOR_NAME], es[MPI_MAX_ERROR_STRING];
	MPI_Get_version(&ver, &sub);
	MPI_Get_processor_name(name, &len);
	MPI_Error_string(MPI_ERR_TRUNCATE, es, &len);
	OUT("misc: tick>0 %d version>=3 %d name %d errstring %d", tick > 0, ver >= 3, name[0] != 0, len > 0);
	MPI_Finalize();
	MPI_Finalized(&flag);
	OUT("finalized %d", flag);
	return 0;
}
