//! The CUDA sources in `kernels/`, embedded in the library: each is `kernels/prelude.cuh` followed by
//! one `kernels/NAME.cu`, self-contained (no toolkit headers), compiled by NVRTC at run time for the
//! device in use.

/// One `kernels/NAME.cu` file.
#[derive(Debug)]
pub struct KernelSource {
    pub name: &'static str,
    pub source: &'static str,
    /// Uses Hopper-only instructions (wgmma, setmaxnreg): compiled for sm_90a on Hopper.
    pub uses_sm90a: bool,
}

macro_rules! kernel_source {
    ($ident:ident, $name:literal, $sm90a:expr) => {
        pub static $ident: KernelSource = KernelSource {
            name: $name,
            source: concat!(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/prelude.cuh")),
                "\n#line 1 \"",
                $name,
                ".cu\"\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $name, ".cu"))
            ),
            uses_sm90a: $sm90a,
        };
    };
}

kernel_source!(UTIL, "util", false);
kernel_source!(MSREP, "msrep", false);
kernel_source!(SDDMM, "sddmm", false);
kernel_source!(SMAT, "smat", false);
kernel_source!(SPAMM, "spamm", false);

/// Every kernel source, for the compile test and for warming the cache.
pub fn all() -> &'static [&'static KernelSource] {
    static ALL: &[&KernelSource] = &[&UTIL, &MSREP, &SDDMM, &SMAT, &SPAMM];
    ALL
}

/// Architectures every kernel must compile for: Ampere and Hopper.
pub const SUPPORTED_ARCHES: &[&str] = &["sm_80", "sm_90"];
