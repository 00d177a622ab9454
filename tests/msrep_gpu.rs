//! MSREP SpMV on the CUDA backend against the CPU backend and an f64 reference: every format, f32 /
//! f64 (and f16 / bf16 values computed in f32), partition counts 1..8 and beyond nnz, empty rows,
//! long rows split over partitions, index bases, α / β (β = 0 with NaN in y), host and device x / y,
//! a non-default stream, the device lists [0], [0, 1] where a second GPU exists and every GPU where
//! there are more, the multi-device path forced on one GPU, regular rows in slices (forced at any
//! size, and a large f64 band by default), and an injected allocation failure. Each test reports
//! SKIPPED without a usable GPU.

mod common;
use common::last_error;

use common::msrep::{Input, assert_spmv_close, inputs, long_rows_csr, reference};

use common::*;
use half::{bf16, f16};
use sparsegpu::backend::cuda::{self, memory};
use sparsegpu::capi::msrep::*;
use sparsegpu::executor::TestHooks;
use sparsegpu::scalar::{ComputeScalar, Element};
use sparsegpu::sparse::CsrMatrix;
use sparsegpu::testgen::{band_csr, random_csr, rmat_csr};
use sparsegpu::{BackendKind, IndexBase, SparseFormat, Status};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr::null_mut;

const OK: c_int = Status::Success as c_int;

struct Handle(msrepHandle_t);

impl Handle {
    fn new(backend: BackendKind, devices: &[i32]) -> Self {
        let mut h = null_mut();
        assert_eq!(unsafe { msrepCreate(&mut h) }, OK, "{}", last_error());
        assert_eq!(unsafe { msrepSetBackend(h, backend as c_int) }, OK, "{}", last_error());
        assert_eq!(unsafe { msrepSetDevices(h, devices.len() as c_int, devices.as_ptr()) }, OK, "{}", last_error());
        Handle(h)
    }

    /// Changes the test hooks of the handle's executor (they apply to matrices it makes resident).
    fn set_test_hooks(&self, set: impl FnOnce(&mut TestHooks)) {
        set(unsafe { msrep_handle_object(self.0) }.unwrap().core_mut().test_hooks_mut());
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        assert_eq!(unsafe { msrepDestroy(self.0) }, OK);
    }
}

struct Matrix(msrepMatrix_t);

impl Drop for Matrix {
    fn drop(&mut self) {
        assert_eq!(unsafe { msrepDestroyMatrix(self.0) }, OK);
    }
}

/// The device lists to test: [0], [0, 1] where a second GPU exists, and every GPU where there are
/// more (a chain of several devices after the lead).
fn device_lists() -> Vec<Vec<i32>> {
    let count = cuda::availability().clone().unwrap_or(1);
    let mut lists = vec![vec![0]];
    if count >= 2 {
        lists.push(vec![0, 1]);
    }
    if count >= 3 {
        lists.push((0..count as i32).collect());
    }
    lists
}

/// 400 rows of 0..4 entries but every 50th of 1000..2200 (some next to each other), so partitions
/// hold several rows past the long-row threshold (1024 entries; chunks of 2048, so rows of one and of
/// two chunks), first / last / only rows of a partition included; `cols` columns (past 32 K, a column
/// is too far from its row for 16-bit offsets).
fn power_law_rows<T: Element>(rng: &mut Rng, cols: usize) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in 0..400 {
        if r % 50 == 7 || r == 8 || r == 399 {
            let len = 1000 + 3 * r;
            for c in 0..len {
                triplets.push((r, (c * 7 + r) % cols, T::from_f64(rng.range(-1.0, 1.0))));
            }
        } else {
            for _ in 0..rng.below(5) {
                triplets.push((r, rng.below(cols), T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    CsrMatrix::from_triplets(400, cols, triplets)
}

/// A band of 70000 rows whose columns reach the ends of the 16-bit range about the diagonal (row r
/// holds r - 32768, r - 1, r, r + 1, r + 32767 where they exist), so a regular batch stores them as
/// 16-bit offsets; with `far`, row 0 also holds column 69999, which keeps the batch on 32-bit indices.
fn wide_band<T: Element>(rng: &mut Rng, far: bool) -> CsrMatrix<T> {
    let n = 70_000i64;
    let mut triplets = Vec::new();
    for r in 0..n {
        for c in [r - 32768, r - 1, r, r + 1, r + 32767] {
            if (0..n).contains(&c) {
                triplets.push((r as usize, c as usize, T::from_f64(rng.range(-1.0, 1.0))));
            }
        }
    }
    if far {
        triplets.push((0, n as usize - 1, T::from_f64(rng.range(-1.0, 1.0))));
    }
    CsrMatrix::from_triplets(n as usize, n as usize, triplets)
}

/// `rows` rows of `lengths` entries each (and with `long_row`, row 1 of 2500: chunks) at random
/// columns 40000..=105535 of 110000, both ends in row 0: columns too far from the diagonal for
/// offsets from it, but within 64 K of each other, so that a batch holding all of them stores 16-bit
/// offsets from its lowest column (one holding only some of them too).
fn far_columns<T: Element>(
    rng: &mut Rng,
    rows: usize,
    lengths: std::ops::RangeInclusive<usize>,
    long_row: bool,
) -> CsrMatrix<T> {
    let (low, high) = (40_000, 40_000 + 65_535);
    let mut triplets = vec![(0, low, T::from_f64(rng.range(-1.0, 1.0))), (0, high, T::from_f64(rng.range(-1.0, 1.0)))];
    for r in 0..rows {
        let len =
            if long_row && r == 1 { 2500 } else { lengths.start() + rng.below(lengths.end() - lengths.start() + 1) };
        for _ in 0..len {
            triplets.push((r, low + rng.below(high - low + 1), T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(rows, 110_000, triplets)
}

/// 1500 rows of 1100 entries about the diagonal: regular rows past the long-row threshold, chunked,
/// in a batch of 16-bit offsets.
fn long_band<T: Element>(rng: &mut Rng) -> CsrMatrix<T> {
    let n = 1500usize;
    let mut triplets = Vec::new();
    for r in 0..n {
        for c in r.saturating_sub(550)..(r + 550).min(n + 400) {
            triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(n, n + 400, triplets)
}

/// A band of 3000 rows, 7 entries each, in a shuffled row order: rows whose neighbours read distant
/// columns, which the device stores by first column (and writes back to their rows of y).
fn shuffled_band<T: Element>(rng: &mut Rng) -> CsrMatrix<T> {
    let n = 3000usize;
    let mut triplets = Vec::new();
    for r in 0..n {
        let band_row = (r * 1999) % n;
        for c in band_row.saturating_sub(3)..(band_row + 4).min(n) {
            triplets.push((r, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(n, n, triplets)
}

/// 200 rows of which only 20..60, 90..100 and 150..170 have entries: empty rows before the first
/// partition, between partitions and after the last, which the pCSR partitions beside them cover.
fn empty_row_runs<T: Element>(rng: &mut Rng) -> CsrMatrix<T> {
    let mut triplets = Vec::new();
    for r in (20..60).chain(90..100).chain(150..170) {
        for c in 0..1 + r % 5 {
            triplets.push((r, (r * 7 + c * 13) % 90, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    CsrMatrix::from_triplets(200, 90, triplets)
}

/// Test matrices: empty shapes, tiny, empty rows (also in runs at both ends), long rows, a shuffled
/// band, R-MAT (power law), a dense row of 3000 (one group of lanes per row must still sum it), bands
/// whose columns fit 16-bit offsets from the diagonal or not, rows whose columns fit 16-bit offsets
/// from the lowest column only (short rows and a chunked one in stream blocks; long rows in groups of
/// lanes), a narrow band whose devices read nearly disjoint columns, and one with no nonzeros.
fn matrices<T: Element>(rng: &mut Rng) -> Vec<(CsrMatrix<T>, &'static str)> {
    let mut dense_row = Vec::new();
    for c in 0..3000 {
        dense_row.push((5, c, T::from_f64(rng.range(-1.0, 1.0))));
        if c % 7 == 0 {
            dense_row.push((c % 11, c, T::from_f64(rng.range(-1.0, 1.0))));
        }
    }
    vec![
        (CsrMatrix::from_triplets(0, 0, vec![]), "0x0"),
        (CsrMatrix::from_triplets(0, 7, vec![]), "0x7"),
        (CsrMatrix::from_triplets(6, 0, vec![]), "6x0"),
        (random_csr(rng, 1, 1, 1.0), "1x1"),
        (random_csr(rng, 3, 2, 0.7), "tiny"),
        (random_csr(rng, 97, 61, 0.08), "random with empty rows"),
        (empty_row_runs(rng), "runs of empty rows at both ends and between partitions"),
        (shuffled_band(rng), "band in shuffled row order (stored by first column)"),
        (long_rows_csr(rng, 83, 70), "long rows"),
        (rmat_csr(rng, 9, 6), "R-MAT"),
        (CsrMatrix::from_triplets(12, 3000, dense_row), "dense row"),
        (power_law_rows(rng, 2500), "short rows and a few of 1000+ (chunks of long rows)"),
        (power_law_rows(rng, 100_000), "short and long rows with columns too far for 16-bit offsets"),
        (power_law_rows(rng, 2500).transpose(), "short and long columns (pCSC: chunks of long columns)"),
        (wide_band(rng, false), "band with 16-bit column offsets"),
        (wide_band(rng, true), "band with a column too far for 16-bit offsets"),
        (long_band(rng), "long regular rows with 16-bit column offsets"),
        (far_columns(rng, 2000, 5..=12, true), "short rows and a chunked one, offsets from the lowest column"),
        (far_columns(rng, 600, 60..=80, false), "regular rows with 16-bit offsets from the lowest column"),
        (band_csr(rng, 40_000, 2), "narrow band (each device's columns sent to it directly)"),
        (random_csr(rng, 20, 30, 0.0), "no nonzeros"),
    ]
}

fn try_create<T: Element>(
    h: &Handle,
    rows: usize,
    cols: usize,
    input: &Input<T>,
    base: IndexBase,
    np: c_int,
    out: &mut msrepMatrix_t,
) -> c_int {
    let create = match input.format {
        SparseFormat::Csr => msrepCreateCsr,
        SparseFormat::Csc => msrepCreateCsc,
        SparseFormat::Coo => msrepCreateCoo,
    };
    unsafe {
        create(
            h.0,
            out,
            rows as c_int,
            cols as c_int,
            input.values.len() as i64,
            input.major.as_ptr(),
            input.minor.as_ptr(),
            input.values.as_ptr() as *const c_void,
            T::VALUE_TYPE as c_int,
            base as c_int,
            np,
        )
    }
}

fn create<T: Element>(h: &Handle, rows: usize, cols: usize, input: &Input<T>, base: IndexBase, np: c_int) -> Matrix {
    let mut m = null_mut();
    let st = try_create(h, rows, cols, input, base, np, &mut m);
    assert_eq!(st, OK, "{:?}: {}", input.format, last_error());
    Matrix(m)
}

/// Where x and y live for a CUDA call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Memory {
    Host,
    Device,
}

/// One SpMV through the C API; x / y staged in device memory when asked. Returns y.
fn spmv<T: ComputeScalar>(h: &Handle, m: &Matrix, alpha: T, x: &[T], beta: T, y0: &[T], memory: Memory) -> Vec<T> {
    let mut y = y0.to_vec();
    match memory {
        Memory::Host => {
            let st = unsafe {
                msrepSpMV(
                    h.0,
                    m.0,
                    &alpha as *const T as *const c_void,
                    x.as_ptr() as *const c_void,
                    &beta as *const T as *const c_void,
                    y.as_mut_ptr() as *mut c_void,
                )
            };
            assert_eq!(st, OK, "{}", last_error());
        }
        Memory::Device => {
            let gpu = cuda::device(0).unwrap();
            let stream = cuda::Stream::DEFAULT;
            let dx = memory::DeviceBuffer::from_host(&gpu, x, stream, "x").unwrap();
            let dy = memory::DeviceBuffer::from_host(&gpu, &y, stream, "y").unwrap();
            let px = if x.is_empty() { std::ptr::null() } else { dx.ptr() as *const c_void };
            let py = if y.is_empty() { null_mut() } else { dy.ptr() as *mut c_void };
            let st = unsafe {
                msrepSpMV(h.0, m.0, &alpha as *const T as *const c_void, px, &beta as *const T as *const c_void, py)
            };
            assert_eq!(st, OK, "{}", last_error());
            dy.copy_to_host(&mut y).unwrap();
        }
    }
    y
}

fn eps<T: Element>() -> f64 {
    match T::VALUE_TYPE {
        sparsegpu::ValueType::F32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    }
}

/// How partitions of other devices run and how batches are laid out (the test hooks of the same
/// names): [`Path::DIRECT`] is the default, where only other devices take the multi-device path.
#[derive(Clone, Copy, Debug)]
struct Path {
    stage_lead: bool,
    sides_per_device: usize,
    partials_through_copies: bool,
    slices_at_any_size: bool,
    csc_sort_on_device: bool,
}

impl Path {
    const DIRECT: Path = Path {
        stage_lead: false,
        sides_per_device: 1,
        partials_through_copies: false,
        slices_at_any_size: false,
        csc_sort_on_device: false,
    };
}

/// Every matrix × format × partition count × α/β on host and device arrays: CUDA against the f64
/// reference and against the CPU backend.
fn sweep<T: Element>(label: &str, devices: &[i32], path: Path) {
    let mut rng = Rng::fresh(label);
    let cuda_handle = |path: Path| {
        let h = Handle::new(BackendKind::Cuda, devices);
        h.set_test_hooks(|hooks| {
            hooks.msrep_stage_lead_partitions = path.stage_lead;
            hooks.msrep_sides_per_device = path.sides_per_device;
            hooks.msrep_partials_through_copies = path.partials_through_copies;
            hooks.msrep_slices_at_any_size = path.slices_at_any_size;
            hooks.msrep_csc_sort_on_device_at_any_size = path.csc_sort_on_device;
        });
        h
    };
    let gpu_handle = cuda_handle(path);
    let cpu_handle = Handle::new(BackendKind::Cpu, devices);
    // Where pCSC is sorted by rows on the device: the same matrices sorted on the host, whose
    // results must be the same to the bit (the same entries in the same order in every row).
    let host_sorted = path.csc_sort_on_device.then(|| cuda_handle(Path { csc_sort_on_device: false, ..path }));
    for (a, kind) in matrices::<T>(&mut rng) {
        let nnz = a.nnz();
        let base = if rng.below(2) == 0 { IndexBase::Zero } else { IndexBase::One };
        let x: Vec<T::Compute> = (0..a.cols).map(|_| T::Compute::from_f64(rng.range(-1.0, 1.0))).collect();
        let y_old: Vec<T::Compute> = (0..a.rows).map(|_| T::Compute::from_f64(rng.range(-1.0, 1.0))).collect();
        let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
        let y64: Vec<f64> = y_old.iter().map(|v| v.to_f64()).collect();
        for input in inputs(&a, base) {
            let mut counts: Vec<c_int> = (1..=8).collect();
            // More partitions than nonzeros (empty partitions) where that stays a few launches.
            counts.push(if nnz <= 64 { nnz as c_int + 3 } else { 13 });
            for np in counts {
                let on_gpu = create(&gpu_handle, a.rows, a.cols, &input, base, np);
                let on_cpu = create(&cpu_handle, a.rows, a.cols, &input, base, np);
                if let Some(h) = host_sorted.as_ref().filter(|_| input.format == SparseFormat::Csc) {
                    let other = create(h, a.rows, a.cols, &input, base, np);
                    let y0 = y_old.clone();
                    let (alpha, beta) = (T::Compute::from_f64(-0.75), T::Compute::from_f64(2.0));
                    let device_sorted = spmv(&gpu_handle, &on_gpu, alpha, &x, beta, &y0, Memory::Device);
                    let host_sorted = spmv(h, &other, alpha, &x, beta, &y0, Memory::Device);
                    let bits = |y: &[T::Compute]| y.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&device_sorted),
                        bits(&host_sorted),
                        "{kind} np {np} {base:?}: pCSC sorted on the device and on the host"
                    );
                }
                for (alpha, beta) in [(1.5, 0.0), (-0.75, 2.0)] {
                    let want = reference(&a, alpha, &x64, beta, &y64);
                    // β = 0: NaN in y must not propagate.
                    let y0: Vec<T::Compute> =
                        if beta == 0.0 { vec![T::Compute::from_f64(f64::NAN); a.rows] } else { y_old.clone() };
                    let (alpha, beta) = (T::Compute::from_f64(alpha), T::Compute::from_f64(beta));
                    let cpu = spmv(&cpu_handle, &on_cpu, alpha, &x, beta, &y0, Memory::Host);
                    for memory in [Memory::Host, Memory::Device] {
                        let what = format!(
                            "{kind} {}x{} nnz {nnz} {:?} np {np} {base:?} α {alpha:?} β {beta:?} {memory:?} \
                             devices {devices:?} {path:?}",
                            a.rows, a.cols, input.format
                        );
                        let got = spmv(&gpu_handle, &on_gpu, alpha, &x, beta, &y0, memory);
                        assert_spmv_close(&what, &got, &want, eps::<T::Compute>());
                        let cpu64: Vec<f64> = cpu.iter().map(|v| v.to_f64()).collect();
                        let got64: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
                        // Both within the rounding bound of the reference, so of each other.
                        let both: Vec<_> = want.iter().map(|&(_, m, l)| (0.0, 2.0 * m, l)).collect();
                        let diff: Vec<f64> = got64.iter().zip(&cpu64).map(|(g, c)| g - c).collect();
                        assert_spmv_close(&format!("{what} vs CPU"), &diff, &both, eps::<T::Compute>());
                    }
                }
                // A matrix used with a CPU handle also runs on CUDA (made resident at first use).
                let alpha = T::Compute::from_f64(0.5);
                let got = spmv(
                    &gpu_handle,
                    &on_cpu,
                    alpha,
                    &x,
                    T::Compute::ZERO,
                    &vec![T::Compute::ZERO; a.rows],
                    Memory::Host,
                );
                let want = reference(&a, 0.5, &x64, 0.0, &y64);
                assert_spmv_close(
                    &format!("{kind} {:?} np {np}: CPU-made matrix on CUDA", input.format),
                    &got,
                    &want,
                    eps::<T::Compute>(),
                );
            }
        }
    }
}

#[test]
fn every_format_and_partition_count_f64() {
    if !common::cuda_available("every_format_and_partition_count_f64") {
        return;
    }
    for devices in device_lists() {
        sweep::<f64>("msrep gpu f64", &devices, Path::DIRECT);
    }
}

#[test]
fn every_format_and_partition_count_f32() {
    if !common::cuda_available("every_format_and_partition_count_f32") {
        return;
    }
    for devices in device_lists() {
        sweep::<f32>("msrep gpu f32", &devices, Path::DIRECT);
    }
}

/// Matrices of f16 and bf16 values, multiplied and summed in f32 (x and y f32): on the lead device, and
/// with the lead's partitions staged on two sides (x copies, pCSC partial vectors, raw sums).
#[test]
fn sixteen_bit_values() {
    if !common::cuda_available("sixteen_bit_values") {
        return;
    }
    for devices in device_lists() {
        let staged = Path { stage_lead: true, sides_per_device: 2, ..Path::DIRECT };
        sweep::<f16>("msrep gpu f16", &devices, Path::DIRECT);
        sweep::<bf16>("msrep gpu bf16", &devices, Path::DIRECT);
        sweep::<f16>("msrep gpu staged f16", &devices, staged);
        sweep::<bf16>("msrep gpu staged bf16", &devices, staged);
    }
}

#[test]
fn multi_device_path_forced_on_the_lead_device() {
    if !common::cuda_available("multi_device_path_forced_on_the_lead_device") {
        return;
    }
    for devices in device_lists() {
        sweep::<f64>("msrep gpu staged f64", &devices, Path { stage_lead: true, ..Path::DIRECT });
        sweep::<f32>("msrep gpu staged f32", &devices, Path { stage_lead: true, ..Path::DIRECT });
    }
}

/// Three sides per device, the lead's first on the caller's stream: x sent to each other side by the
/// lead device (the bands, whose sides read different columns) or along a chain of two, and of more
/// with several GPUs (the random matrices and R-MAT); pCSR results written straight into y.
#[test]
fn several_sides_on_each_device() {
    if !common::cuda_available("several_sides_on_each_device") {
        return;
    }
    for devices in device_lists() {
        sweep::<f64>("msrep gpu chain f64", &devices, Path { sides_per_device: 3, ..Path::DIRECT });
        sweep::<f32>("msrep gpu chain f32", &devices, Path { sides_per_device: 3, ..Path::DIRECT });
    }
}

/// The path of devices that cannot write the lead device's memory: raw row sums copied to the lead
/// device and finished there.
#[test]
fn raw_sums_through_copies() {
    if !common::cuda_available("raw_sums_through_copies") {
        return;
    }
    for devices in device_lists() {
        let path = Path { stage_lead: true, sides_per_device: 2, partials_through_copies: true, ..Path::DIRECT };
        sweep::<f64>("msrep gpu copies f64", &devices, path);
    }
}

/// Regular rows in slices of 32 rows wherever the layout allows (by default only large batches of
/// f64 values take them): on the lead device, and on the multi-device path with two sides.
#[test]
fn regular_rows_in_slices() {
    if !common::cuda_available("regular_rows_in_slices") {
        return;
    }
    for devices in device_lists() {
        let path = Path { slices_at_any_size: true, ..Path::DIRECT };
        sweep::<f64>("msrep gpu slices f64", &devices, path);
        sweep::<f32>("msrep gpu slices f32", &devices, path);
        let staged = Path { stage_lead: true, sides_per_device: 2, ..path };
        sweep::<f64>("msrep gpu slices staged f64", &devices, staged);
    }
}

/// pCSC partitions sorted by rows on the device at every size (by default only from
/// 2^20 entries a device): against the reference, and to the bit against the host's sort.
#[test]
fn pcsc_sorted_by_rows_on_the_device() {
    if !common::cuda_available("pcsc_sorted_by_rows_on_the_device") {
        return;
    }
    for devices in device_lists() {
        let path = Path { csc_sort_on_device: true, ..Path::DIRECT };
        sweep::<f64>("msrep gpu device sort f64", &devices, path);
        sweep::<f32>("msrep gpu device sort f32", &devices, Path { sides_per_device: 2, ..path });
    }
}

/// A band of 2^20 rows and 17.8 M entries in f64, a batch large enough to go in slices by default:
/// 1 and 3 partitions (rows split between them), β = 0 with NaN in y, and β ≠ 0.
#[test]
fn large_f64_band_in_slices() {
    if !common::cuda_available("large_f64_band_in_slices") {
        return;
    }
    let mut rng = Rng::fresh("msrep gpu large band");
    let a: CsrMatrix<f64> = band_csr(&mut rng, 1 << 20, 8);
    let input = Input {
        format: SparseFormat::Csr,
        major: a.row_ptr.clone(),
        minor: a.col_ind.clone(),
        values: a.values.clone(),
    };
    let x: Vec<f64> = (0..a.cols).map(|_| rng.range(-1.0, 1.0)).collect();
    let y_old: Vec<f64> = (0..a.rows).map(|_| rng.range(-1.0, 1.0)).collect();
    let h = Handle::new(BackendKind::Cuda, &[0]);
    for np in [1, 3] {
        let m = create(&h, a.rows, a.cols, &input, IndexBase::Zero, np);
        for (alpha, beta) in [(1.5, 0.0), (-0.75, 2.0)] {
            let y0 = if beta == 0.0 { vec![f64::NAN; a.rows] } else { y_old.clone() };
            let got = spmv(&h, &m, alpha, &x, beta, &y0, Memory::Device);
            let want = reference(&a, alpha, &x, beta, &y_old);
            assert_spmv_close(&format!("large band np {np} α {alpha} β {beta}"), &got, &want, f64::EPSILON);
        }
    }
}

#[test]
fn non_default_stream_and_repeated_calls() {
    if !common::cuda_available("non_default_stream_and_repeated_calls") {
        return;
    }
    let mut rng = Rng::fresh("msrep gpu stream");
    let gpu = cuda::device(0).unwrap();
    gpu.bind().unwrap();
    let stream = gpu.ctx.new_stream().unwrap();
    let raw = cuda::Stream(stream.cu_stream());
    let a: CsrMatrix<f64> = long_rows_csr(&mut rng, 300, 200);
    let x: Vec<f64> = (0..a.cols).map(|_| rng.range(-1.0, 1.0)).collect();
    for devices in device_lists() {
        let h = Handle::new(BackendKind::Cuda, &devices);
        assert_eq!(unsafe { msrepSetStream(h.0, stream.cu_stream() as *mut c_void) }, OK);
        for input in inputs(&a, IndexBase::Zero) {
            let m = create(&h, a.rows, a.cols, &input, IndexBase::Zero, 5);
            // Device x and y on the caller's stream; y accumulates over repeated calls (β = 1).
            let dx = memory::DeviceBuffer::from_host(&gpu, &x, raw, "x").unwrap();
            let dy = memory::DeviceBuffer::from_host(&gpu, &vec![0.0f64; a.rows], raw, "y").unwrap();
            let (alpha, beta) = (1.0f64, 1.0f64);
            for _ in 0..3 {
                let st = unsafe {
                    msrepSpMV(
                        h.0,
                        m.0,
                        &alpha as *const f64 as *const c_void,
                        dx.ptr() as *const c_void,
                        &beta as *const f64 as *const c_void,
                        dy.ptr() as *mut c_void,
                    )
                };
                assert_eq!(st, OK, "{}", last_error());
            }
            let mut y = vec![0.0; a.rows];
            dy.copy_to_host(&mut y).unwrap();
            let want = reference(&a, 3.0, &x, 0.0, &[]);
            assert_spmv_close(&format!("{:?} three calls on a stream", input.format), &y, &want, f64::EPSILON);
        }
    }
}

#[test]
fn allocation_failure_leaves_outputs_untouched() {
    if !common::cuda_available("allocation_failure_leaves_outputs_untouched") {
        return;
    }
    let mut rng = Rng::fresh("msrep gpu alloc");
    let a: CsrMatrix<f64> = random_csr(&mut rng, 50, 40, 0.2);
    let x: Vec<f64> = (0..a.cols).map(|_| rng.range(-1.0, 1.0)).collect();
    let h = Handle::new(BackendKind::Cuda, &[0]);
    for input in inputs(&a, IndexBase::Zero) {
        // At creation: no matrix is handed out.
        let mut m = 0x40 as msrepMatrix_t;
        memory::inject_allocation_failures(1);
        let st = try_create(&h, a.rows, a.cols, &input, IndexBase::Zero, 3, &mut m);
        memory::inject_allocation_failures(0);
        assert_eq!(st, Status::AllocationFailed as c_int, "{}", last_error());
        assert_eq!(m as usize, 0x40, "the output handle is untouched");

        // At SpMV with host x (staged): y untouched.
        let m = create(&h, a.rows, a.cols, &input, IndexBase::Zero, 3);
        let mut y = vec![POISON; a.rows];
        let (alpha, beta) = (1.0f64, 0.0f64);
        memory::inject_allocation_failures(1);
        let st = unsafe {
            msrepSpMV(
                h.0,
                m.0,
                &alpha as *const f64 as *const c_void,
                x.as_ptr() as *const c_void,
                &beta as *const f64 as *const c_void,
                y.as_mut_ptr() as *mut c_void,
            )
        };
        memory::inject_allocation_failures(0);
        assert_eq!(st, Status::AllocationFailed as c_int, "{}", last_error());
        assert!(y.iter().all(|&v| v == POISON), "y is untouched");
        // And the matrix still works.
        let got = spmv(&h, &m, alpha, &x, beta, &vec![0.0; a.rows], Memory::Host);
        assert_spmv_close("after a failure", &got, &reference(&a, 1.0, &x, 0.0, &[]), f64::EPSILON);
    }
}

/// R-MAT of 2^SCALE rows (env MSREP_BENCH_SCALE, default 22) and about 16 nonzeros per row in f64,
/// generated in parallel, 1 and 4 partitions on device 0: time per SpMV and GB/s from bytes moved
/// (values 8 B + column 4 B per nonzero, row pointers 4 B per row, x and y read once, y written).
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn rmat_timing() {
    if !common::cuda_available("rmat_timing") {
        return;
    }
    let scale: u32 = std::env::var("MSREP_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(22);
    let n = 1usize << scale;
    let started = std::time::Instant::now();
    let a = rmat_csr::<f64>(&mut Rng::fresh("msrep_gpu rmat timing"), scale, 16);
    let nnz = a.nnz();
    let (row_ptr, col_ind, values) = (a.row_ptr, a.col_ind, a.values);
    println!("R-MAT 2^{scale}: {nnz} nonzeros, generated in {:.1} s", started.elapsed().as_secs_f64());
    let input = Input { format: SparseFormat::Csr, major: row_ptr, minor: col_ind, values };
    let gpu = cuda::device(0).unwrap();
    let x: Vec<f64> = (0..n).map(|i| (i % 13) as f64 * 0.25 - 1.0).collect();
    let dx = memory::DeviceBuffer::from_host(&gpu, &x, cuda::Stream::DEFAULT, "x").unwrap();
    let dy = memory::DeviceBuffer::zeroed(&gpu, n * 8, cuda::Stream::DEFAULT, "y").unwrap();
    let h = Handle::new(BackendKind::Cuda, &[0]);
    let bytes = nnz as f64 * 12.0 + n as f64 * (4.0 + 8.0 + 8.0 + 8.0);
    let mut first: Option<Vec<f64>> = None;
    // Before / after: the row groups alone, then with long rows cut into chunks.
    for (long_row_chunks, np) in [(false, 1), (false, 4), (true, 1), (true, 4)] {
        h.set_test_hooks(|hooks| hooks.msrep_long_row_chunks = long_row_chunks);
        let m = create(&h, n, n, &input, IndexBase::Zero, np);
        let (alpha, beta) = (1.0f64, 0.0f64);
        let call = || {
            let st = unsafe {
                msrepSpMV(
                    h.0,
                    m.0,
                    &alpha as *const f64 as *const c_void,
                    dx.ptr() as *const c_void,
                    &beta as *const f64 as *const c_void,
                    dy.ptr() as *mut c_void,
                )
            };
            assert_eq!(st, OK, "{}", last_error());
        };
        call();
        gpu.synchronize(cuda::Stream::DEFAULT).unwrap();
        let reps = 20;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            call();
        }
        gpu.synchronize(cuda::Stream::DEFAULT).unwrap();
        let per_call = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "msrepSpMV f64 CSR, {np} partition(s) on one GPU, long rows in chunks {long_row_chunks}: {:.3} ms per \
             call, {:.0} GB/s",
            per_call * 1e3,
            bytes / per_call / 1e9
        );
        let mut y = vec![0.0; n];
        dy.copy_to_host(&mut y).unwrap();
        match &first {
            None => first = Some(y),
            Some(y1) => {
                let diff: f64 = y.iter().zip(y1).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(diff < 1e-9, "runs differ by {diff} ({np} partitions, long rows in chunks {long_row_chunks})");
            }
        }
    }
}
