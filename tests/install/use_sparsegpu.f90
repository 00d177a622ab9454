! A Fortran program built against an installed libsparsegpu, with the module compiled from the
! installed sparsegpu.f90: the library's version and a SpAMM product on the CPU backend, checked
! against the hand-computed result. Ends with "N passed, M failed" and stops with an error when M > 0.
program use_sparsegpu
  use, intrinsic :: iso_c_binding
  use sparsegpu
  implicit none
  integer :: npass = 0, nfail = 0
  integer(c_int) :: version
  type(c_ptr) :: handle
  ! A = [1 2; 3 4], B = [5 6; 7 8] as Fortran (column-major) arrays: AB = [19 22; 43 50].
  real(c_double) :: a(2, 2) = reshape([1, 3, 2, 4], [2, 2]), b(2, 2) = reshape([5, 7, 6, 8], [2, 2])
  real(c_double) :: c(2, 2) = 0, want(2, 2) = reshape([19, 43, 22, 50], [2, 2])

  call check_ok(sgpuGetVersion(version), 'sgpuGetVersion')
  call check(version == SGPU_VERSION, "the loaded library's version is the module's")
  call check_ok(spammCreate(handle), 'spammCreate')
  call check_ok(spammSetBackend(handle, SGPU_BACKEND_CPU), 'spammSetBackend')
  call check_ok(spammDgemm(handle, SGPU_OPERATION_N, SGPU_OPERATION_N, 2, 2, 2, 1.0_c_double, a, 2, b, 2, &
                           0.0_c_double, c, 2, 0.0_c_double), 'spammDgemm')
  call check(all(c == want), 'spammDgemm gives [19 22; 43 50]')
  call check_ok(spammDestroy(handle), 'spammDestroy')

  print '(i0, " passed, ", i0, " failed")', npass, nfail
  if (nfail > 0) error stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (ok) then
      npass = npass + 1
      print '("PASS ", a)', what
    else
      nfail = nfail + 1
      print '("FAIL ", a)', what
    end if
  end subroutine check

  subroutine check_ok(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (status == SGPU_STATUS_SUCCESS) then
      call check(.true., what)
    else
      call check(.false., what // ' returned ' // sgpu_status_name(status) // ': ' // sgpu_last_error_message())
    end if
  end subroutine check_ok
end program use_sparsegpu
