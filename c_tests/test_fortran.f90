! Fortran 2008 test of libsparsegpu through include/sparsegpu.f90: every family on small generated
! inputs, every output element checked against a naive double-precision reference computed here.
! Dense matrices are plain column-major Fortran arrays; sparse indices are 1-based.
! Prints "N passed, M failed" and stops with an error when M > 0.
program test_fortran
  use, intrinsic :: iso_c_binding
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
  use sparsegpu
  implicit none
  integer :: npass = 0, nfail = 0

  call test_common()
  call test_spamm()
  call test_smat()
  call test_msrep()
  call test_sddmm()

  print '(i0, " passed, ", i0, " failed")', npass, nfail
  if (nfail > 0) error stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) then
      npass = npass + 1
    else
      nfail = nfail + 1
      print '("FAILED: ", a)', what
    end if
  end subroutine check

  ! A call that must succeed; on failure prints the status name and the library's message.
  subroutine check_ok(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status == SGPU_STATUS_SUCCESS) then
      call check(.true., what)
    else
      call check(.false., what // ' returned ' // sgpu_status_name(status) // ': ' // sgpu_last_error_message())
    end if
  end subroutine check_ok

  ! Every element of got against ref: |got - ref| <= tol * (1 + max |ref|). One check per array.
  subroutine check_close(got, ref, tol, what)
    real(c_double), intent(in) :: got(:), ref(:)
    real(c_double), intent(in) :: tol
    character(len=*), intent(in) :: what
    integer :: i
    real(c_double) :: bound
    character(len=120) :: msg
    bound = tol * (1 + maxval(abs(ref)))
    if (size(got) /= size(ref)) then
      call check(.false., what // ': wrong size')
      return
    end if
    do i = 1, size(ref)
      if (.not. abs(got(i) - ref(i)) <= bound) then
        write (msg, '(": element ", i0, " is ", es14.6, ", expected ", es14.6)') i, got(i), ref(i)
        call check(.false., what // trim(msg))
        return
      end if
    end do
    call check(.true., what)
  end subroutine check_close

  ! Deterministic dense test data in [-1, 1].
  subroutine fill(a, seed)
    real(c_double), intent(out) :: a(:, :)
    real(c_double), intent(in) :: seed
    integer :: i, j
    do j = 1, size(a, 2)
      do i = 1, size(a, 1)
        a(i, j) = sin(seed + 0.37_c_double * i + 1.13_c_double * j * j)
      end do
    end do
  end subroutine fill

  ! A rows x cols sparse matrix in 1-based CSR (row 3 left empty) and its dense copy.
  subroutine make_csr(rows, cols, dense, rowptr, colind, vals)
    integer, intent(in) :: rows, cols
    real(c_double), allocatable, intent(out) :: dense(:, :)
    integer(c_int), allocatable, intent(out) :: rowptr(:), colind(:)
    real(c_double), allocatable, target, intent(out) :: vals(:)
    integer :: i, j, e
    allocate(dense(rows, cols))
    call fill(dense, 0.5_c_double)
    do j = 1, cols
      do i = 1, rows
        if (i == 3 .or. (mod(3 * i + 7 * j, 5) /= 0 .and. i /= j)) dense(i, j) = 0
      end do
    end do
    allocate(rowptr(rows + 1), colind(count(dense /= 0)), vals(count(dense /= 0)))
    e = 0
    rowptr(1) = 1
    do i = 1, rows
      do j = cols, 1, -1   ! columns in decreasing order: the library must not need sorted indices
        if (dense(i, j) /= 0) then
          e = e + 1
          colind(e) = j
          vals(e) = dense(i, j)
        end if
      end do
      rowptr(i + 1) = e + 1
    end do
  end subroutine make_csr

  subroutine test_common()
    integer(c_int) :: version, status
    type(c_ptr) :: handle, matrix
    integer(c_int) :: rowptr(3) = [1, 1, 1]
    integer(c_int) :: colind(1) = [1]
    character(len=:), allocatable :: msg

    call check_ok(sgpuGetVersion(version), 'sgpuGetVersion')
    call check(version == SGPU_VERSION, 'sgpuGetVersion returns SGPU_VERSION')
    call check(sgpu_status_name(SGPU_STATUS_INVALID_SIZE) == 'SGPU_STATUS_INVALID_SIZE', 'sgpuGetStatusName')
    call check(len(sgpu_status_string(SGPU_STATUS_SUCCESS)) > 0, 'sgpuGetStatusString')
    call check(sgpu_status_name(12345_c_int) == 'SGPU_STATUS_UNKNOWN', 'sgpuGetStatusName of a non-status')

    call check_ok(smatCreate(handle), 'smatCreate')
    status = smatCreateCsr(handle, matrix, -1_c_int, 2_c_int, 0_c_int64_t, rowptr, colind, c_null_ptr, &
                           SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ONE)
    msg = sgpu_last_error_message()
    call check(status == SGPU_STATUS_INVALID_SIZE, 'smatCreateCsr with rows = -1 is INVALID_SIZE, got ' &
               // sgpu_status_name(status))
    call check(index(msg, 'smatCreateCsr') > 0, 'error message names the function: "' // msg // '"')
    call check(smatDestroy(handle) == SGPU_STATUS_SUCCESS, 'smatDestroy')
    call check(smatDestroy(c_null_ptr) == SGPU_STATUS_SUCCESS, 'smatDestroy(NULL)')
  end subroutine test_common

  ! op(X) for an sgpuOperation value.
  function op(trans, x) result(y)
    integer(c_int), intent(in) :: trans
    real(c_double), intent(in) :: x(:, :)
    real(c_double), allocatable :: y(:, :)
    if (trans == SGPU_OPERATION_T) then
      y = transpose(x)
    else
      y = x
    end if
  end function op

  ! SpAMM: C = alpha * op(A) * op(B) + beta * C on column-major arrays, as BLAS dgemm / sgemm.
  subroutine test_spamm()
    integer, parameter :: m = 21, n = 17, k = 13, ld = 24, big = 64
    integer(c_int), parameter :: ops(2) = [SGPU_OPERATION_N, SGPU_OPERATION_T]
    real(c_double) :: a(ld, ld), b(ld, ld), c(ld, n), ref(m, n), alpha = 1.5_c_double, beta = -0.5_c_double
    real(c_float), target :: a32(ld, ld), b32(ld, ld), c32(ld, n), two32 = 2, one32 = 1
    real(c_double), target :: x(big, big), y(big, big)
    real(c_double) :: z(big, big), exact(big, big), tau, ratio
    type(c_ptr) :: handle
    type(spammStats_t) :: stats
    integer(c_int) :: ta, tb, bs, i, j
    character(len=40) :: what

    call check_ok(spammCreate(handle), 'spammCreate')
    call fill(a, 7.0_c_double)
    call fill(b, 8.0_c_double)
    call fill(c, 9.0_c_double)
    ! tau = 0 performs every block product: plain dgemm, every transpose combination, padded ld.
    do ta = 1, 2
      do tb = 1, 2
        write (what, '("spammDgemm tau = 0, op ", i0, ",", i0)') ops(ta), ops(tb)
        ref = alpha * matmul(op(ops(ta), a(1:merge(m, k, ta == 1), 1:merge(k, m, ta == 1))), &
                             op(ops(tb), b(1:merge(k, n, tb == 1), 1:merge(n, k, tb == 1)))) + beta * c(1:m, :)
        call check_ok(spammDgemm(handle, ops(ta), ops(tb), m, n, k, alpha, a, ld, b, ld, beta, c, ld, 0.0_c_double), &
                      trim(what))
        call check_close([c(1:m, :)], [ref], 1e-13_c_double, trim(what) // ' result')
      end do
    end do
    a32 = real(a, c_float)
    b32 = real(b, c_float)
    c32 = real(c, c_float)
    ref = 2 * matmul(transpose(real(a32(1:k, 1:m), c_double)), real(b32(1:k, 1:n), c_double)) + real(c32(1:m, :), c_double)
    call check_ok(spammSgemm(handle, SGPU_OPERATION_T, SGPU_OPERATION_N, m, n, k, 2.0_c_float, a32, ld, b32, ld, &
                             1.0_c_float, c32, ld, 0.0_c_double), 'spammSgemm tau = 0, op T,N')
    call check_close([real(c32(1:m, :), c_double)], [ref], 1e-5_c_double, 'spammSgemm result')
    ! The same product through spammGemmEx (the value type as an argument, scalars and arrays by address).
    c32 = real(c, c_float)
    call check_ok(spammGemmEx(handle, SGPU_VALUE_TYPE_F32, SGPU_OPERATION_T, SGPU_OPERATION_N, m, n, k, c_loc(two32), &
                              c_loc(a32), ld, c_loc(b32), ld, c_loc(one32), c_loc(c32), ld, 0.0_c_double), &
                  'spammGemmEx f32 tau = 0, op T,N')
    call check_close([real(c32(1:m, :), c_double)], [ref], 1e-5_c_double, 'spammGemmEx result')

    ! tau > 0 on matrices decaying away from the diagonal: blocks are skipped, the error stays
    ! within the reported bound. tau comes from spammTuneTau for half of the block products.
    call check_ok(spammSetBlockSize(handle, 8), 'spammSetBlockSize')
    call check_ok(spammGetBlockSize(handle, bs), 'spammGetBlockSize')
    call check(bs == 8, 'spammGetBlockSize returns 8')
    do j = 1, big
      do i = 1, big
        x(i, j) = exp(-abs(i - j) / 4.0_c_double) * (1 + 0.1_c_double * sin(real(i * j, c_double)))
        y(i, j) = exp(-abs(i - j) / 3.0_c_double) * (1 + 0.1_c_double * cos(real(i + j, c_double)))
      end do
    end do
    exact = matmul(x, y)
    call check_ok(spammTuneTau(handle, SGPU_VALUE_TYPE_F64, SGPU_OPERATION_N, SGPU_OPERATION_N, big, big, big, &
                               c_loc(x), big, c_loc(y), big, 0.5_c_double, 0.05_c_double, 50, tau, ratio), 'spammTuneTau')
    call check(tau > 0 .and. abs(ratio - 0.5_c_double) <= 0.05_c_double, 'spammTuneTau reaches the target ratio')
    z = ieee_value(z, ieee_quiet_nan)   ! beta = 0 never reads C
    call check_ok(spammDgemm(handle, SGPU_OPERATION_N, SGPU_OPERATION_N, big, big, big, 1.0_c_double, x, big, y, big, &
                             0.0_c_double, z, big, tau), 'spammDgemm tau > 0')
    call check_ok(spammGetStats(handle, stats), 'spammGetStats')
    call check(stats%tau == tau .and. stats%blockSize == 8 .and. stats%totalProducts == 8**3, 'spammGetStats tau, blocks')
    call check(stats%performedProducts < stats%totalProducts .and. &
               abs(stats%validRatio - real(stats%performedProducts, c_double) / stats%totalProducts) < 1e-12_c_double, &
               'spammGetStats skipped products and valid ratio')
    call check(abs(stats%validRatio - ratio) < 1e-12_c_double, 'spammGetStats ratio matches spammTuneTau')
    call check(all(z == z), 'spammDgemm with beta = 0 ignores NaN in C')
    call check(norm2(exact - z) <= stats%errorBound * (1 + 1e-12_c_double) + 1e-12_c_double .and. &
               norm2(exact - z) > 0, 'spammDgemm tau > 0: 0 < error <= errorBound')
    call check_ok(spammDestroy(handle), 'spammDestroy')
  end subroutine test_spamm

  ! SMaT: C = alpha * A * B + beta * C, A from 1-based CSR, B and C column-major with padded ld.
  subroutine test_smat()
    integer, parameter :: rows = 37, cols = 29, n = 6, ldb = cols + 2, ldc = rows + 1
    real(c_double), allocatable :: a(:, :)
    integer(c_int), allocatable :: rowptr(:), colind(:)
    real(c_double), allocatable, target :: vals(:)
    real(c_double), target :: b(ldb, n), c(ldc, n), alpha = 1.5_c_double, beta = -0.5_c_double
    real(c_double) :: ref(rows, n), c0(ldc, n)
    type(c_ptr) :: handle, matrix
    type(smatMatrixInfo_t) :: info
    integer(c_int) :: mode, format, math_mode

    call make_csr(rows, cols, a, rowptr, colind, vals)
    call fill(b, 1.0_c_double)
    call fill(c, 2.0_c_double)
    c0 = c
    ref = alpha * matmul(a, b(1:cols, :)) + beta * c(1:rows, :)

    call check_ok(smatCreate(handle), 'smatCreate')
    call check_ok(smatSetReorderMode(handle, SMAT_REORDER_MODE_ALWAYS), 'smatSetReorderMode')
    call check_ok(smatSetFormat(handle, SMAT_FORMAT_TILES), 'smatSetFormat')
    call check_ok(smatGetFormat(handle, format), 'smatGetFormat')
    call check(format == SMAT_FORMAT_TILES, 'smatGetFormat returns TILES')
    call check_ok(smatSetMathMode(handle, SMAT_MATH_MODE_TF32X3), 'smatSetMathMode')
    call check_ok(smatGetMathMode(handle, math_mode), 'smatGetMathMode')
    call check(math_mode == SMAT_MATH_MODE_TF32X3, 'smatGetMathMode returns TF32X3')
    call check_ok(smatGetReorderMode(handle, mode), 'smatGetReorderMode')
    call check(mode == SMAT_REORDER_MODE_ALWAYS, 'smatGetReorderMode returns ALWAYS')
    call check_ok(smatCreateCsr(handle, matrix, rows, cols, int(size(vals), c_int64_t), rowptr, colind, &
                                c_loc(vals), SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ONE), 'smatCreateCsr (1-based)')
    call check_ok(smatGetMatrixInfo(matrix, info), 'smatGetMatrixInfo')
    call check(info%rows == rows .and. info%cols == cols .and. info%nnz == size(vals), 'smatGetMatrixInfo shape')
    call check(info%valueType == SGPU_VALUE_TYPE_F64 .and. info%tileRows == 8 .and. info%tileCols == 4, &
               'smatGetMatrixInfo tile of f64 is 8 x 4')
    call check(info%blockCount > 0 .and. info%fillRatio > 0 .and. info%fillRatio <= 1, 'smatGetMatrixInfo blocks')
    call check(info%rowsInTiles + info%rowsInCsr == rows .and. info%bytes > 0 .and. info%csrBytes > 0, &
               'smatGetMatrixInfo split and sizes')

    call check_ok(smatSpMM(handle, matrix, n, c_loc(alpha), c_loc(b), ldb, c_loc(beta), c_loc(c), ldc, &
                           SGPU_LAYOUT_COL_MAJOR), 'smatSpMM (column-major)')
    call check_close([c(1:rows, :)], [ref], 1e-13_c_double, 'smatSpMM result')
    call check(all(c(rows + 1:, :) == c0(rows + 1:, :)), 'smatSpMM leaves the padding rows of C alone')

    call check_ok(smatDestroyMatrix(matrix), 'smatDestroyMatrix')
    call check_ok(smatDestroy(handle), 'smatDestroy')
  end subroutine test_smat

  ! MSREP: y = alpha * A * x + beta * y with A cut into several partitions.
  subroutine test_msrep()
    integer, parameter :: rows = 41, cols = 33, parts = 3
    real(c_double), allocatable :: a(:, :)
    integer(c_int), allocatable :: rowptr(:), colind(:)
    real(c_double), allocatable, target :: vals(:)
    real(c_double), target :: x(cols, 1), y(rows, 1), alpha = 2.0_c_double, beta = 0.25_c_double
    real(c_double) :: ref(rows, 1)
    type(c_ptr) :: handle, matrix
    type(msrepPartitionInfo_t) :: info
    integer(c_int) :: count, p, total, next
    logical :: contiguous

    call make_csr(rows, cols, a, rowptr, colind, vals)
    call fill(x, 3.0_c_double)
    call fill(y, 4.0_c_double)
    ref = alpha * matmul(a, x) + beta * y

    call check_ok(msrepCreate(handle), 'msrepCreate')
    call check_ok(msrepCreateCsr(handle, matrix, rows, cols, int(size(vals), c_int64_t), rowptr, colind, &
                                 c_loc(vals), SGPU_VALUE_TYPE_F64, SGPU_INDEX_BASE_ONE, parts), 'msrepCreateCsr (1-based)')
    call check_ok(msrepGetPartitionCount(matrix, count), 'msrepGetPartitionCount')
    call check(count == parts, 'msrepGetPartitionCount returns numPartitions')
    total = 0
    next = 0
    contiguous = .true.
    do p = 0, count - 1
      call check_ok(msrepGetPartitionInfo(matrix, p, info), 'msrepGetPartitionInfo')
      contiguous = contiguous .and. info%startIdx == next .and. info%nnz == info%endIdx - info%startIdx &
                   .and. info%format == SGPU_SPARSE_FORMAT_CSR
      next = int(info%endIdx)
      total = total + int(info%nnz)
    end do
    call check(contiguous .and. total == size(vals), 'partitions cover the nonzeros in order')

    call check_ok(msrepSpMV(handle, matrix, c_loc(alpha), c_loc(x), c_loc(beta), c_loc(y)), 'msrepSpMV')
    call check_close([y], [ref], 1e-13_c_double, 'msrepSpMV result')

    call check_ok(msrepDestroyMatrix(matrix), 'msrepDestroyMatrix')
    call check_ok(msrepDestroy(handle), 'msrepDestroy')
  end subroutine test_msrep

  ! SDDMM: out(e) = alpha * S(e) * sum_p A(i, p) * B(j, p) for each nonzero e = (i, j) of S.
  subroutine test_sddmm()
    integer, parameter :: m = 23, n = 19, k = 11
    integer(c_int), parameter :: algorithms(2) = [SDDMM_ALGORITHM_TILED, SDDMM_ALGORITHM_COO]
    real(c_double), allocatable :: s(:, :), ref(:)
    integer(c_int), allocatable :: rowptr(:), colind(:)
    real(c_double), allocatable, target :: vals(:), out(:)
    real(c_float), allocatable, target :: out32(:)
    real(c_double), target :: a(m, k), b(n, k), alpha = -0.75_c_double
    real(c_float), target :: a32(m, k), b32(n, k), alpha32 = 2.0_c_float
    type(c_ptr) :: handle, plan
    integer(c_int) :: algorithm, nnz, i, e, t

    call make_csr(m, n, s, rowptr, colind, vals)
    nnz = size(vals)
    call fill(a, 5.0_c_double)
    call fill(b, 6.0_c_double)
    allocate(ref(nnz), out(nnz), out32(nnz))
    do i = 1, m
      do e = rowptr(i), rowptr(i + 1) - 1
        ref(e) = dot_product(a(i, :), b(colind(e), :))
      end do
    end do

    call check_ok(sddmmCreate(handle), 'sddmmCreate')
    call check_ok(sddmmDynamic(handle, m, n, k, c_loc(alpha), c_loc(a), m, c_loc(b), n, SGPU_LAYOUT_COL_MAJOR, &
                               int(nnz, c_int64_t), rowptr, colind, c_loc(vals), SGPU_INDEX_BASE_ONE, &
                               SGPU_VALUE_TYPE_F64, c_loc(out)), 'sddmmDynamic (f64, 1-based)')
    call check_close(out, alpha * vals * ref, 1e-13_c_double, 'sddmmDynamic result')
    call check_ok(sddmmGetLastAlgorithm(handle, algorithm), 'sddmmGetLastAlgorithm')
    call check(any(algorithm == algorithms), 'sddmmGetLastAlgorithm is TILED or COO')

    ! A plan on the pattern alone (sValues = NULL: every S(e) = 1), f32 data, each algorithm forced.
    a32 = real(a, c_float)
    b32 = real(b, c_float)
    do i = 1, m
      do e = rowptr(i), rowptr(i + 1) - 1
        ref(e) = dot_product(real(a32(i, :), c_double), real(b32(colind(e), :), c_double))
      end do
    end do
    call check_ok(sddmmCreatePlan(handle, plan, m, n, int(nnz, c_int64_t), rowptr, colind, SGPU_INDEX_BASE_ONE), &
                  'sddmmCreatePlan (1-based)')
    do t = 1, size(algorithms)
      call check_ok(sddmmSetAlgorithm(handle, algorithms(t)), 'sddmmSetAlgorithm')
      out32 = -1
      call check_ok(sddmmExecutePlan(handle, plan, k, c_loc(alpha32), c_loc(a32), m, c_loc(b32), n, &
                                     SGPU_LAYOUT_COL_MAJOR, c_null_ptr, SGPU_VALUE_TYPE_F32, c_loc(out32)), &
                    'sddmmExecutePlan (f32, pattern only)')
      call check_close(real(out32, c_double), alpha32 * ref, 1e-5_c_double, 'sddmmExecutePlan result')
      call check_ok(sddmmGetLastAlgorithm(handle, algorithm), 'sddmmGetLastAlgorithm')
      call check(algorithm == algorithms(t), 'sddmmGetLastAlgorithm reports the forced algorithm')
    end do
    ! f32 in 3xTF32: FP32-level accuracy on either backend.
    call check_ok(sddmmSetMathMode(handle, SDDMM_MATH_MODE_TF32X3), 'sddmmSetMathMode')
    call check_ok(sddmmGetMathMode(handle, algorithm), 'sddmmGetMathMode')
    call check(algorithm == SDDMM_MATH_MODE_TF32X3, 'sddmmGetMathMode returns TF32X3')
    out32 = -1
    call check_ok(sddmmExecutePlan(handle, plan, k, c_loc(alpha32), c_loc(a32), m, c_loc(b32), n, &
                                   SGPU_LAYOUT_COL_MAJOR, c_null_ptr, SGPU_VALUE_TYPE_F32, c_loc(out32)), &
                  'sddmmExecutePlan (f32 in 3xTF32)')
    call check_close(real(out32, c_double), alpha32 * ref, 1e-5_c_double, 'sddmmExecutePlan result in 3xTF32')
    call check_ok(sddmmDestroyPlan(plan), 'sddmmDestroyPlan')
    call check_ok(sddmmDestroy(handle), 'sddmmDestroy')
  end subroutine test_sddmm

end program test_fortran
