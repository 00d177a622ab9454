! libsparsegpu Fortran interface: iso_c_binding interfaces for every function of include/sparsegpu.h
! and its enumerators as integer(c_int) parameters. Kept in step with the header by tests/fortran_module.rs.
!
! Conventions: every function returns an integer(c_int) status (SGPU_STATUS_SUCCESS = 0). Handles and
! matrix objects are type(c_ptr). Dense matrices are ordinary Fortran arrays (column-major, as BLAS);
! 16-bit floating-point data is integer(c_int16_t) holding IEEE binary16 / bfloat16 bit patterns.
! Untyped data (const void* in C) is passed as c_loc(array) of a target array. Sparse indices may be
! 1-based: pass SGPU_INDEX_BASE_ONE.
module sparsegpu
  use, intrinsic :: iso_c_binding
  implicit none

  integer(c_int), parameter :: SGPU_VERSION_MAJOR = 0
  integer(c_int), parameter :: SGPU_VERSION_MINOR = 1
  integer(c_int), parameter :: SGPU_VERSION_PATCH = 0
  integer(c_int), parameter :: SGPU_VERSION = 100
  integer(c_int), parameter :: MSREP_MAX_PARTITIONS = 65536
  integer(c_int), parameter :: TILE_ROWS = 64
  integer(c_int), parameter :: TILE_COLS = 64
  integer(c_int), parameter :: TILE_K = 64

  ! sgpuStatus
  integer(c_int), parameter :: SGPU_STATUS_SUCCESS = 0
  integer(c_int), parameter :: SGPU_STATUS_INVALID_HANDLE = 1
  integer(c_int), parameter :: SGPU_STATUS_INVALID_POINTER = 2
  integer(c_int), parameter :: SGPU_STATUS_INVALID_SIZE = 3
  integer(c_int), parameter :: SGPU_STATUS_INVALID_VALUE = 4
  integer(c_int), parameter :: SGPU_STATUS_INVALID_SPARSE_MATRIX = 5
  integer(c_int), parameter :: SGPU_STATUS_ALLOCATION_FAILED = 6
  integer(c_int), parameter :: SGPU_STATUS_NOT_SUPPORTED = 7
  integer(c_int), parameter :: SGPU_STATUS_BACKEND_UNAVAILABLE = 8
  integer(c_int), parameter :: SGPU_STATUS_EXECUTION_FAILED = 9
  integer(c_int), parameter :: SGPU_STATUS_INTERNAL_ERROR = 10

  ! sgpuOperation
  integer(c_int), parameter :: SGPU_OPERATION_N = 0
  integer(c_int), parameter :: SGPU_OPERATION_T = 1

  ! sgpuValueType
  integer(c_int), parameter :: SGPU_VALUE_TYPE_F16 = 0
  integer(c_int), parameter :: SGPU_VALUE_TYPE_BF16 = 1
  integer(c_int), parameter :: SGPU_VALUE_TYPE_F32 = 2
  integer(c_int), parameter :: SGPU_VALUE_TYPE_F64 = 3

  ! sgpuIndexBase
  integer(c_int), parameter :: SGPU_INDEX_BASE_ZERO = 0
  integer(c_int), parameter :: SGPU_INDEX_BASE_ONE = 1

  ! sgpuLayout
  integer(c_int), parameter :: SGPU_LAYOUT_ROW_MAJOR = 0
  integer(c_int), parameter :: SGPU_LAYOUT_COL_MAJOR = 1

  ! sgpuSparseFormat
  integer(c_int), parameter :: SGPU_SPARSE_FORMAT_CSR = 0
  integer(c_int), parameter :: SGPU_SPARSE_FORMAT_CSC = 1
  integer(c_int), parameter :: SGPU_SPARSE_FORMAT_COO = 2

  ! sgpuBackend
  integer(c_int), parameter :: SGPU_BACKEND_AUTO = 0
  integer(c_int), parameter :: SGPU_BACKEND_CUDA = 1
  integer(c_int), parameter :: SGPU_BACKEND_CPU = 2

  ! sddmmAlgorithm
  integer(c_int), parameter :: SDDMM_ALGORITHM_AUTO = 0
  integer(c_int), parameter :: SDDMM_ALGORITHM_TILED = 1
  integer(c_int), parameter :: SDDMM_ALGORITHM_COO = 2

  ! smatReorderMode
  integer(c_int), parameter :: SMAT_REORDER_MODE_AUTO = 0
  integer(c_int), parameter :: SMAT_REORDER_MODE_ALWAYS = 1
  integer(c_int), parameter :: SMAT_REORDER_MODE_NEVER = 2

  type, bind(c) :: msrepPartitionInfo_t
    integer(c_int) :: format
    integer(c_int64_t) :: startIdx
    integer(c_int64_t) :: endIdx
    integer(c_int64_t) :: nnz
    integer(c_int64_t) :: startMajor
    integer(c_int64_t) :: endMajor
    integer(c_int) :: startFlag
    integer(c_int) :: device
  end type msrepPartitionInfo_t

  type, bind(c) :: smatMatrixInfo_t
    integer(c_int) :: rows
    integer(c_int) :: cols
    integer(c_int64_t) :: nnz
    integer(c_int) :: tileRows
    integer(c_int) :: tileCols
    integer(c_int64_t) :: blockCount
    integer(c_int64_t) :: blockCountBeforeReordering
    real(c_double) :: fillRatio
    integer(c_int) :: reordered
    integer(c_int) :: valueType
  end type smatMatrixInfo_t

  interface
    integer(c_int) function sgpuGetVersion(version) bind(c, name="sgpuGetVersion")
      import
      integer(c_int), intent(out) :: version
    end function sgpuGetVersion
    type(c_ptr) function sgpuGetStatusName(status) bind(c, name="sgpuGetStatusName")
      import
      integer(c_int), value :: status
    end function sgpuGetStatusName
    type(c_ptr) function sgpuGetStatusString(status) bind(c, name="sgpuGetStatusString")
      import
      integer(c_int), value :: status
    end function sgpuGetStatusString
    type(c_ptr) function sgpuGetLastErrorMessage() bind(c, name="sgpuGetLastErrorMessage")
      import
    end function sgpuGetLastErrorMessage
    integer(c_int) function msrepCreate(handle) bind(c, name="msrepCreate")
      import
      type(c_ptr), intent(out) :: handle
    end function msrepCreate
    integer(c_int) function msrepDestroy(handle) bind(c, name="msrepDestroy")
      import
      type(c_ptr), value :: handle
    end function msrepDestroy
    integer(c_int) function msrepSetStream(handle, stream) bind(c, name="msrepSetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function msrepSetStream
    integer(c_int) function msrepGetStream(handle, stream) bind(c, name="msrepGetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function msrepGetStream
    integer(c_int) function msrepSetBackend(handle, backend) bind(c, name="msrepSetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function msrepSetBackend
    integer(c_int) function msrepGetBackend(handle, backend) bind(c, name="msrepGetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function msrepGetBackend
    integer(c_int) function msrepSetDevices(handle, count, devices) bind(c, name="msrepSetDevices")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: count
      integer(c_int), intent(in) :: devices(*)
    end function msrepSetDevices
    integer(c_int) function msrepGetDeviceCount(handle, count) bind(c, name="msrepGetDeviceCount")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: count
    end function msrepGetDeviceCount
    integer(c_int) function msrepGetDevices(handle, capacity, devices) bind(c, name="msrepGetDevices")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: capacity
      integer(c_int), intent(inout) :: devices(*)
    end function msrepGetDevices
    integer(c_int) function msrepCreateCsr( &
        handle, matrix, rows, cols, nnz, rowPtr, colInd, values, valueType, idxBase, numPartitions) &
        bind(c, name="msrepCreateCsr")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: idxBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCsr
    integer(c_int) function msrepCreateCsc( &
        handle, matrix, rows, cols, nnz, colPtr, rowInd, values, valueType, idxBase, numPartitions) &
        bind(c, name="msrepCreateCsc")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: colPtr(*)
      integer(c_int), intent(in) :: rowInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: idxBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCsc
    integer(c_int) function msrepCreateCoo( &
        handle, matrix, rows, cols, nnz, rowInd, colInd, values, valueType, idxBase, numPartitions) &
        bind(c, name="msrepCreateCoo")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowInd(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: idxBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCoo
    integer(c_int) function msrepDestroyMatrix(matrix) bind(c, name="msrepDestroyMatrix")
      import
      type(c_ptr), value :: matrix
    end function msrepDestroyMatrix
    integer(c_int) function msrepGetPartitionCount(matrix, count) bind(c, name="msrepGetPartitionCount")
      import
      type(c_ptr), value :: matrix
      integer(c_int), intent(out) :: count
    end function msrepGetPartitionCount
    integer(c_int) function msrepGetPartitionInfo(matrix, partition, info) bind(c, name="msrepGetPartitionInfo")
      import
      type(c_ptr), value :: matrix
      integer(c_int), value :: partition
      type(msrepPartitionInfo_t), intent(out) :: info
    end function msrepGetPartitionInfo
    integer(c_int) function msrepSpMV(handle, matrix, alpha, x, beta, y) bind(c, name="msrepSpMV")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: matrix
      type(c_ptr), value :: alpha
      type(c_ptr), value :: x
      type(c_ptr), value :: beta
      type(c_ptr), value :: y
    end function msrepSpMV
    integer(c_int) function sddmmCreate(handle) bind(c, name="sddmmCreate")
      import
      type(c_ptr), intent(out) :: handle
    end function sddmmCreate
    integer(c_int) function sddmmDestroy(handle) bind(c, name="sddmmDestroy")
      import
      type(c_ptr), value :: handle
    end function sddmmDestroy
    integer(c_int) function sddmmSetStream(handle, stream) bind(c, name="sddmmSetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function sddmmSetStream
    integer(c_int) function sddmmGetStream(handle, stream) bind(c, name="sddmmGetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function sddmmGetStream
    integer(c_int) function sddmmSetBackend(handle, backend) bind(c, name="sddmmSetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function sddmmSetBackend
    integer(c_int) function sddmmGetBackend(handle, backend) bind(c, name="sddmmGetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function sddmmGetBackend
    integer(c_int) function sddmmSetAlgorithm(handle, algorithm) bind(c, name="sddmmSetAlgorithm")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: algorithm
    end function sddmmSetAlgorithm
    integer(c_int) function sddmmSetDensityThreshold(handle, threshold) bind(c, name="sddmmSetDensityThreshold")
      import
      type(c_ptr), value :: handle
      real(c_double), value :: threshold
    end function sddmmSetDensityThreshold
    integer(c_int) function sddmmGetLastAlgorithm(handle, algorithm) bind(c, name="sddmmGetLastAlgorithm")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: algorithm
    end function sddmmGetLastAlgorithm
    integer(c_int) function sddmmDynamic( &
        handle, m, n, k, alpha, A, lda, B, ldb, layout, nnz, rowPtr, colInd, sValues, indexBase,  &
        valueType, out) &
        bind(c, name="sddmmDynamic")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      integer(c_int), value :: layout
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: sValues
      integer(c_int), value :: indexBase
      integer(c_int), value :: valueType
      type(c_ptr), value :: out
    end function sddmmDynamic
    integer(c_int) function sddmmCreatePlan( &
        handle, plan, m, n, nnz, rowPtr, colInd, indexBase) &
        bind(c, name="sddmmCreatePlan")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: plan
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      integer(c_int), value :: indexBase
    end function sddmmCreatePlan
    integer(c_int) function sddmmExecutePlan( &
        handle, plan, k, alpha, A, lda, B, ldb, layout, sValues, valueType, out) &
        bind(c, name="sddmmExecutePlan")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: plan
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      integer(c_int), value :: layout
      type(c_ptr), value :: sValues
      integer(c_int), value :: valueType
      type(c_ptr), value :: out
    end function sddmmExecutePlan
    integer(c_int) function sddmmDestroyPlan(plan) bind(c, name="sddmmDestroyPlan")
      import
      type(c_ptr), value :: plan
    end function sddmmDestroyPlan
    integer(c_int) function smatCreate(handle) bind(c, name="smatCreate")
      import
      type(c_ptr), intent(out) :: handle
    end function smatCreate
    integer(c_int) function smatDestroy(handle) bind(c, name="smatDestroy")
      import
      type(c_ptr), value :: handle
    end function smatDestroy
    integer(c_int) function smatSetStream(handle, stream) bind(c, name="smatSetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function smatSetStream
    integer(c_int) function smatGetStream(handle, stream) bind(c, name="smatGetStream")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function smatGetStream
    integer(c_int) function smatSetBackend(handle, backend) bind(c, name="smatSetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function smatSetBackend
    integer(c_int) function smatGetBackend(handle, backend) bind(c, name="smatGetBackend")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function smatGetBackend
    integer(c_int) function smatSetReorderMode(handle, mode) bind(c, name="smatSetReorderMode")
      import
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function smatSetReorderMode
    integer(c_int) function smatGetReorderMode(handle, mode) bind(c, name="smatGetReorderMode")
      import
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function smatGetReorderMode
    integer(c_int) function smatSetJaccardThreshold(handle, threshold) bind(c, name="smatSetJaccardThreshold")
      import
      type(c_ptr), value :: handle
      real(c_double), value :: threshold
    end function smatSetJaccardThreshold
    integer(c_int) function smatGetJaccardThreshold(handle, threshold) bind(c, name="smatGetJaccardThreshold")
      import
      type(c_ptr), value :: handle
      real(c_double), intent(out) :: threshold
    end function smatGetJaccardThreshold
    integer(c_int) function smatCreateCsr( &
        handle, A, rows, cols, nnz, rowPtr, colInd, values, valueType, indexBase) &
        bind(c, name="smatCreateCsr")
      import
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: A
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: indexBase
    end function smatCreateCsr
    integer(c_int) function smatGetMatrixInfo(A, info) bind(c, name="smatGetMatrixInfo")
      import
      type(c_ptr), value :: A
      type(smatMatrixInfo_t), intent(out) :: info
    end function smatGetMatrixInfo
    integer(c_int) function smatDestroyMatrix(A) bind(c, name="smatDestroyMatrix")
      import
      type(c_ptr), value :: A
    end function smatDestroyMatrix
    integer(c_int) function smatSpMM(handle, A, n, alpha, B, ldb, beta, C, ldc, layout) bind(c, name="smatSpMM")
      import
      type(c_ptr), value :: handle
      type(c_ptr), value :: A
      integer(c_int), value :: n
      type(c_ptr), value :: alpha
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      type(c_ptr), value :: beta
      type(c_ptr), value :: C
      integer(c_int), value :: ldc
      integer(c_int), value :: layout
    end function smatSpMM
  end interface
end module sparsegpu
