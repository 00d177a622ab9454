//! The CPU backend: rayon-parallel implementations of every family. It is the executable
//! specification of each method's semantics and a real fallback where no GPU is usable.

pub mod msrep;
pub mod sddmm;
pub mod smat;
pub mod spamm;
