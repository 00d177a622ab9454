! libsparsegpu Fortran interface: iso_c_binding interfaces for every function of include/sparsegpu.h,
! its enumerators and integer #defines as integer(c_int) parameters, and its structs as bind(c) types.
! Kept in step with the header by tests/fortran_module.rs.
!
! Conventions
! * Every function returns an integer(c_int) status (SGPU_STATUS_SUCCESS = 0); on failure
!   sgpu_last_error_message() names the function and the offending argument.
! * Handles and matrix objects are type(c_ptr) (c_null_ptr before creation / after destruction).
! * Typed C pointers are ordinary Fortran arrays (A(*), passed by reference) or scalars passed by
!   reference (outputs, and the alpha / beta of spamm*gemm). Dense matrices are column-major as in
!   BLAS: use SGPU_LAYOUT_COL_MAJOR where a layout is asked for, with lda = size(A, 1).
! * Untyped data (void* in C: values, alpha, beta, x, y, out of the sparse families) is
!   type(c_ptr), value: pass c_loc(x) of a TARGET variable of the kind valueType names
!   (real(c_float) / real(c_double); integer(c_int16_t) holding IEEE binary16 / bfloat16 bit
!   patterns), or c_null_ptr where the C documentation allows NULL.
! * Sparse indices may be 1-based: pass SGPU_INDEX_BASE_ONE (rowPtr(1) = 1, as in Fortran codes).
! * C strings (sgpuGetStatusName, sgpuGetStatusString, sgpuGetLastErrorMessage) are type(c_ptr);
!   sgpu_status_name, sgpu_status_string, sgpu_last_error_message and sgpu_c_string turn them into
!   Fortran character strings.
module sparsegpu
  use, intrinsic :: iso_c_binding
  implicit none

  integer(c_int), parameter :: SGPU_VERSION_MAJOR = 0
  integer(c_int), parameter :: SGPU_VERSION_MINOR = 1
  integer(c_int), parameter :: SGPU_VERSION_PATCH = 0
  integer(c_int), parameter :: SGPU_VERSION = 100
  integer(c_int), parameter :: MSREP_MAX_PARTITIONS = 65536
  integer(c_int), parameter :: SPAMM_DEFAULT_BLOCK_SIZE = 32
  integer(c_int), parameter :: SPAMM_MAX_BLOCK_SIZE = 1024
  integer(c_int), parameter :: SMAT_MEMORY_BUDGET = 2

  ! Floating-point constants of the header (#define SDDMM_DEFAULT_DENSITY_THRESHOLD,
  ! SMAT_DEFAULT_JACCARD_THRESHOLD, SMAT_NEAR_FEWEST).
  real(c_double), protected :: SDDMM_DEFAULT_DENSITY_THRESHOLD = 1.0_c_double
  real(c_double), protected :: SMAT_DEFAULT_JACCARD_THRESHOLD = 0.5_c_double
  real(c_double), protected :: SMAT_NEAR_FEWEST = 1.25_c_double

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

  ! smatFormat
  integer(c_int), parameter :: SMAT_FORMAT_AUTO = 0
  integer(c_int), parameter :: SMAT_FORMAT_TILES = 1
  integer(c_int), parameter :: SMAT_FORMAT_CSR = 2

  ! spammMathMode
  integer(c_int), parameter :: SPAMM_MATH_MODE_DEFAULT = 0
  integer(c_int), parameter :: SPAMM_MATH_MODE_TF32X3 = 1

  ! smatMathMode
  integer(c_int), parameter :: SMAT_MATH_MODE_DEFAULT = 0
  integer(c_int), parameter :: SMAT_MATH_MODE_TF32X3 = 1

  ! sddmmMathMode
  integer(c_int), parameter :: SDDMM_MATH_MODE_DEFAULT = 0
  integer(c_int), parameter :: SDDMM_MATH_MODE_TF32X3 = 1
  integer(c_int), parameter :: SDDMM_MATH_MODE_TF32 = 2

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
    integer(c_int64_t) :: rowsInTiles
    integer(c_int64_t) :: rowsInCsr
    integer(c_int64_t) :: entriesInCsr
    integer(c_int64_t) :: bytes
    integer(c_int64_t) :: csrBytes
  end type smatMatrixInfo_t

  type, bind(c) :: spammStats_t
    real(c_double) :: validRatio
    integer(c_int64_t) :: performedProducts
    integer(c_int64_t) :: totalProducts
    real(c_double) :: errorBound
    real(c_double) :: tau
    integer(c_int) :: blockSize
    real(c_double) :: elapsedSeconds
  end type spammStats_t

  interface
    function sgpuGetVersion(version) bind(c, name="sgpuGetVersion")
      import
      integer(c_int) :: sgpuGetVersion
      integer(c_int), intent(out) :: version
    end function sgpuGetVersion
    function sgpuGetStatusName(status) bind(c, name="sgpuGetStatusName")
      import
      type(c_ptr) :: sgpuGetStatusName
      integer(c_int), value :: status
    end function sgpuGetStatusName
    function sgpuGetStatusString(status) bind(c, name="sgpuGetStatusString")
      import
      type(c_ptr) :: sgpuGetStatusString
      integer(c_int), value :: status
    end function sgpuGetStatusString
    function sgpuGetLastErrorMessage() bind(c, name="sgpuGetLastErrorMessage")
      import
      type(c_ptr) :: sgpuGetLastErrorMessage
    end function sgpuGetLastErrorMessage
    function msrepCreate(handle) bind(c, name="msrepCreate")
      import
      integer(c_int) :: msrepCreate
      type(c_ptr), intent(out) :: handle
    end function msrepCreate
    function msrepDestroy(handle) bind(c, name="msrepDestroy")
      import
      integer(c_int) :: msrepDestroy
      type(c_ptr), value :: handle
    end function msrepDestroy
    function msrepSetStream(handle, stream) bind(c, name="msrepSetStream")
      import
      integer(c_int) :: msrepSetStream
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function msrepSetStream
    function msrepGetStream(handle, stream) bind(c, name="msrepGetStream")
      import
      integer(c_int) :: msrepGetStream
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function msrepGetStream
    function msrepSetBackend(handle, backend) bind(c, name="msrepSetBackend")
      import
      integer(c_int) :: msrepSetBackend
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function msrepSetBackend
    function msrepGetBackend(handle, backend) bind(c, name="msrepGetBackend")
      import
      integer(c_int) :: msrepGetBackend
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function msrepGetBackend
    function msrepSetDevices(handle, count, devices) bind(c, name="msrepSetDevices")
      import
      integer(c_int) :: msrepSetDevices
      type(c_ptr), value :: handle
      integer(c_int), value :: count
      integer(c_int), intent(in) :: devices(*)
    end function msrepSetDevices
    function msrepGetDevices(handle, capacity, count, devices) bind(c, name="msrepGetDevices")
      import
      integer(c_int) :: msrepGetDevices
      type(c_ptr), value :: handle
      integer(c_int), value :: capacity
      integer(c_int), intent(out) :: count
      integer(c_int), intent(out) :: devices(*)
    end function msrepGetDevices
    function msrepCreateCsr( &
        handle, matrix, rows, cols, nnz, rowPtr, colInd, values, valueType, indexBase, numPartitions) &
        bind(c, name="msrepCreateCsr")
      import
      integer(c_int) :: msrepCreateCsr
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: indexBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCsr
    function msrepCreateCsc( &
        handle, matrix, rows, cols, nnz, colPtr, rowInd, values, valueType, indexBase, numPartitions) &
        bind(c, name="msrepCreateCsc")
      import
      integer(c_int) :: msrepCreateCsc
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: colPtr(*)
      integer(c_int), intent(in) :: rowInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: indexBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCsc
    function msrepCreateCoo( &
        handle, matrix, rows, cols, nnz, rowInd, colInd, values, valueType, indexBase, numPartitions) &
        bind(c, name="msrepCreateCoo")
      import
      integer(c_int) :: msrepCreateCoo
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: matrix
      integer(c_int), value :: rows
      integer(c_int), value :: cols
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowInd(*)
      integer(c_int), intent(in) :: colInd(*)
      type(c_ptr), value :: values
      integer(c_int), value :: valueType
      integer(c_int), value :: indexBase
      integer(c_int), value :: numPartitions
    end function msrepCreateCoo
    function msrepDestroyMatrix(matrix) bind(c, name="msrepDestroyMatrix")
      import
      integer(c_int) :: msrepDestroyMatrix
      type(c_ptr), value :: matrix
    end function msrepDestroyMatrix
    function msrepGetPartitionCount(matrix, count) bind(c, name="msrepGetPartitionCount")
      import
      integer(c_int) :: msrepGetPartitionCount
      type(c_ptr), value :: matrix
      integer(c_int), intent(out) :: count
    end function msrepGetPartitionCount
    function msrepGetPartitionInfo(matrix, partition, info) bind(c, name="msrepGetPartitionInfo")
      import
      integer(c_int) :: msrepGetPartitionInfo
      type(c_ptr), value :: matrix
      integer(c_int), value :: partition
      type(msrepPartitionInfo_t), intent(out) :: info
    end function msrepGetPartitionInfo
    function msrepSpMV(handle, matrix, alpha, x, beta, y) bind(c, name="msrepSpMV")
      import
      integer(c_int) :: msrepSpMV
      type(c_ptr), value :: handle
      type(c_ptr), value :: matrix
      type(c_ptr), value :: alpha
      type(c_ptr), value :: x
      type(c_ptr), value :: beta
      type(c_ptr), value :: y
    end function msrepSpMV
    function sddmmCreate(handle) bind(c, name="sddmmCreate")
      import
      integer(c_int) :: sddmmCreate
      type(c_ptr), intent(out) :: handle
    end function sddmmCreate
    function sddmmDestroy(handle) bind(c, name="sddmmDestroy")
      import
      integer(c_int) :: sddmmDestroy
      type(c_ptr), value :: handle
    end function sddmmDestroy
    function sddmmSetStream(handle, stream) bind(c, name="sddmmSetStream")
      import
      integer(c_int) :: sddmmSetStream
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function sddmmSetStream
    function sddmmGetStream(handle, stream) bind(c, name="sddmmGetStream")
      import
      integer(c_int) :: sddmmGetStream
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function sddmmGetStream
    function sddmmSetBackend(handle, backend) bind(c, name="sddmmSetBackend")
      import
      integer(c_int) :: sddmmSetBackend
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function sddmmSetBackend
    function sddmmGetBackend(handle, backend) bind(c, name="sddmmGetBackend")
      import
      integer(c_int) :: sddmmGetBackend
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function sddmmGetBackend
    function sddmmSetAlgorithm(handle, algorithm) bind(c, name="sddmmSetAlgorithm")
      import
      integer(c_int) :: sddmmSetAlgorithm
      type(c_ptr), value :: handle
      integer(c_int), value :: algorithm
    end function sddmmSetAlgorithm
    function sddmmSetDensityThreshold(handle, threshold) bind(c, name="sddmmSetDensityThreshold")
      import
      integer(c_int) :: sddmmSetDensityThreshold
      type(c_ptr), value :: handle
      real(c_double), value :: threshold
    end function sddmmSetDensityThreshold
    function sddmmSetMathMode(handle, mode) bind(c, name="sddmmSetMathMode")
      import
      integer(c_int) :: sddmmSetMathMode
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function sddmmSetMathMode
    function sddmmGetMathMode(handle, mode) bind(c, name="sddmmGetMathMode")
      import
      integer(c_int) :: sddmmGetMathMode
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function sddmmGetMathMode
    function sddmmGetLastAlgorithm(handle, algorithm) bind(c, name="sddmmGetLastAlgorithm")
      import
      integer(c_int) :: sddmmGetLastAlgorithm
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: algorithm
    end function sddmmGetLastAlgorithm
    function sddmmDynamic( &
        handle, m, n, k, alpha, A, lda, B, ldb, layout, nnz, rowPtr, colInd, sValues, indexBase,  &
        valueType, out) &
        bind(c, name="sddmmDynamic")
      import
      integer(c_int) :: sddmmDynamic
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
    function sddmmCreatePlan( &
        handle, plan, m, n, nnz, rowPtr, colInd, indexBase) &
        bind(c, name="sddmmCreatePlan")
      import
      integer(c_int) :: sddmmCreatePlan
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: plan
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int64_t), value :: nnz
      integer(c_int), intent(in) :: rowPtr(*)
      integer(c_int), intent(in) :: colInd(*)
      integer(c_int), value :: indexBase
    end function sddmmCreatePlan
    function sddmmExecutePlan( &
        handle, plan, k, alpha, A, lda, B, ldb, layout, sValues, valueType, out) &
        bind(c, name="sddmmExecutePlan")
      import
      integer(c_int) :: sddmmExecutePlan
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
    function sddmmSynchronize(handle) bind(c, name="sddmmSynchronize")
      import
      integer(c_int) :: sddmmSynchronize
      type(c_ptr), value :: handle
    end function sddmmSynchronize
    function sddmmDestroyPlan(plan) bind(c, name="sddmmDestroyPlan")
      import
      integer(c_int) :: sddmmDestroyPlan
      type(c_ptr), value :: plan
    end function sddmmDestroyPlan
    function smatCreate(handle) bind(c, name="smatCreate")
      import
      integer(c_int) :: smatCreate
      type(c_ptr), intent(out) :: handle
    end function smatCreate
    function smatDestroy(handle) bind(c, name="smatDestroy")
      import
      integer(c_int) :: smatDestroy
      type(c_ptr), value :: handle
    end function smatDestroy
    function smatSetStream(handle, stream) bind(c, name="smatSetStream")
      import
      integer(c_int) :: smatSetStream
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function smatSetStream
    function smatGetStream(handle, stream) bind(c, name="smatGetStream")
      import
      integer(c_int) :: smatGetStream
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function smatGetStream
    function smatSetBackend(handle, backend) bind(c, name="smatSetBackend")
      import
      integer(c_int) :: smatSetBackend
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function smatSetBackend
    function smatGetBackend(handle, backend) bind(c, name="smatGetBackend")
      import
      integer(c_int) :: smatGetBackend
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function smatGetBackend
    function smatSetReorderMode(handle, mode) bind(c, name="smatSetReorderMode")
      import
      integer(c_int) :: smatSetReorderMode
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function smatSetReorderMode
    function smatGetReorderMode(handle, mode) bind(c, name="smatGetReorderMode")
      import
      integer(c_int) :: smatGetReorderMode
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function smatGetReorderMode
    function smatSetFormat(handle, format) bind(c, name="smatSetFormat")
      import
      integer(c_int) :: smatSetFormat
      type(c_ptr), value :: handle
      integer(c_int), value :: format
    end function smatSetFormat
    function smatGetFormat(handle, format) bind(c, name="smatGetFormat")
      import
      integer(c_int) :: smatGetFormat
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: format
    end function smatGetFormat
    function smatSetMathMode(handle, mode) bind(c, name="smatSetMathMode")
      import
      integer(c_int) :: smatSetMathMode
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function smatSetMathMode
    function smatGetMathMode(handle, mode) bind(c, name="smatGetMathMode")
      import
      integer(c_int) :: smatGetMathMode
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function smatGetMathMode
    function smatSetJaccardThreshold(handle, threshold) bind(c, name="smatSetJaccardThreshold")
      import
      integer(c_int) :: smatSetJaccardThreshold
      type(c_ptr), value :: handle
      real(c_double), value :: threshold
    end function smatSetJaccardThreshold
    function smatGetJaccardThreshold(handle, threshold) bind(c, name="smatGetJaccardThreshold")
      import
      integer(c_int) :: smatGetJaccardThreshold
      type(c_ptr), value :: handle
      real(c_double), intent(out) :: threshold
    end function smatGetJaccardThreshold
    function smatCreateCsr( &
        handle, A, rows, cols, nnz, rowPtr, colInd, values, valueType, indexBase) &
        bind(c, name="smatCreateCsr")
      import
      integer(c_int) :: smatCreateCsr
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
    function smatGetMatrixInfo(A, info) bind(c, name="smatGetMatrixInfo")
      import
      integer(c_int) :: smatGetMatrixInfo
      type(c_ptr), value :: A
      type(smatMatrixInfo_t), intent(out) :: info
    end function smatGetMatrixInfo
    function smatDestroyMatrix(A) bind(c, name="smatDestroyMatrix")
      import
      integer(c_int) :: smatDestroyMatrix
      type(c_ptr), value :: A
    end function smatDestroyMatrix
    function smatSpMM(handle, A, n, alpha, B, ldb, beta, C, ldc, layout) bind(c, name="smatSpMM")
      import
      integer(c_int) :: smatSpMM
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
    function spammCreate(handle) bind(c, name="spammCreate")
      import
      integer(c_int) :: spammCreate
      type(c_ptr), intent(out) :: handle
    end function spammCreate
    function spammDestroy(handle) bind(c, name="spammDestroy")
      import
      integer(c_int) :: spammDestroy
      type(c_ptr), value :: handle
    end function spammDestroy
    function spammSetStream(handle, stream) bind(c, name="spammSetStream")
      import
      integer(c_int) :: spammSetStream
      type(c_ptr), value :: handle
      type(c_ptr), value :: stream
    end function spammSetStream
    function spammGetStream(handle, stream) bind(c, name="spammGetStream")
      import
      integer(c_int) :: spammGetStream
      type(c_ptr), value :: handle
      type(c_ptr), intent(out) :: stream
    end function spammGetStream
    function spammSetBackend(handle, backend) bind(c, name="spammSetBackend")
      import
      integer(c_int) :: spammSetBackend
      type(c_ptr), value :: handle
      integer(c_int), value :: backend
    end function spammSetBackend
    function spammGetBackend(handle, backend) bind(c, name="spammGetBackend")
      import
      integer(c_int) :: spammGetBackend
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: backend
    end function spammGetBackend
    function spammSetBlockSize(handle, blockSize) bind(c, name="spammSetBlockSize")
      import
      integer(c_int) :: spammSetBlockSize
      type(c_ptr), value :: handle
      integer(c_int), value :: blockSize
    end function spammSetBlockSize
    function spammGetBlockSize(handle, blockSize) bind(c, name="spammGetBlockSize")
      import
      integer(c_int) :: spammGetBlockSize
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: blockSize
    end function spammGetBlockSize
    function spammSetDevices(handle, count, devices) bind(c, name="spammSetDevices")
      import
      integer(c_int) :: spammSetDevices
      type(c_ptr), value :: handle
      integer(c_int), value :: count
      integer(c_int), intent(in) :: devices(*)
    end function spammSetDevices
    function spammGetDevices(handle, capacity, count, devices) bind(c, name="spammGetDevices")
      import
      integer(c_int) :: spammGetDevices
      type(c_ptr), value :: handle
      integer(c_int), value :: capacity
      integer(c_int), intent(out) :: count
      integer(c_int), intent(out) :: devices(*)
    end function spammGetDevices
    function spammSetMathMode(handle, mode) bind(c, name="spammSetMathMode")
      import
      integer(c_int) :: spammSetMathMode
      type(c_ptr), value :: handle
      integer(c_int), value :: mode
    end function spammSetMathMode
    function spammGetMathMode(handle, mode) bind(c, name="spammGetMathMode")
      import
      integer(c_int) :: spammGetMathMode
      type(c_ptr), value :: handle
      integer(c_int), intent(out) :: mode
    end function spammGetMathMode
    function spammSgemm( &
        handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) &
        bind(c, name="spammSgemm")
      import
      integer(c_int) :: spammSgemm
      type(c_ptr), value :: handle
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      real(c_float), intent(in) :: alpha
      real(c_float), intent(in) :: A(*)
      integer(c_int), value :: lda
      real(c_float), intent(in) :: B(*)
      integer(c_int), value :: ldb
      real(c_float), intent(in) :: beta
      real(c_float), intent(inout) :: C(*)
      integer(c_int), value :: ldc
      real(c_double), value :: tau
    end function spammSgemm
    function spammDgemm( &
        handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) &
        bind(c, name="spammDgemm")
      import
      integer(c_int) :: spammDgemm
      type(c_ptr), value :: handle
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      real(c_double), intent(in) :: alpha
      real(c_double), intent(in) :: A(*)
      integer(c_int), value :: lda
      real(c_double), intent(in) :: B(*)
      integer(c_int), value :: ldb
      real(c_double), intent(in) :: beta
      real(c_double), intent(inout) :: C(*)
      integer(c_int), value :: ldc
      real(c_double), value :: tau
    end function spammDgemm
    function spammHgemm( &
        handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) &
        bind(c, name="spammHgemm")
      import
      integer(c_int) :: spammHgemm
      type(c_ptr), value :: handle
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      real(c_float), intent(in) :: alpha
      integer(c_int16_t), intent(in) :: A(*)
      integer(c_int), value :: lda
      integer(c_int16_t), intent(in) :: B(*)
      integer(c_int), value :: ldb
      real(c_float), intent(in) :: beta
      integer(c_int16_t), intent(inout) :: C(*)
      integer(c_int), value :: ldc
      real(c_double), value :: tau
    end function spammHgemm
    function spammGemmEx( &
        handle, valueType, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tau) &
        bind(c, name="spammGemmEx")
      import
      integer(c_int) :: spammGemmEx
      type(c_ptr), value :: handle
      integer(c_int), value :: valueType
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      type(c_ptr), value :: beta
      type(c_ptr), value :: C
      integer(c_int), value :: ldc
      real(c_double), value :: tau
    end function spammGemmEx
    function spammGetStats(handle, stats) bind(c, name="spammGetStats")
      import
      integer(c_int) :: spammGetStats
      type(c_ptr), value :: handle
      type(spammStats_t), intent(out) :: stats
    end function spammGetStats
    function spammTuneTau( &
        handle, valueType, transa, transb, m, n, k, A, lda, B, ldb, targetValidRatio, tolerance,  &
        maxIterations, tau, achievedValidRatio) &
        bind(c, name="spammTuneTau")
      import
      integer(c_int) :: spammTuneTau
      type(c_ptr), value :: handle
      integer(c_int), value :: valueType
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      real(c_double), value :: targetValidRatio
      real(c_double), value :: tolerance
      integer(c_int), value :: maxIterations
      real(c_double), intent(out) :: tau
      real(c_double), intent(out) :: achievedValidRatio
    end function spammTuneTau
    function spammTuneTauForErrorBound( &
        handle, valueType, transa, transb, m, n, k, alpha, A, lda, B, ldb, errorBound, maxIterations,  &
        tau, achievedErrorBound, achievedValidRatio) &
        bind(c, name="spammTuneTauForErrorBound")
      import
      integer(c_int) :: spammTuneTauForErrorBound
      type(c_ptr), value :: handle
      integer(c_int), value :: valueType
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      real(c_double), value :: errorBound
      integer(c_int), value :: maxIterations
      real(c_double), intent(out) :: tau
      real(c_double), intent(out) :: achievedErrorBound
      real(c_double), intent(out) :: achievedValidRatio
    end function spammTuneTauForErrorBound
    function spammGemmAtValidRatio( &
        handle, valueType, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,  &
        targetValidRatio, tolerance, maxIterations, tau) &
        bind(c, name="spammGemmAtValidRatio")
      import
      integer(c_int) :: spammGemmAtValidRatio
      type(c_ptr), value :: handle
      integer(c_int), value :: valueType
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      type(c_ptr), value :: beta
      type(c_ptr), value :: C
      integer(c_int), value :: ldc
      real(c_double), value :: targetValidRatio
      real(c_double), value :: tolerance
      integer(c_int), value :: maxIterations
      real(c_double), intent(out) :: tau
    end function spammGemmAtValidRatio
    function spammGemmWithinErrorBound( &
        handle, valueType, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,  &
        errorBound, maxIterations, tau) &
        bind(c, name="spammGemmWithinErrorBound")
      import
      integer(c_int) :: spammGemmWithinErrorBound
      type(c_ptr), value :: handle
      integer(c_int), value :: valueType
      integer(c_int), value :: transa
      integer(c_int), value :: transb
      integer(c_int), value :: m
      integer(c_int), value :: n
      integer(c_int), value :: k
      type(c_ptr), value :: alpha
      type(c_ptr), value :: A
      integer(c_int), value :: lda
      type(c_ptr), value :: B
      integer(c_int), value :: ldb
      type(c_ptr), value :: beta
      type(c_ptr), value :: C
      integer(c_int), value :: ldc
      real(c_double), value :: errorBound
      integer(c_int), value :: maxIterations
      real(c_double), intent(out) :: tau
    end function spammGemmWithinErrorBound
  end interface

contains

  ! A NUL-terminated C string (a static or library-owned const char*) as a Fortran string;
  ! '' for a null pointer.
  function sgpu_c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    call c_f_pointer(p, chars, [huge(0)])
    n = 0
    do while (chars(n + 1) /= c_null_char)
      n = n + 1
    end do
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function sgpu_c_string

  ! The enumerator name of a status, e.g. 'SGPU_STATUS_INVALID_SIZE'.
  function sgpu_status_name(status) result(s)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: s
    s = sgpu_c_string(sgpuGetStatusName(status))
  end function sgpu_status_name

  ! A one-line description of a status.
  function sgpu_status_string(status) result(s)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: s
    s = sgpu_c_string(sgpuGetStatusString(status))
  end function sgpu_status_string

  ! The message of the last failed call on this thread ('' when none has failed).
  function sgpu_last_error_message() result(s)
    character(len=:), allocatable :: s
    s = sgpu_c_string(sgpuGetLastErrorMessage())
  end function sgpu_last_error_message
end module sparsegpu
