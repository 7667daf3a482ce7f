// bindings.cxx: MPICH's C++ bindings (libmpichcxx.so.12) over the C ABI: a
// ring with Sendrecv, Allreduce with MPI::SUM, a user operation made with
// MPI::Op::Init (called through the bindings' trampoline), an error
// handler made with Create_errhandler and raised with Call_errhandler, and
// a derived datatype. Every result line starts with X<rank>; the test
// compares them with MPICH's.
#include <mpi.h>
#include <cstdio>

static int rank_;
#define OUT(...) do { char l_[512]; std::snprintf(l_, sizeof l_, __VA_ARGS__); std::printf("X%d %s\n", rank_, l_); std::fflush(stdout); } while (0)

// absmax keeps the value of larger magnitude.
static void absmax(const void *in, void *inout, int len, const MPI::Datatype &) {
	const int *a = static_cast<const int *>(in);
	int *b = static_cast<int *>(inout);
	for (int i = 0; i < len; i++)
		if ((a[i] < 0 ? -a[i] : a[i]) > (b[i] < 0 ? -b[i] : b[i]))
			b[i] = a[i];
}

static int handled = 0;
static void handler(MPI::Comm &, int *code, ...) { handled = *code; }

int main(int argc, char **argv) {
	MPI::Init(argc, argv);
	rank_ = MPI::COMM_WORLD.Get_rank();
	int size = MPI::COMM_WORLD.Get_size();
	char lv[MPI_MAX_LIBRARY_VERSION_STRING];
	int lvn;
	MPI_Get_library_version(lv, &lvn);
	std::printf("V%d %.40s\n", rank_, lv);

	int next = (rank_ + 1) % size, prev = (rank_ + size - 1) % size, got = -1;
	MPI::Status st;
	MPI::COMM_WORLD.Sendrecv(&rank_, 1, MPI::INT, next, 4, &got, 1, MPI::INT, prev, 4, st);
	OUT("ring: got %d from %d tag %d", got, st.Get_source(), st.Get_tag());

	int sum = 0;
	MPI::COMM_WORLD.Allreduce(&rank_, &sum, 1, MPI::INT, MPI::SUM);
	OUT("sum %d", sum);

	MPI::Op op;
	op.Init(absmax, true);
	int v[2] = {rank_ % 2 ? -10 * rank_ : rank_, rank_ == 1 ? 100 : -rank_}, r[2];
	MPI::COMM_WORLD.Allreduce(v, r, 2, MPI::INT, op);
	OUT("absmax %d %d", r[0], r[1]);
	op.Free();

	MPI::Errhandler eh = MPI::COMM_WORLD.Create_errhandler(handler);
	MPI::COMM_WORLD.Set_errhandler(eh);
	MPI::COMM_WORLD.Call_errhandler(MPI::ERR_OTHER);
	OUT("handler saw %d", handled);
	MPI::COMM_WORLD.Set_errhandler(MPI::ERRORS_THROW_EXCEPTIONS);
	eh.Free();

	MPI::Datatype pair = MPI::INT.Create_contiguous(2);
	pair.Commit();
	int p[2] = {rank_, -rank_}, q[2] = {0, 0};
	MPI::COMM_WORLD.Sendrecv(p, 1, pair, next, 5, q, 1, pair, prev, 5);
	OUT("pair %d %d", q[0], q[1]);
	pair.Free();

	MPI::Finalize();
	return 0;
}
