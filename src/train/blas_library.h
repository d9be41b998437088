// Which BLAS implementation this process's matrix products run on.
//
// Debian builds libtorch against the generic libblas.so.3 ("BLAS_INFO=generic" in
// torch::show_config()), and the alternatives system decides at install time which library
// provides it. Without an optimised one installed that is netlib's reference BLAS, which runs
// libtorch's matrix products about ten times slower than OpenBLAS (measured here: a 128x3136 by
// 3136x128 product, one thread, 42 ms against 4 ms; the cnn trains 1.9x faster) — and nothing
// says so. The trainer reports what it found and warns on the reference implementation.
//
// Framework-free: it asks the dynamic linker which library provides sgemm_ (the symbol libtorch's
// float matrix products call), so it needs no torch include. Asking for the symbol, not listing
// the mapped libraries, matters: with the reference libblas.so.3 selected and OpenBLAS's
// liblapack.so.3, both are mapped and sgemm_ binds to the first.
#pragma once

#include <string>

namespace cdt::train {

struct BlasLibrary {
  std::string path;        // the library that defines sgemm_, symlinks resolved; empty if none
  std::string name;        // "OpenBLAS", "MKL", "BLIS", "ATLAS", "reference BLAS (netlib)",
                           // "unknown BLAS", or "not found" (no sgemm_ exported, e.g. a
                           // statically linked MKL)
  bool reference = false;  // netlib's unoptimised implementation
};

// Names the implementation behind a BLAS library path (already resolved). Pure; tested.
BlasLibrary ClassifyBlasPath(const std::string& resolved_path);

// This process's: where sgemm_ resolves.
BlasLibrary LoadedBlas();

// One line for a user whose matrix products run on the reference BLAS: what it costs and what to
// install. Empty when the library is not the reference one.
std::string BlasWarning(const BlasLibrary& blas);

}  // namespace cdt::train
