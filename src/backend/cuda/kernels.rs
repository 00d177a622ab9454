//! The CUDA sources in `kernels/`, embedded in the library: each is `kernels/prelude.cuh` (and, for a
//! family of modules, the shared `kernels/NAME.cuh` headers) followed by one `kernels/NAME.cu`,
//! self-contained (no toolkit headers), compiled by NVRTC at run time for the device in use.

/// One `kernels/NAME.cu` file.
#[derive(Debug)]
pub struct KernelSource {
    pub name: &'static str,
    pub source: &'static str,
    /// Uses Hopper-only instructions (wgmma, setmaxnreg): compiled for sm_90a on Hopper.
    pub uses_sm90a: bool,
}

macro_rules! kernel_source {
    // `kernels/$name.cu` after the prelude and the shared headers `kernels/$header.cuh`, in order.
    ($ident:ident, $name:literal, $sm90a:expr $(, $header:literal)*) => {
        pub static $ident: KernelSource = KernelSource {
            name: $name,
            source: concat!(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/prelude.cuh")),
                $(
                    "\n#line 1 \"",
                    $header,
                    ".cuh\"\n",
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $header, ".cuh")),
                )*
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
kernel_source!(SPAMM, "spamm", false, "spamm_tiles");
kernel_source!(SPAMM_F32, "spamm_f32", false, "spamm_tiles");
kernel_source!(SPAMM_F16, "spamm_f16", false, "spamm_tiles", "spamm_half");
kernel_source!(SPAMM_BF16, "spamm_bf16", false, "spamm_tiles", "spamm_half");
kernel_source!(SPAMM_F64, "spamm_f64", false, "spamm_tiles");

/// Every kernel source, for the compile test and for warming the cache.
pub fn all() -> &'static [&'static KernelSource] {
    static ALL: &[&KernelSource] =
        &[&UTIL, &MSREP, &SDDMM, &SMAT, &SPAMM, &SPAMM_F32, &SPAMM_F16, &SPAMM_BF16, &SPAMM_F64];
    ALL
}

/// Architectures every kernel must compile for: Ampere and Hopper.
pub const SUPPORTED_ARCHES: &[&str] = &["sm_80", "sm_90"];
