/* misc.c: MPI_Info objects, communicator names, MPI_Is_thread_main and
 * the MPI_Status_set_* calls. Every result line starts with M<rank>; the
 * test compares them with MPICH's. */
#include <mpi.h>
#include <stdio.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("M%d %s\n", rank, l_); fflush(stdout); } while (0)

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
	MPI_Finalize();
	return 0;
}
