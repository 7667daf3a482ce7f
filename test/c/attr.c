/* attr.c: attributes (predefined and user keyvals with copy and delete
 * callbacks), error handlers (the default, MPI_ERRORS_RETURN, user
 * handlers, inheritance), NULL arguments, MPI_Waitsome, MPI_Testsome,
 * MPI_Sendrecv_replace and MPI_Request_get_status. Every result line
 * starts with A<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;
#define OUT(...) do { char l_[512]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("A%d %s\n", rank, l_); fflush(stdout); } while (0)

static int copies, deletes;

static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
	(void)c, (void)k, (void)extra;
	copies++;
	*(void **)out = (void *)((long)in + 1);
	*flag = 1;
	return MPI_SUCCESS;
}

static int del_fn(MPI_Comm c, int k, void *val, void *extra) {
	(void)c, (void)k, (void)val;
	deletes++;
	(*(int *)extra)++;
	return MPI_SUCCESS;
}

static int errh_calls, errh_code;

static void my_errh(MPI_Comm *c, int *code, ...) {
	(void)c;
	errh_calls++;
	errh_code = *code;
}

static int self_del(MPI_Comm c, int k, void *val, void *extra) {
	(void)c, (void)k, (void)val, (void)extra;
	OUT("MPI_COMM_SELF attribute deleted in MPI_Finalize");
	return MPI_SUCCESS;
}

static int cls(int rc) {
	int c;
	MPI_Error_class(rc, &c);
	return c;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, flag;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);
	int left = (rank + size - 1) % size, right = (rank + 1) % size;

	/* the default error handler */
	MPI_Errhandler eh, eh2;
	MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
	OUT("default handler is MPI_ERRORS_ARE_FATAL %d", eh == MPI_ERRORS_ARE_FATAL);
	MPI_Errhandler_free(&eh);
	OUT("freed handle is null %d", eh == MPI_ERRHANDLER_NULL);

	/* predefined attributes */
	int *v;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
	OUT("MPI_TAG_UB flag %d at least 32767 %d", flag, flag && *v >= 32767);
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag);
	OUT("MPI_HOST flag %d", flag);
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &v, &flag);
	OUT("MPI_IO flag %d", flag);
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag);
	OUT("MPI_WTIME_IS_GLOBAL flag %d", flag);

	/* user keyvals: copy on dup, delete on replace, delete and free */
	int extra = 0, key, key2, key3;
	MPI_Comm_create_keyval(copy_fn, del_fn, &key, &extra);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void *)100);
	void *p;
	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &p, &flag);
	OUT("user attribute flag %d value %ld", flag, (long)p);
	MPI_Comm dup;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_get_attr(dup, key, &p, &flag);
	OUT("copied to the duplicate: flag %d value %ld copies %d", flag, (long)p, copies);
	MPI_Comm_set_attr(dup, key, (void *)200);
	OUT("replacing deleted the old value: deletes %d", deletes);
	MPI_Comm_free(&dup);
	OUT("freeing the duplicate deleted its value: deletes %d extra %d null %d", deletes, extra, dup == MPI_COMM_NULL);
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key2, NULL);
	MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key3, NULL);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key2, (void *)7);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key3, (void *)8);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_get_attr(dup, key2, &p, &flag);
	OUT("MPI_COMM_NULL_COPY_FN: flag %d", flag);
	MPI_Comm_get_attr(dup, key3, &p, &flag);
	OUT("MPI_COMM_DUP_FN: flag %d value %ld", flag, (long)p);
	MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &p, &flag);
	OUT("deleted: flag %d deletes %d", flag, deletes);
	MPI_Comm_free_keyval(&key);
	OUT("freed keyval is MPI_KEYVAL_INVALID %d", key == MPI_KEYVAL_INVALID);
	int skey;
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_del, &skey, NULL);
	MPI_Comm_set_attr(MPI_COMM_SELF, skey, NULL);

	/* a user error handler, inherited by a duplicate */
	MPI_Comm_create_errhandler(my_errh, &eh);
	MPI_Comm_set_errhandler(dup, eh);
	int rc = MPI_Send(&rank, 1, MPI_INT, size + 5, 0, dup);
	OUT("user handler: calls %d class is MPI_ERR_RANK %d same code %d", errh_calls, cls(rc) == MPI_ERR_RANK, errh_code == rc);
	MPI_Comm dup2;
	MPI_Comm_dup(dup, &dup2);
	rc = MPI_Recv(&rank, 1, MPI_INT, 0, -5, dup2, MPI_STATUS_IGNORE);
	OUT("inherited by a duplicate: calls %d class is MPI_ERR_TAG %d", errh_calls, cls(rc) == MPI_ERR_TAG);
	MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
	OUT("MPI_Comm_call_errhandler: calls %d code is MPI_ERR_OTHER %d", errh_calls, errh_code == MPI_ERR_OTHER);
	MPI_Comm_get_errhandler(dup2, &eh2);
	MPI_Comm_set_errhandler(dup2, MPI_ERRORS_RETURN);
	MPI_Errhandler_free(&eh2);
	MPI_Errhandler_free(&eh);
	rc = MPI_Send(&rank, 1, MPI_INT, size + 5, 0, dup); /* the freed handle still serves dup */
	OUT("freed handler still attached: calls %d", errh_calls);
	MPI_Comm_free(&dup2);
	MPI_Comm_free(&dup);

	/* MPI_ERRORS_RETURN, NULL arguments */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Send(&rank, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
	OUT("MPI_ERRORS_RETURN: class is MPI_ERR_RANK %d", cls(rc) == MPI_ERR_RANK);
	rc = MPI_Comm_rank(MPI_COMM_WORLD, NULL);
	OUT("NULL rank pointer: class is MPI_ERR_ARG %d", cls(rc) == MPI_ERR_ARG);
	rc = MPI_Comm_size(MPI_COMM_WORLD, NULL);
	OUT("NULL size pointer: class is MPI_ERR_ARG %d", cls(rc) == MPI_ERR_ARG);

	/* Waitsome and Testsome: three messages around the ring */
	int in[3], out[3], idx[6], n, done = 0, sum = 0;
	MPI_Request reqs[6];
	MPI_Status sts[6];
	for (int t = 0; t < 3; t++) {
		out[t] = rank * 10 + t;
		MPI_Irecv(&in[t], 1, MPI_INT, left, t, MPI_COMM_WORLD, &reqs[t]);
	}
	for (int t = 0; t < 3; t++)
		MPI_Isend(&out[t], 1, MPI_INT, right, t, MPI_COMM_WORLD, &reqs[3 + t]);
	while (done < 6) {
		MPI_Waitsome(6, reqs, &n, idx, sts);
		for (int i = 0; i < n; i++)
			if (idx[i] < 3 && sts[i].MPI_SOURCE == left && sts[i].MPI_TAG == idx[i])
				sum += in[idx[i]];
		done += n;
	}
	MPI_Waitsome(6, reqs, &n, idx, sts);
	OUT("Waitsome: sum %d then MPI_UNDEFINED %d", sum, n == MPI_UNDEFINED);
	for (int t = 0; t < 3; t++) {
		MPI_Irecv(&in[t], 1, MPI_INT, left, 10 + t, MPI_COMM_WORLD, &reqs[t]);
		MPI_Isend(&out[t], 1, MPI_INT, right, 10 + t, MPI_COMM_WORLD, &reqs[3 + t]);
	}
	done = sum = 0;
	while (done < 6) {
		MPI_Testsome(6, reqs, &n, idx, sts);
		for (int i = 0; i < n; i++)
			if (idx[i] < 3)
				sum += in[idx[i]];
		done += n;
	}
	OUT("Testsome: sum %d", sum);

	/* Sendrecv_replace and Request_get_status */
	int x = rank * 7;
	MPI_Status st;
	MPI_Sendrecv_replace(&x, 1, MPI_INT, right, 3, left, 3, MPI_COMM_WORLD, &st);
	OUT("Sendrecv_replace: %d from %d tag %d", x, st.MPI_SOURCE, st.MPI_TAG);
	MPI_Request r;
	MPI_Irecv(&x, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &r);
	MPI_Send(&rank, 1, MPI_INT, right, 4, MPI_COMM_WORLD);
	flag = 0;
	while (!flag)
		MPI_Request_get_status(r, &flag, &st);
	OUT("Request_get_status: %d from %d, request still live %d", x, st.MPI_SOURCE, r != MPI_REQUEST_NULL);
	MPI_Wait(&r, MPI_STATUS_IGNORE);
	OUT("then freed by MPI_Wait %d", r == MPI_REQUEST_NULL);

	MPI_Finalize();
	return 0;
}
