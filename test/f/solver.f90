! solver.f90: what a Fortran solver calls (mpif90.mpich, Debian's
! libmpichfort.so.12 over the C ABI): a 2-D grid split in strips over a
! Cartesian topology, Jacobi sweeps with halo rows exchanged as a derived
! type by Isend/Irecv/Waitall and by Sendrecv, the residual by Allreduce
! and Iallreduce, MAXLOC on MPI_2DOUBLE_PRECISION, Comm_split, Gather,
! Alltoall, attributes (MPI_TAG_UB, a keyval with Fortran callbacks),
! Wtime. Every result line starts with F<rank>; the test compares them with
! MPICH's.
module counters
  integer :: copies = 0, deletes = 0
end module counters

integer function copy_fn(oldcomm, keyval, extra, valin, valout, flag, ierr)
  use mpi
  use counters
  implicit none
  integer :: oldcomm, keyval, ierr
  integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
  logical :: flag
  copies = copies + 1
  valout = valin + extra
  flag = .true.
  ierr = MPI_SUCCESS
  copy_fn = MPI_SUCCESS
end function copy_fn

integer function delete_fn(comm, keyval, val, extra, ierr)
  use mpi
  use counters
  implicit none
  integer :: comm, keyval, ierr
  integer(kind=MPI_ADDRESS_KIND) :: val, extra
  deletes = deletes + 1
  ierr = MPI_SUCCESS
  delete_fn = MPI_SUCCESS
end function delete_fn

program solver
  use mpi
  use counters
  implicit none
  integer, parameter :: nx = 64, ny = 16
  integer :: ierr, rank, size, cart, up, down, rowtype, i, j, it, req(4), half, hrank, hsize
  integer :: stats(MPI_STATUS_SIZE, 4), status(MPI_STATUS_SIZE), key, dupcomm, ireq
  integer, dimension(1) :: dims
  logical, dimension(1) :: periods
  logical :: found
  integer(kind=MPI_ADDRESS_KIND) :: tagub, val, extra
  double precision :: u(0:ny + 1, nx), unew(0:ny + 1, nx), res, gres, ires, pair(2), best(2), t0, t1
  integer, allocatable :: sendv(:), recvv(:), gathered(:)
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lv
  integer :: lvn, iv(2)
  external :: copy_fn, delete_fn
  integer :: copy_fn, delete_fn

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  call MPI_Get_library_version(lv, lvn, ierr)
  write (*, '(A,I0,1X,A)') 'V', rank, lv(1:40)

  ! strips of ny rows over a non-periodic line of ranks
  dims(1) = 0
  periods(1) = .false.
  call MPI_Dims_create(size, 1, dims, ierr)
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., cart, ierr)
  call MPI_Cart_shift(cart, 0, 1, up, down, ierr)
  write (*, '(A,I0,A,I0,A,I0,A,L1)') 'F', rank, ' neighbours ', up, ' ', down, ' null ', &
    up == MPI_PROC_NULL .or. down == MPI_PROC_NULL
  ! a row of the strip is strided in Fortran's column-major order
  call MPI_Type_vector(nx, 1, ny + 2, MPI_DOUBLE_PRECISION, rowtype, ierr)
  call MPI_Type_commit(rowtype, ierr)
  u = 0
  do j = 1, nx
    do i = 1, ny
      u(i, j) = rank * ny + i + j * 0.01d0
    end do
  end do
  do it = 1, 20
    if (mod(it, 2) == 0) then
      call MPI_Irecv(u(0, 1), 1, rowtype, up, 1, cart, req(1), ierr)
      call MPI_Irecv(u(ny + 1, 1), 1, rowtype, down, 2, cart, req(2), ierr)
      call MPI_Isend(u(ny, 1), 1, rowtype, down, 1, cart, req(3), ierr)
      call MPI_Isend(u(1, 1), 1, rowtype, up, 2, cart, req(4), ierr)
      call MPI_Waitall(4, req, stats, ierr)
    else
      call MPI_Sendrecv(u(ny, 1), 1, rowtype, down, 1, u(0, 1), 1, rowtype, up, 1, cart, status, ierr)
      call MPI_Sendrecv(u(1, 1), 1, rowtype, up, 2, u(ny + 1, 1), 1, rowtype, down, 2, cart, status, ierr)
    end if
    unew = u
    res = 0
    do j = 2, nx - 1
      do i = 1, ny
        unew(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
        res = max(res, abs(unew(i, j) - u(i, j)))
      end do
    end do
    u = unew
    call MPI_Allreduce(res, gres, 1, MPI_DOUBLE_PRECISION, MPI_MAX, cart, ierr)
  end do
  call MPI_Iallreduce(sum(u(1:ny, :)), ires, 1, MPI_DOUBLE_PRECISION, MPI_SUM, cart, ireq, ierr)
  call MPI_Wait(ireq, status, ierr)
  write (*, '(A,I0,A,ES14.7,A,ES14.7)') 'F', rank, ' residual ', gres, ' total ', ires
  ! where the largest value of the grid lies
  pair(1) = maxval(u(1:ny, :))
  pair(2) = rank
  call MPI_Allreduce(pair, best, 1, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, cart, ierr)
  write (*, '(A,I0,A,F10.4,A,I0)') 'F', rank, ' max ', best(1), ' on ', int(best(2))

  ! halves, gather and alltoall
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, half, ierr)
  call MPI_Comm_rank(half, hrank, ierr)
  call MPI_Comm_size(half, hsize, ierr)
  allocate (sendv(size), recvv(size), gathered(hsize))
  call MPI_Gather(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, 0, half, ierr)
  if (hrank == 0) write (*, '(A,I0,A,16I3)') 'F', rank, ' half gathered', gathered
  do i = 1, size
    sendv(i) = rank * 100 + i
  end do
  call MPI_Alltoall(sendv, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  write (*, '(A,I0,A,16I5)') 'F', rank, ' alltoall', recvv

  ! attributes
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tagub, found, ierr)
  write (*, '(A,I0,A,L1,A,L1)') 'F', rank, ' tag_ub found ', found, ' at least 32767 ', tagub >= 32767
  ! MPI-1's form fills a default INTEGER, and nothing after it
  iv = -7
  call MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, iv(1), found, ierr)
  write (*, '(A,I0,A,L1,A,L1,A,I0)') 'F', rank, ' attr_get found ', found, ' same tag_ub ', iv(1) == tagub, &
    ' next ', iv(2)
  extra = 5
  call MPI_Comm_create_keyval(copy_fn, delete_fn, key, extra, ierr)
  val = 37
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, val, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dupcomm, ierr)
  call MPI_Comm_get_attr(dupcomm, key, val, found, ierr)
  write (*, '(A,I0,A,L1,A,I0,A,I0)') 'F', rank, ' dup attr found ', found, ' value ', val, ' copies ', copies
  call MPI_Comm_free(dupcomm, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, key, ierr)
  call MPI_Comm_free_keyval(key, ierr)
  write (*, '(A,I0,A,I0)') 'F', rank, ' deletes ', deletes

  t0 = MPI_Wtime()
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t1 = MPI_Wtime()
  write (*, '(A,I0,A,L1)') 'F', rank, ' wtime moves forward ', t1 >= t0
  call MPI_Type_free(rowtype, ierr)
  call MPI_Comm_free(half, ierr)
  call MPI_Comm_free(cart, ierr)
  call MPI_Finalize(ierr)
end program solver
