! ring.f90: an MPICH-linked Fortran program (mpif90.mpich, Debian's
! libmpichfort.so.12 over the C ABI): a ring exchange, Allreduce, Bcast
! and a derived type. Every result line starts with F<rank>; the test
! compares them with MPICH's.
program ring
  use mpi
  implicit none
  integer :: ierr, rank, size, left, right, x, y, total, i, coltype
  integer :: status(MPI_STATUS_SIZE)
  double precision :: a(4, 3), b(4)
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lv
  integer :: lvn

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  call MPI_Get_library_version(lv, lvn, ierr)
  write (*, '(A,I0,1X,A)') 'V', rank, lv(1:40)
  left = mod(rank + size - 1, size)
  right = mod(rank + 1, size)
  x = rank * 10
  call MPI_Sendrecv(x, 1, MPI_INTEGER, right, 7, y, 1, MPI_INTEGER, left, 7, MPI_COMM_WORLD, status, ierr)
  call MPI_Allreduce(y, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (*, '(A,I0,A,I0,A,I0,A,I0)') 'F', rank, ' got ', y, ' from ', status(MPI_SOURCE), ' sum ', total
  do i = 1, 3
    a(:, i) = rank + i * 0.5d0
  end do
  call MPI_Type_vector(3, 1, 4, MPI_DOUBLE_PRECISION, coltype, ierr)
  call MPI_Type_commit(coltype, ierr)
  b = -1
  if (rank == 0) then
    a(2, :) = (/ 1.5d0, 2.5d0, 3.5d0 /)
  end if
  call MPI_Bcast(a(2, 1), 1, coltype, 0, MPI_COMM_WORLD, ierr)
  write (*, '(A,I0,A,3F6.2)') 'F', rank, ' row 2 after Bcast ', a(2, :)
  call MPI_Type_free(coltype, ierr)
  call MPI_Finalize(ierr)
end program ring
