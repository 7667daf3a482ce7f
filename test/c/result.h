/* result.h: what the test programs share. Every result line starts with
 * the program's letter (RESULT_TAG, defined before this header) and the
 * rank; the tests compare those lines with MPICH's. */
#ifndef RESULT_H
#define RESULT_H
#include <mpi.h>
#include <stdio.h>

static int rank, size;
static char library[MPI_MAX_LIBRARY_VERSION_STRING]; /* MPI_Get_library_version's, after start */
#define OUT(...) do { char l_[4096]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("%c%d %s\n", RESULT_TAG, rank, l_); fflush(stdout); } while (0)

/* show prints a result line of n ints. */
static void show(const char *what, const int *v, int n) {
	char buf[3000];
	int off = 0;
	for (int i = 0; i < n && off < (int)sizeof buf - 16; i++)
		off += snprintf(buf + off, sizeof buf - off, " %d", v[i]);
	buf[off] = 0;
	OUT("%s:%s", what, buf);
}

/* start initialises MPI, sets rank and size, and prints which library
 * runs (the V line, which the tests use to tell the two runs apart). */
static void start(int *argc, char ***argv) {
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int n;
	MPI_Get_library_version(library, &n);
	printf("V%d %.40s\n", rank, library);
}
#endif
