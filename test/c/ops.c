/* ops.c: user-defined operations (commutative and not) in Reduce,
 * Allreduce and Scan, MPI_Reduce_local, MPI_Reduce_scatter_block and
 * MPI_Reduce_scatter, MPI_Op_commutative and MPI_Op_free, and the
 * predefined operations on complex and long double types. Every result
 * line starts with O<rank>; the test compares them with MPICH's. */
#include <mpi.h>
#include <complex.h>
#include <stdio.h>

static int rank, size;
#define OUT(...) do { char l_[1024]; snprintf(l_, sizeof l_, __VA_ARGS__); printf("O%d %s\n", rank, l_); fflush(stdout); } while (0)

/* 2x2 integer matrix product, not commutative: inout = in x inout */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	int *a = in, *b = inout;
	for (int k = 0; k < *len; k++, a += 4, b += 4) {
		int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
		for (int i = 0; i < 4; i++)
			b[i] = c[i] % 1000;
	}
}

/* the larger absolute value, commutative */
static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	double *a = in, *b = inout;
	for (int i = 0; i < *len; i++) {
		double x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
		if (x > y)
			b[i] = a[i];
	}
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn, c1, c2, c3;
	MPI_Get_library_version(lv, &lvn);
	printf("V%d %.40s\n", rank, lv);

	MPI_Datatype mat;
	MPI_Type_contiguous(4, MPI_INT, &mat);
	MPI_Type_commit(&mat);
	MPI_Op mm, am;
	MPI_Op_create(matmul, 0, &mm);
	MPI_Op_create(absmax, 1, &am);
	MPI_Op_commutative(mm, &c1);
	MPI_Op_commutative(am, &c2);
	MPI_Op_commutative(MPI_SUM, &c3);
	OUT("commutative: %d %d %d", c1, c2, c3);

	int m[2][4] = {{1, rank + 1, 0, 1}, {rank + 2, 1, 1, rank}}, r[2][4], s[2][4];
	MPI_Reduce(m, r, 2, mat, mm, size - 1, MPI_COMM_WORLD);
	if (rank == size - 1)
		OUT("Reduce matmul: %d %d %d %d | %d %d %d %d", r[0][0], r[0][1], r[0][2], r[0][3], r[1][0], r[1][1], r[1][2], r[1][3]);
	MPI_Allreduce(m, r, 2, mat, mm, MPI_COMM_WORLD);
	OUT("Allreduce matmul: %d %d %d %d | %d %d %d %d", r[0][0], r[0][1], r[0][2], r[0][3], r[1][0], r[1][1], r[1][2], r[1][3]);
	MPI_Scan(m, s, 2, mat, mm, MPI_COMM_WORLD);
	OUT("Scan matmul: %d %d %d %d | %d %d", s[0][0], s[0][1], s[0][2], s[0][3], s[1][0], s[1][3]);

	double v[3] = {rank * ((rank % 2) ? -1.5 : 1.0), -rank, 0.5 * rank}, w[3];
	MPI_Allreduce(v, w, 3, MPI_DOUBLE, am, MPI_COMM_WORLD);
	OUT("Allreduce absmax: %g %g %g", w[0], w[1], w[2]);
	double in[3] = {1, -7, 2}, io[3] = {-3, 4, 1};
	MPI_Reduce_local(in, io, 3, MPI_DOUBLE, am);
	int li[4] = {1, 2, 3, 4}, lo[4] = {5, 6, 7, 8};
	MPI_Reduce_local(li, lo, 4, MPI_INT, MPI_PROD);
	OUT("Reduce_local: %g %g %g, %d %d %d %d", io[0], io[1], io[2], lo[0], lo[1], lo[2], lo[3]);

	int sb[64], rb[8], counts[64];
	for (int i = 0; i < 2 * size; i++)
		sb[i] = rank * 10 + i;
	MPI_Reduce_scatter_block(sb, rb, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	OUT("Reduce_scatter_block: %d %d", rb[0], rb[1]);
	int total = 0;
	for (int i = 0; i < size; i++) {
		counts[i] = i % 3;
		total += counts[i];
	}
	for (int i = 0; i < total; i++)
		sb[i] = rank + i;
	rb[0] = rb[1] = -1;
	MPI_Reduce_scatter(sb, rb, counts, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	OUT("Reduce_scatter: %d %d", counts[rank] > 0 ? rb[0] : -1, counts[rank] > 1 ? rb[1] : -1);

	/* Complex and long double: SUM and PROD on complex (C and Fortran
	 * handles), all four arithmetic ops on long double. Values are small
	 * integers, so every order of evaluation gives the same result. */
	float _Complex fc[2] = {(rank + 1) + 1.0f * I, 1.0f - (rank % 2) * I}, fco[2];
	MPI_Allreduce(fc, fco, 2, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
	OUT("complex float sum: %g%+gi %g%+gi", crealf(fco[0]), cimagf(fco[0]), crealf(fco[1]), cimagf(fco[1]));
	double _Complex dc = (rank % 2 ? 1.0 : 0.0) + (rank % 2 ? 0.0 : 1.0) * I, dco;
	MPI_Allreduce(&dc, &dco, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
	OUT("complex double prod: %g%+gi", creal(dco), cimag(dco));
	MPI_Reduce(&dc, &dco, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		OUT("DOUBLE_COMPLEX reduce: %g%+gi", creal(dco), cimag(dco));
	long double ld[4] = {rank, -rank, rank + 0.5L, 2}, ldo[4];
	MPI_Allreduce(ld, ldo, 4, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	OUT("long double sum: %Lg %Lg %Lg %Lg", ldo[0], ldo[1], ldo[2], ldo[3]);
	MPI_Allreduce(ld, ldo, 4, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	OUT("long double max: %Lg %Lg %Lg %Lg", ldo[0], ldo[1], ldo[2], ldo[3]);
	MPI_Allreduce(ld, ldo, 4, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	OUT("long double min: %Lg %Lg %Lg %Lg", ldo[0], ldo[1], ldo[2], ldo[3]);
	MPI_Allreduce(&ld[3], &ldo[3], 1, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
	OUT("long double prod: %Lg", ldo[3]);
	long double _Complex ldc = 1.0L + 1.0L * I, ldco;
	MPI_Allreduce(&ldc, &ldco, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
	OUT("long double complex prod: %Lg%+Lgi", creall(ldco), cimagl(ldco));

	MPI_Op_free(&mm);
	MPI_Op_free(&am);
	OUT("freed: %d", mm == MPI_OP_NULL && am == MPI_OP_NULL);
	MPI_Type_free(&mat);
	MPI_Finalize();
	return 0;
}
