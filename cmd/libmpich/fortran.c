/* What Debian's libmpichfort.so.12 (MPICH's Fortran bindings) needs of the
 * C library besides the PMPI_ functions: a few data symbols of MPICH's
 * mpi.h and the MPII_ attribute helpers, which let Fortran attributes be
 * integers where C's are pointers. */
#include <stddef.h>
#include <stdint.h>
#include "ethervia_mpi_types.h"

typedef struct {
	int count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_F08_status;

int MPIR_C_MPI_UNWEIGHTED;
int MPIR_C_MPI_WEIGHTS_EMPTY;
int *const MPI_UNWEIGHTED = &MPIR_C_MPI_UNWEIGHTED;
int *const MPI_WEIGHTS_EMPTY = &MPIR_C_MPI_WEIGHTS_EMPTY;
MPI_Fint *MPI_F_STATUS_IGNORE;
MPI_Fint *MPI_F_STATUSES_IGNORE;
MPI_F08_status MPIR_F08_MPI_STATUS_IGNORE_OBJ;
MPI_F08_status MPIR_F08_MPI_STATUSES_IGNORE_OBJ[1];
int MPIR_F08_MPI_IN_PLACE;
int MPIR_F08_MPI_BOTTOM;
MPI_F08_status *MPI_F08_STATUS_IGNORE = &MPIR_F08_MPI_STATUS_IGNORE_OBJ;
MPI_F08_status *MPI_F08_STATUSES_IGNORE = &MPIR_F08_MPI_STATUSES_IGNORE_OBJ[0];

/* Attributes (fortattr.go): attr_type 0 (MPIR_ATTR_PTR) is C's pointer,
 * 1 and 3 Fortran's integers (address-sized and INTEGER). */
int evAttrSet(int kind, int h, int key, uintptr_t val, int typ);
int evAttrGet(int kind, int h, int key, void *out, int *flag, int outtype);
void evKeyvalSetProxy(int key, void *copy_proxy, void *delete_proxy);

int MPII_Comm_get_attr(MPI_Comm comm, int keyval, void *attr_val, int *flag, int attr_type) {
	return evAttrGet(0, (int)comm, keyval, attr_val, flag, attr_type);
}

int MPII_Comm_set_attr(MPI_Comm comm, int keyval, void *attr_val, int attr_type) {
	return evAttrSet(0, (int)comm, keyval, (uintptr_t)attr_val, attr_type);
}

int MPII_Type_get_attr(MPI_Datatype dt, int keyval, void *attr_val, int *flag, int attr_type) {
	return evAttrGet(1, (int)dt, keyval, attr_val, flag, attr_type);
}

int MPII_Type_set_attr(MPI_Datatype dt, int keyval, void *attr_val, int attr_type) {
	return evAttrSet(1, (int)dt, keyval, (uintptr_t)attr_val, attr_type);
}

/* Fortran's copy and delete callbacks take their arguments by reference:
 * the bindings register proxies that the library calls with the program's
 * function and C's arguments. */
void MPII_Keyval_set_proxy(int keyval, void *copy_proxy, void *delete_proxy) {
	evKeyvalSetProxy(keyval, copy_proxy, delete_proxy);
}

int MPII_Grequest_set_lang_f77(MPI_Request req) {
	(void)req;
	return 0;
}

static int unsupported(void) { return 15; /* MPI_ERR_OTHER */ }

int MPII_Win_get_attr(void) { return unsupported(); }
int MPII_Win_set_attr(void) { return unsupported(); }

/* MPI_Pcontrol tells profilers what to record; the library has nothing to
 * change. (Variadic, so it is written here rather than in Go.) */
int PMPI_Pcontrol(const int level, ...) {
	(void)level;
	return 0;
}
