/* misc.c: MPI_Info objects, communicator names, MPI_Is_thread_main, the
 * MPI_Status_set_* calls, matched probes (Mprobe, Improbe, Mrecv, Imrecv)
 * and the large-count (_c) forms. Every result line starts with M<rank>; the
 * test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("M%d %s\n", rank, l_); fflush(stdout); } while (0)

/* generalized request callbacks: the state counts the calls */
struct greq_state {
	int queried, freed, cancelled;
};
static int greq_query(void *extra, MPI_Status *st) {
	struct greq_state *g = extra;
	g->queried++;
	st->MPI_SOURCE = 7;
	st->MPI_TAG = 3;
	MPI_Status_set_elements(st, MPI_INT, 5);
	MPI_Status_set_cancelled(st, g->cancelled > 0);
	return MPI_SUCCESS;
}
static int greq_free(void *extra) {
	((struct greq_state *)extra)->freed++;
	return MPI_SUCCESS;
}
static int greq_cancel(void *extra, int complete) {
	((struct greq_state *)extra)->cancelled += 1 + complete;
	return MPI_SUCCESS;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, flag, n, len;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);

	MPI_Info info, dup;
	char val[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
	MPI_Info_create(&info);
	MPI_Info_set(info, "stripe", "4");
	MPI_Info_set(info, "host", "node7");
	MPI_Info_set(info, "stripe", "8");
	MPI_Info_get_nkeys(info, &n);
	MPI_Info_get(info, "stripe", MPI_MAX_INFO_VAL, val, &flag);
	MPI_Info_get_valuelen(info, "host", &len, &flag);
	MPI_Info_get_nthkey(info, 1, key);
	OUT("info: %d keys, stripe=%s, host is %d long, second key %s", n, val, len, key);
	MPI_Info_dup(info, &dup);
	MPI_Info_delete(info, "stripe");
	MPI_Info_get(info, "stripe", MPI_MAX_INFO_VAL, val, &flag);
	MPI_Info_get_nkeys(dup, &n);
	OUT("after delete: found %d; the duplicate has %d keys", flag, n);
	MPI_Info_free(&info);
	MPI_Info_free(&dup);
	OUT("freed is MPI_INFO_NULL %d", info == MPI_INFO_NULL);

	char name[MPI_MAX_OBJECT_NAME];
	MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
	OUT("world is named %s (%d)", name, len);
	MPI_Comm c;
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	MPI_Comm_get_name(c, name, &len);
	OUT("a duplicate's name has %d characters", len);
	MPI_Comm_set_name(c, "halo");
	MPI_Comm_get_name(c, name, &len);
	OUT("renamed %s (%d)", name, len);
	MPI_Comm_free(&c);

	MPI_Is_thread_main(&flag);
	OUT("main thread %d", flag);

	MPI_Status st;
	st.MPI_SOURCE = 3;
	st.MPI_TAG = 4;
	MPI_Status_set_elements(&st, MPI_DOUBLE, 5);
	MPI_Status_set_cancelled(&st, 1);
	MPI_Get_count(&st, MPI_DOUBLE, &n);
	MPI_Get_elements(&st, MPI_DOUBLE, &len);
	MPI_Test_cancelled(&st, &flag);
	int bytes;
	MPI_Get_count(&st, MPI_BYTE, &bytes);
	OUT("status: count %d elements %d bytes %d cancelled %d source %d tag %d", n, len, bytes, flag, st.MPI_SOURCE, st.MPI_TAG);
	/* matched probes: each rank sends two messages to the next; the
	 * next takes the second (tag 6) first, then the first */
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, v1 = rank * 10 + 1, v2[3] = {rank, rank * 2, rank * 3}, got1,
	    got2[3];
	MPI_Request sr[2], rr;
	MPI_Isend(&v1, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &sr[0]);
	MPI_Isend(v2, 3, MPI_INT, next, 6, MPI_COMM_WORLD, &sr[1]);
	MPI_Message m1, m2;
	MPI_Mprobe(prev, 6, MPI_COMM_WORLD, &m2, &st);
	MPI_Get_count(&st, MPI_INT, &n);
	flag = 0;
	while (!flag)
		MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m1, MPI_STATUS_IGNORE);
	MPI_Imrecv(&got1, 1, MPI_INT, &m1, &rr);
	MPI_Mrecv(got2, 3, MPI_INT, &m2, &st);
	MPI_Wait(&rr, MPI_STATUS_IGNORE);
	MPI_Status sst[2];
	MPI_Waitall(2, sr, sst);
	OUT("Mprobe: count %d, got %d and %d %d %d from %d tag %d; handles null %d", n, got1, got2[0], got2[1], got2[2], st.MPI_SOURCE,
	    st.MPI_TAG, m1 == MPI_MESSAGE_NULL && m2 == MPI_MESSAGE_NULL);
	MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m1, &st);
	OUT("Mprobe of MPI_PROC_NULL: no-proc %d source %d", m1 == MPI_MESSAGE_NO_PROC, st.MPI_SOURCE);
	MPI_Mrecv(&got1, 1, MPI_INT, &m1, &st);
	OUT("Mrecv of it: source %d null %d", st.MPI_SOURCE, m1 == MPI_MESSAGE_NULL);
	/* the large-count forms */
	MPI_Count bc, tsz;
	int lv2[4] = {rank, rank + 1, rank + 2, rank + 3}, lr[4], lsum[4], lb[2] = {0, 0};
	MPI_Request lq;
	MPI_Irecv_c(lr, (MPI_Count)4, MPI_INT, prev, 11, MPI_COMM_WORLD, &lq);
	MPI_Send_c(lv2, (MPI_Count)4, MPI_INT, next, 11, MPI_COMM_WORLD);
	MPI_Wait(&lq, &st);
	MPI_Get_count_c(&st, MPI_INT, &bc);
	if (rank == 0)
		lb[0] = 42, lb[1] = 43;
	MPI_Bcast_c(lb, (MPI_Count)2, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Allreduce_c(lv2, lsum, (MPI_Count)4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Type_size_c(MPI_DOUBLE, &tsz);
	OUT("large count: got %d..%d count %lld, bcast %d %d, sum %d %d, double size %lld", lr[0], lr[3], (long long)bc, lb[0], lb[1], lsum[0],
	    lsum[3], (long long)tsz);
	/* names of datatypes, Type_match_size, info on communicators,
	 * intercommunicator test, added error classes, Alloc_mem */
	char tn[MPI_MAX_OBJECT_NAME];
	int tnl;
	MPI_Type_get_name(MPI_DOUBLE, tn, &tnl);
	OUT("type name: %s %d", tn, tnl);
	MPI_Datatype pair2;
	MPI_Type_contiguous(2, MPI_INT, &pair2);
	MPI_Type_get_name(pair2, tn, &tnl);
	OUT("unnamed derived type: '%s' %d", tn, tnl);
	MPI_Type_set_name(pair2, "int pair");
	MPI_Type_get_name(pair2, tn, &tnl);
	OUT("named derived type: '%s' %d", tn, tnl);
	MPI_Type_free(&pair2);
	MPI_Datatype m1t, m2t, m3t;
	MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m1t);
	MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m2t);
	MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &m3t);
	OUT("match_size: %d %d %d", m1t == MPI_REAL8, m2t == MPI_INTEGER4, m3t == MPI_COMPLEX16);
	MPI_Comm wi;
	MPI_Info ci;
	int inter = -1, wr;
	MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &wi);
	MPI_Info_create(&ci);
	MPI_Info_set(ci, "mpi_assert_no_any_tag", "false");
	MPI_Comm_set_info(wi, ci);
	MPI_Info_free(&ci);
	MPI_Comm_get_info(wi, &ci);
	MPI_Comm_test_inter(wi, &inter);
	MPI_Comm_rank(wi, &wr);
	OUT("dup_with_info: rank %d info %d inter %d", wr, ci != MPI_INFO_NULL, inter);
	MPI_Info_free(&ci);
	MPI_Comm_free(&wi);
	int ecl, eco, ecl2, eck, esl, *elast, eflag;
	char es[MPI_MAX_ERROR_STRING];
	MPI_Add_error_class(&ecl);
	MPI_Add_error_code(ecl, &eco);
	MPI_Add_error_string(eco, "a code of our own");
	MPI_Add_error_class(&ecl2);
	MPI_Error_class(eco, &eck);
	MPI_Error_string(eco, es, &esl);
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &elast, &eflag);
	OUT("error classes: distinct %d above lastcode %d class of code %d '%s' lastused ok %d", ecl != ecl2 && eco != ecl,
	    ecl > MPI_ERR_LASTCODE && eco > MPI_ERR_LASTCODE, eck == ecl, es, eflag && *elast >= ecl2);
	int *mem;
	MPI_Alloc_mem(16 * sizeof(int), MPI_INFO_NULL, &mem);
	for (int i = 0; i < 16; i++)
		mem[i] = rank * 16 + i;
	int memr[16];
	MPI_Sendrecv(mem, 16, MPI_INT, next, 12, memr, 16, MPI_INT, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Free_mem(mem);
	OUT("Alloc_mem: got %d..%d", memr[0], memr[15]);
	/* Ibsend (complete at once) and Irsend */
	int bsz = 2 * (MPI_BSEND_OVERHEAD + (int)sizeof(int));
	char *bbuf = malloc(bsz);
	MPI_Buffer_attach(bbuf, bsz);
	int ib = rank + 500, ibr = -1, ir = rank + 600, irr = -1;
	MPI_Request ibq[3];
	MPI_Irecv(&irr, 1, MPI_INT, prev, 14, MPI_COMM_WORLD, &ibq[2]);
	MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted before the ready send */
	MPI_Ibsend(&ib, 1, MPI_INT, next, 13, MPI_COMM_WORLD, &ibq[0]);
	ib = -1; /* the buffer is free at once */
	MPI_Irsend(&ir, 1, MPI_INT, next, 14, MPI_COMM_WORLD, &ibq[1]);
	MPI_Recv(&ibr, 1, MPI_INT, prev, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (int i = 0; i < 3; i++)
		MPI_Wait(&ibq[i], MPI_STATUS_IGNORE);
	void *dbuf;
	int dsz;
	MPI_Buffer_detach(&dbuf, &dsz);
	free(bbuf);
	OUT("Ibsend %d Irsend %d detach %d", ibr, irr, dsz == bsz);
	/* persistent vector collectives, the persistent reduce-scatter and
	 * Ialltoallw */
	int *agc = malloc(size * sizeof(int)), *agd = malloc(size * sizeof(int)), agr[64], agv[2] = {rank, -rank};
	for (int i = 0; i < size; i++)
		agc[i] = 1 + i % 2, agd[i] = 2 * i;
	int agn = 1 + rank % 2;
	MPI_Request pq;
	MPI_Allgatherv_init(agv, agn, MPI_INT, agr, agc, agd, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &pq);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 2 * size; i++)
			agr[i] = -9;
		agv[0] = rank + 100 * round;
		MPI_Start(&pq);
		MPI_Wait(&pq, MPI_STATUS_IGNORE);
		OUT("Allgatherv_init round %d: %d %d %d %d", round, agr[0], agr[1], agr[2], agr[3]);
	}
	MPI_Request_free(&pq);
	int rsb[64], rsr[2];
	for (int i = 0; i < 2 * size; i++)
		rsb[i] = rank + i;
	MPI_Reduce_scatter_block_init(rsb, rsr, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &pq);
	MPI_Start(&pq);
	MPI_Wait(&pq, MPI_STATUS_IGNORE);
	MPI_Request_free(&pq);
	OUT("Reduce_scatter_block_init: %d %d", rsr[0], rsr[1]);
	int *wsc = malloc(size * sizeof(int)), *wsd = malloc(size * sizeof(int)), wsb[64], wrb[64];
	MPI_Datatype *wty = malloc(size * sizeof(MPI_Datatype));
	for (int i = 0; i < size; i++)
		wsc[i] = 1, wsd[i] = i * (int)sizeof(int), wty[i] = MPI_INT, wsb[i] = rank * 10 + i, wrb[i] = -1;
	MPI_Request wq;
	MPI_Ialltoallw(wsb, wsc, wsd, wty, wrb, wsc, wsd, wty, MPI_COMM_WORLD, &wq);
	MPI_Wait(&wq, MPI_STATUS_IGNORE);
	OUT("Ialltoallw: %d %d", wrb[0], wrb[size - 1]);
	free(agc);
	free(agd);
	free(wsc);
	free(wsd);
	free(wty);
	/* generalized requests */
	{
		struct greq_state g = {0, 0, 0}, g2 = {0, 0, 0};
		MPI_Request gr, gr2;
		MPI_Status gst;
		int gflag = -1, gcount = -1, gcanc = -1;
		MPI_Grequest_start(greq_query, greq_free, greq_cancel, &g, &gr);
		MPI_Test(&gr, &gflag, &gst);
		int before = gflag;
		MPI_Grequest_complete(gr);
		MPI_Wait(&gr, &gst);
		MPI_Get_count(&gst, MPI_INT, &gcount);
		MPI_Test_cancelled(&gst, &gcanc);
		OUT("grequest: done before complete %d, source %d tag %d count %d cancelled %d, queried %d freed %d, null %d", before,
		    gst.MPI_SOURCE, gst.MPI_TAG, gcount, gcanc, g.queried, g.freed, gr == MPI_REQUEST_NULL);
		MPI_Grequest_start(greq_query, greq_free, greq_cancel, &g2, &gr2);
		MPI_Cancel(&gr2);
		MPI_Grequest_complete(gr2);
		MPI_Wait(&gr2, &gst);
		MPI_Test_cancelled(&gst, &gcanc);
		OUT("grequest cancelled: cancel calls %d, status cancelled %d, freed %d", g2.cancelled, gcanc, g2.freed);
	}
	/* more large-count forms (generated wrappers) */
	{
		int ag[64], one = rank * 3, sc[64], sr = -1, sq[64], rq[64];
		MPI_Allgather_c(&one, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD);
		for (int i = 0; i < size; i++)
			sc[i] = 100 + i, sq[i] = rank * 1000 + i;
		MPI_Scatter_c(sc, 1, MPI_INT, &sr, 1, MPI_INT, 0, MPI_COMM_WORLD);
		MPI_Request cq;
		MPI_Ialltoall_c(sq, 1, MPI_INT, rq, 1, MPI_INT, MPI_COMM_WORLD, &cq);
		MPI_Wait(&cq, MPI_STATUS_IGNORE);
		MPI_Datatype cv;
		MPI_Count clb, cext;
		MPI_Type_vector_c(3, 1, 4, MPI_DOUBLE, &cv);
		MPI_Type_commit(&cv);
		MPI_Type_get_extent_c(cv, &clb, &cext);
		double dv[12], du[12];
		for (int i = 0; i < 12; i++)
			dv[i] = i, du[i] = -1;
		char pk[256];
		MPI_Count pos = 0, upos = 0, psz;
		MPI_Pack_size_c(1, cv, MPI_COMM_WORLD, &psz);
		MPI_Pack_c(dv, 1, cv, pk, sizeof pk, &pos, MPI_COMM_WORLD);
		MPI_Unpack_c(pk, pos, &upos, du, 1, cv, MPI_COMM_WORLD);
		int nx = (rank + 1) % size, pv = (rank + size - 1) % size, sv = rank, got = -1;
		MPI_Sendrecv_c(&sv, 1, MPI_INT, nx, 21, &got, 1, MPI_INT, pv, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Type_free(&cv);
		OUT("large count 2: allgather %d %d, scatter %d, alltoall %d %d, extent %lld lb %lld, pack %lld/%lld unpacked %g %g %g %g, sendrecv %d",
		    ag[0], ag[size - 1], sr, rq[0], rq[size - 1], (long long)cext, (long long)clb, (long long)pos, (long long)psz, du[0], du[4],
		    du[8], du[1], got);
	}
	{
		/* The ranks of one host: not a compared result (under MPICH every
		 * namespace of the testbed is one host; over Ethervia a host is
		 * a NIC), so its letter, T, is checked by the test itself. */
		MPI_Comm node;
		int nsize = -1, nrank = -1, sum = 0;
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
		MPI_Comm_size(node, &nsize);
		MPI_Comm_rank(node, &nrank);
		MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, node);
		printf("T%d node size %d rank %d sum %d\n", rank, nsize, nrank, sum);
		fflush(stdout);
		MPI_Comm_free(&node);
	}
	MPI_Finalize();
	return 0;
}
