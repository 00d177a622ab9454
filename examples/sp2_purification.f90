! Density-matrix purification (SP2) with every matrix product through SpAMM under an error budget,
! in Fortran 2008: the same method, output and checks as sp2_purification.c.
!
! From the overlap matrix S and the Fock matrix F (Matrix Market, real symmetric) and the number of
! occupied orbitals it computes the density matrix D = 2 Z X Z^T without diagonalising F: Z = L^-T
! for the Cholesky factor S = L L^T gives F_ortho = Z^T F Z; X starts as
! (lmax I - F_ortho) / (lmax - lmin) with Gershgorin bounds lmin, lmax (eigenvalues in [0, 1], the
! occupied ones the largest), and each step replaces X by X^2 or 2X - X^2, whichever brings trace(X)
! closer to the occupation, until X is idempotent. Every X^2 is spammGemmWithinErrorBound: the
! largest tau whose reported error bound stays within the budget. Per step it prints what
! sp2_purification.c prints. With a reference D.mtx the result is compared with it. Stops with an
! error when the purification fails or the result does not match.
!
!   gfortran $(pkg-config --variable=fortran_module sparsegpu) sp2_purification.f90 \
!            $(pkg-config --libs sparsegpu) -o sp2_purification_f
!   ./sp2_purification_f S.mtx F.mtx OCCUPIED [D.mtx]
!
! The files are read as plain text: decompress the gzip files of examples/data first.
program sp2_purification
  use, intrinsic :: iso_c_binding
  use sparsegpu
  implicit none
  real(c_double), parameter :: budget = 1e-7_c_double      ! bound on ||X^2_exact - X^2||_F per product
  real(c_double), parameter :: idempotent = 1e-6_c_double  ! ||X^2 - X||_F at which X counts as converged
  integer, parameter :: max_steps = 100
  integer(c_int), parameter :: block_size = 16              ! SpAMM skips products of these blocks
  real(c_double), allocatable, target :: x(:, :), x2(:, :)
  real(c_double), allocatable :: l(:, :), reference(:, :)
  real(c_double), target :: one = 1, zero = 0
  real(c_double) :: lmin, lmax, radius, tau, idempotency, total_bound, relative
  character(len=1024) :: path
  type(c_ptr) :: spamm
  type(spammStats_t) :: stats
  integer :: n, i, step, occupied
  logical :: failed

  if (command_argument_count() /= 3 .and. command_argument_count() /= 4) then
    print '(a)', 'usage: sp2_purification_f S.mtx F.mtx OCCUPIED [D.mtx]'
    error stop 2
  end if
  call get_command_argument(1, path)
  l = read_symmetric(trim(path))
  call get_command_argument(2, path)
  x = read_symmetric(trim(path))
  call get_command_argument(3, path)
  read (path, *) occupied  ! stops with a message when it is not an integer
  n = size(l, 1)
  if (size(x, 1) /= n) call fail('F differs in size from S')

  ! X = F_ortho = Z^T F Z = L^-1 F L^-T.
  call cholesky(l)
  call congruence(l, .false., x)

  lmin = huge(lmin)
  lmax = -huge(lmax)
  do i = 1, n
    radius = sum(abs(x(:, i))) - abs(x(i, i))
    lmin = min(lmin, x(i, i) - radius)
    lmax = max(lmax, x(i, i) + radius)
  end do
  x = -x / (lmax - lmin)
  do i = 1, n
    x(i, i) = x(i, i) + lmax / (lmax - lmin)
  end do
  print '(i0, " basis functions, ", i0, " occupied orbitals, spectrum of F_ortho within [", f0.3, ", ", f0.3, "]")', &
    n, occupied, lmin, lmax

  call check(spammCreate(spamm), 'spammCreate')
  call check(spammSetBlockSize(spamm, block_size), 'spammSetBlockSize')
  allocate (x2(n, n))
  total_bound = 0
  print '(a4, a15, a17, a11, a10, a14)', 'step', '||X^2 - X||_F', 'trace(X)', 'tau', 'products', 'sum of bounds'
  do step = 0, max_steps - 1
    call check(spammGemmWithinErrorBound(spamm, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_N, SGPU_OPERATION_N, n, n, n, &
                                         c_loc(one), c_loc(x), n, c_loc(x), n, c_loc(zero), c_loc(x2), n, budget, 60, &
                                         tau), 'spammGemmWithinErrorBound')
    call check(spammGetStats(spamm, stats), 'spammGetStats')
    total_bound = total_bound + stats%errorBound
    idempotency = norm2(x2 - x)
    print '(i4, es15.3, f17.10, es11.2, f9.1, "%", es14.3)', step, idempotency, trace(x), tau, &
      100 * stats%validRatio, total_bound
    if (idempotency <= idempotent) exit
    if (abs(trace(x2) - occupied) < abs(2 * trace(x) - trace(x2) - occupied)) then
      x = x2
    else
      x = 2 * x - x2
    end if
  end do

  failed = .false.
  if (.not. idempotency <= idempotent) then
    print '("FAILED: not idempotent after ", i0, " steps")', max_steps
    failed = .true.
  end if
  ! An idempotent X has eigenvalues 0 and 1: its trace counts the occupied orbitals.
  if (.not. abs(trace(x) - occupied) <= 1e-6_c_double) then
    print '("FAILED: trace(X) misses the occupation by ", es10.3)', abs(trace(x) - occupied)
    failed = .true.
  end if
  if (command_argument_count() == 4) then
    ! D = 2 Z X Z^T = 2 L^-T X L^-1.
    call congruence(l, .true., x)
    call get_command_argument(4, path)
    reference = read_symmetric(trim(path))
    if (size(reference, 1) /= n) call fail('D differs in size from S')
    relative = norm2(2 * x - reference) / norm2(reference)
    print '("||D - D_reference||_F / ||D_reference||_F = ", es10.3)', relative
    ! Looser than the budget: a reference from a file has about ten significant digits and the
    ! truncation of small elements its program applied.
    if (.not. relative <= 1e-6_c_double) then
      print '(a)', 'FAILED: D differs from the reference'
      failed = .true.
    end if
  end if
  call check(spammDestroy(spamm), 'spammDestroy')
  if (failed) then
    print '(a)', 'FAILED'
    error stop 1
  end if
  print '(a)', 'OK'

contains

  subroutine fail(why)
    character(len=*), intent(in) :: why
    print '(a)', why
    error stop 1
  end subroutine fail

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= SGPU_STATUS_SUCCESS) call fail(what // ' failed: ' // sgpu_last_error_message())
  end subroutine check

  ! A real symmetric Matrix Market file in coordinate format (one triangle stored) as a dense matrix.
  function read_symmetric(path) result(a)
    character(len=*), intent(in) :: path
    real(c_double), allocatable :: a(:, :)
    character(len=1024) :: line
    integer :: unit, rows, cols, entries, e, i, j, status
    real(c_double) :: value
    open (newunit=unit, file=path, status='old', action='read', iostat=status)
    if (status /= 0) call fail(path // ': cannot be opened')
    read (unit, '(a)') line
    if (index(line, 'coordinate real symmetric') == 0) &
      call fail(path // ': not a real symmetric Matrix Market matrix in coordinate format')
    do
      read (unit, '(a)') line
      if (line(1:1) /= '%') exit
    end do
    read (line, *) rows, cols, entries
    if (rows /= cols .or. rows < 1) call fail(path // ': not a square matrix')
    allocate (a(rows, rows), source=0.0_c_double)
    do e = 1, entries
      read (unit, *, iostat=status) i, j, value
      if (status /= 0 .or. min(i, j) < 1 .or. max(i, j) > rows) call fail(path // ': bad entry')
      a(i, j) = value
      a(j, i) = value
    end do
    close (unit)
  end function read_symmetric

  ! S = L L^T: L overwrites the lower triangle of s.
  subroutine cholesky(s)
    real(c_double), intent(inout) :: s(:, :)
    integer :: j, k
    do j = 1, size(s, 1)
      do k = 1, j - 1
        s(j:, j) = s(j:, j) - s(j:, k) * s(j, k)
      end do
      if (.not. s(j, j) > 0) call fail('S is not positive definite')
      s(j:, j) = s(j:, j) / sqrt(s(j, j))
    end do
  end subroutine cholesky

  ! A = M^-1 A M^-T for symmetric A, with M = L or, when transposed, M = L^T, for the Cholesky
  ! factor L in the lower triangle of l.
  subroutine congruence(l, transposed, a)
    real(c_double), intent(in) :: l(:, :)
    logical, intent(in) :: transposed
    real(c_double), intent(inout) :: a(:, :)
    call triangular_solve(l, transposed, a)  ! M^-1 A
    a = transpose(a)                         ! A M^-T, A being symmetric
    call triangular_solve(l, transposed, a)  ! M^-1 A M^-T
  end subroutine congruence

  ! B = L^-1 B or, when transposed, L^-T B, column by column.
  subroutine triangular_solve(l, transposed, b)
    real(c_double), intent(in) :: l(:, :)
    logical, intent(in) :: transposed
    real(c_double), intent(inout) :: b(:, :)
    integer :: c, i, n
    n = size(l, 1)
    do c = 1, n
      if (.not. transposed) then
        do i = 1, n
          b(i, c) = b(i, c) / l(i, i)
          b(i + 1:, c) = b(i + 1:, c) - l(i + 1:, i) * b(i, c)
        end do
      else
        do i = n, 1, -1
          b(i, c) = (b(i, c) - dot_product(l(i + 1:, i), b(i + 1:, c))) / l(i, i)
        end do
      end if
    end do
  end subroutine triangular_solve

  pure function trace(a) result(t)
    real(c_double), intent(in) :: a(:, :)
    real(c_double) :: t
    integer :: i
    t = 0
    do i = 1, size(a, 1)
      t = t + a(i, i)
    end do
  end function trace
end program sp2_purification
