package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

// Object names, info hints and the remaining communicator queries.

// builtinTypeNames are the names MPI_Type_get_name gives the predefined
// datatypes (MPICH 4.0.2's handles, first name of each).
var builtinTypeNames = map[uint32]string{
	0x4c000101: "MPI_CHAR",
	0x4c000118: "MPI_SIGNED_CHAR",
	0x4c000102: "MPI_UNSIGNED_CHAR",
	0x4c00010d: "MPI_BYTE",
	0x4c00040e: "MPI_WCHAR",
	0x4c000203: "MPI_SHORT",
	0x4c000204: "MPI_UNSIGNED_SHORT",
	0x4c000405: "MPI_INT",
	0x4c000406: "MPI_UNSIGNED",
	0x4c000807: "MPI_LONG",
	0x4c000808: "MPI_UNSIGNED_LONG",
	0x4c00040a: "MPI_FLOAT",
	0x4c00080b: "MPI_DOUBLE",
	0x4c00100c: "MPI_LONG_DOUBLE",
	0x4c000809: "MPI_LONG_LONG_INT",
	0x4c000819: "MPI_UNSIGNED_LONG_LONG",
	0x4c00010f: "MPI_PACKED",
	0x4c000010: "MPI_LB",
	0x4c000011: "MPI_UB",
	0x8c000000: "MPI_FLOAT_INT",
	0x8c000001: "MPI_DOUBLE_INT",
	0x8c000002: "MPI_LONG_INT",
	0x8c000003: "MPI_SHORT_INT",
	0x4c000816: "MPI_2INT",
	0x8c000004: "MPI_LONG_DOUBLE_INT",
	0x4c00081e: "MPI_COMPLEX",
	0x4c001022: "MPI_DOUBLE_COMPLEX",
	0x4c00041d: "MPI_LOGICAL",
	0x4c00041c: "MPI_REAL",
	0x4c00081f: "MPI_DOUBLE_PRECISION",
	0x4c00041b: "MPI_INTEGER",
	0x4c000820: "MPI_2INTEGER",
	0x4c000821: "MPI_2REAL",
	0x4c001023: "MPI_2DOUBLE_PRECISION",
	0x4c00011a: "MPI_CHARACTER",
	0x4c000427: "MPI_REAL4",
	0x4c000829: "MPI_REAL8",
	0x4c00102b: "MPI_REAL16",
	0x4c000828: "MPI_COMPLEX8",
	0x4c00102a: "MPI_COMPLEX16",
	0x4c00202c: "MPI_COMPLEX32",
	0x4c00012d: "MPI_INTEGER1",
	0x4c00022f: "MPI_INTEGER2",
	0x4c000430: "MPI_INTEGER4",
	0x4c000831: "MPI_INTEGER8",
	0x4c000137: "MPI_INT8_T",
	0x4c000238: "MPI_INT16_T",
	0x4c000439: "MPI_INT32_T",
	0x4c00083a: "MPI_INT64_T",
	0x4c00013b: "MPI_UINT8_T",
	0x4c00023c: "MPI_UINT16_T",
	0x4c00043d: "MPI_UINT32_T",
	0x4c00083e: "MPI_UINT64_T",
	0x4c00013f: "MPI_C_BOOL",
	0x4c000840: "MPI_C_FLOAT_COMPLEX",
	0x4c001041: "MPI_C_DOUBLE_COMPLEX",
	0x4c002042: "MPI_C_LONG_DOUBLE_COMPLEX",
	0x4c000843: "MPI_AINT",
	0x4c000844: "MPI_OFFSET",
	0x4c000845: "MPI_COUNT",
	0x4c000133: "MPI_CXX_BOOL",
	0x4c000834: "MPI_CXX_FLOAT_COMPLEX",
	0x4c001035: "MPI_CXX_DOUBLE_COMPLEX",
	0x4c002036: "MPI_CXX_LONG_DOUBLE_COMPLEX",
}

//export PMPI_Type_set_name
func PMPI_Type_set_name(dt C.MPI_Datatype, name *C.char) (mpirc C.int) {
	defer guard("MPI_Type_set_name", &mpirc)
	if _, _, err := layoutOf(dt); err != nil {
		return ret("MPI_Type_set_name", err)
	}
	s, err := goString(name, maxObjectName)
	if err != nil {
		return ret("MPI_Type_set_name", err)
	}
	lib.mu.Lock()
	if lib.typeNames == nil {
		lib.typeNames = make(map[uint32]string)
	}
	lib.typeNames[uint32(dt)] = s
	lib.mu.Unlock()
	return errSuccess
}

//export PMPI_Type_get_name
func PMPI_Type_get_name(dt C.MPI_Datatype, name *C.char, n *C.int) (mpirc C.int) {
	defer guard("MPI_Type_get_name", &mpirc)
	if name == nil || n == nil {
		return ret("MPI_Type_get_name", errorf(errArg, "NULL name or length"))
	}
	if _, _, err := layoutOf(dt); err != nil {
		return ret("MPI_Type_get_name", err)
	}
	lib.mu.Lock()
	s, ok := lib.typeNames[uint32(dt)]
	lib.mu.Unlock()
	if !ok {
		s = builtinTypeNames[uint32(dt)] // "" for an unnamed derived type
	}
	cString(name, maxObjectName, s, n)
	return errSuccess
}

// forgetTypeName drops a freed datatype's name (its handle may be reused).
func forgetTypeName(dt C.MPI_Datatype) {
	lib.mu.Lock()
	delete(lib.typeNames, uint32(dt))
	lib.mu.Unlock()
}

// MPI_Comm_set_info accepts hints and MPI_Comm_get_info returns the ones
// in use: none, as MPI allows (this library acts on no communicator hint).

// checkInfo accepts MPI_INFO_NULL and any live info object.
func checkInfo(in C.MPI_Info) error {
	if in == infoNull {
		return nil
	}
	_, err := lib.info(in)
	return err
}

//export PMPI_Comm_set_info
func PMPI_Comm_set_info(comm C.MPI_Comm, in C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Comm_set_info", &mpirc)
	if _, err := lib.comm(comm); err != nil {
		return retc(comm, "MPI_Comm_set_info", err)
	}
	if _, err := lib.info(in); err != nil { // MPI_INFO_NULL too, as in MPICH
		return retc(comm, "MPI_Comm_set_info", err)
	}
	return errSuccess
}

//export PMPI_Comm_get_info
func PMPI_Comm_get_info(comm C.MPI_Comm, out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Comm_get_info", &mpirc)
	if _, err := lib.comm(comm); err != nil {
		return retc(comm, "MPI_Comm_get_info", err)
	}
	if out == nil {
		return retc(comm, "MPI_Comm_get_info", errorf(errArg, "NULL info"))
	}
	lib.addInfo(&info{}, out)
	return errSuccess
}

//export PMPI_Comm_dup_with_info
func PMPI_Comm_dup_with_info(comm C.MPI_Comm, in C.MPI_Info, newcomm *C.MPI_Comm) (mpirc C.int) {
	defer guard("MPI_Comm_dup_with_info", &mpirc)
	if err := checkInfo(in); err != nil {
		return retc(comm, "MPI_Comm_dup_with_info", err)
	}
	return PMPI_Comm_dup(comm, newcomm)
}

//export PMPI_Comm_idup_with_info
func PMPI_Comm_idup_with_info(comm C.MPI_Comm, in C.MPI_Info, newcomm *C.MPI_Comm, req *C.MPI_Request) (mpirc C.int) {
	defer guard("MPI_Comm_idup_with_info", &mpirc)
	if err := checkInfo(in); err != nil {
		return retc(comm, "MPI_Comm_idup_with_info", err)
	}
	return PMPI_Comm_idup(comm, newcomm, req)
}

// MPI_Info_create_env: MPICH puts no key in it, nor do we; it may be
// called before MPI_Init.
//
//export PMPI_Info_create_env
func PMPI_Info_create_env(argc C.int, argv **C.char, out *C.MPI_Info) (mpirc C.int) {
	defer guard("MPI_Info_create_env", &mpirc)
	if out == nil {
		return ret("MPI_Info_create_env", errorf(errArg, "NULL info"))
	}
	lib.addInfo(&info{}, out)
	return errSuccess
}

//export PMPI_Comm_test_inter
func PMPI_Comm_test_inter(comm C.MPI_Comm, flag *C.int) (mpirc C.int) {
	defer guard("MPI_Comm_test_inter", &mpirc)
	ce, err := lib.comm(comm)
	if err != nil {
		return retc(comm, "MPI_Comm_test_inter", err)
	}
	*flag = 0
	if ce.c.IsInter() {
		*flag = 1
	}
	return errSuccess
}
