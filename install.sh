#!/bin/sh
# Installs libsparsegpu under a prefix, laid out as a vendor library:
#   PREFIX/lib/libsparsegpu.so.VERSION        the library (soname libsparsegpu.so.MAJOR)
#   PREFIX/lib/libsparsegpu.so.MAJOR          -> libsparsegpu.so.VERSION, what programs load
#   PREFIX/lib/libsparsegpu.so                -> libsparsegpu.so.MAJOR, what -lsparsegpu finds
#   PREFIX/include/sparsegpu.h                the C / C++ header
#   PREFIX/include/sparsegpu.f90              the Fortran module's source
#   PREFIX/lib/pkgconfig/sparsegpu.pc         for pkg-config
#   PREFIX/lib/cmake/sparsegpu/               for find_package(sparsegpu) in CMake
usage='usage: ./install.sh [--prefix DIR] [--destdir DIR] [--library FILE]
  --prefix DIR    where the library is used from (default /usr/local)
  --destdir DIR   a staging root to write under instead of / (for packaging;
                  default $DESTDIR); the installed files still name PREFIX
  --library FILE  install this built libsparsegpu.so instead of building one
                  with `cargo build --release --lib`'
set -eu

prefix=/usr/local
destdir=${DESTDIR:-}
library=
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --destdir) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; destdir=$2; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --library) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; library=$2; shift 2 ;;
    --library=*) library=${1#*=}; shift ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done

# The prefix is written into sparsegpu.pc, so it must not depend on the directory we run in.
case $prefix in
  /*) ;;
  *) prefix=$(pwd)/$prefix ;;
esac
while [ "$prefix" != / ] && [ "${prefix%/}" != "$prefix" ]; do prefix=${prefix%/}; done
[ "$prefix" = / ] && prefix=
case $library in
  '' | /*) ;;
  *) library=$(pwd)/$library ;;
esac

src=$(cd "$(dirname "$0")" && pwd)
version=$(awk -F'"' '/^\[/ { section = $0 } section == "[package]" && /^version *=/ { print $2; exit }' "$src/Cargo.toml")
case $version in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "install.sh: no package version found in $src/Cargo.toml" >&2; exit 1 ;;
esac
major=${version%%.*}

if [ -z "$library" ]; then
  (cd "$src" && cargo build --release --lib)
  target_dir=${CARGO_TARGET_DIR:-target}
  case $target_dir in
    /*) ;;
    *) target_dir=$src/$target_dir ;;
  esac
  library=$target_dir/release/libsparsegpu.so
fi
[ -f "$library" ] || { echo "install.sh: $library does not exist" >&2; exit 1; }

# CMake refuses a library whose pointer size differs from the build's: read it from the ELF header
# (byte 4, EI_CLASS: 1 for 32-bit, 2 for 64-bit).
case $(od -An -tu1 -j4 -N1 "$library" | tr -d ' ') in
  1) pointer_bytes=4 ;;
  2) pointer_bytes=8 ;;
  *) echo "install.sh: $library is not an ELF shared library" >&2; exit 1 ;;
esac

# Replaces each @NAME@ of a template; the prefix is escaped for sed.
escaped_prefix=$(printf '%s\n' "$prefix" | sed 's/[\\&|]/\\&/g')
fill() {
  sed -e "s|@PREFIX@|$escaped_prefix|g" -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" \
    -e "s|@POINTER_BYTES@|$pointer_bytes|g" "$1" >"$2"
  chmod 644 "$2"
}

libdir=$destdir$prefix/lib
includedir=$destdir$prefix/include
cmakedir=$libdir/cmake/sparsegpu
install -d "$libdir" "$includedir" "$libdir/pkgconfig" "$cmakedir"
# install replaces the file rather than writing into it, so programs running the old library keep it.
install -m 755 "$library" "$libdir/libsparsegpu.so.$version"
ln -sf "libsparsegpu.so.$version" "$libdir/libsparsegpu.so.$major"
ln -sf "libsparsegpu.so.$major" "$libdir/libsparsegpu.so"
install -m 644 "$src/include/sparsegpu.h" "$src/include/sparsegpu.f90" "$includedir/"
fill "$src/packaging/sparsegpu.pc.in" "$libdir/pkgconfig/sparsegpu.pc"
fill "$src/packaging/sparsegpuConfig.cmake.in" "$cmakedir/sparsegpuConfig.cmake"
fill "$src/packaging/sparsegpuConfigVersion.cmake.in" "$cmakedir/sparsegpuConfigVersion.cmake"
echo "installed libsparsegpu $version under $destdir${prefix:-/}"
