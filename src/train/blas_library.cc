#include "train/blas_library.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>

namespace cdt::train {
namespace {

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

}  // namespace

BlasLibrary ClassifyBlasPath(const std::string& resolved_path) {
  BlasLibrary b;
  b.path = resolved_path;
  if (resolved_path.empty()) {
    b.name = "not found";
    return b;
  }
  auto has = [&](const char* s) { return resolved_path.find(s) != std::string::npos; };
  if (has("openblas"))
    b.name = "OpenBLAS";
  else if (has("mkl"))
    b.name = "MKL";
  else if (has("blis"))
    b.name = "BLIS";
  else if (has("atlas"))
    b.name = "ATLAS";
  else if (StartsWith(Basename(resolved_path), "libblas.so") && has("/blas/")) {
    // Debian's libblas3 (netlib) installs as .../blas/libblas.so.3; the optimised ones live in
    // their own folders (openblas-openmp/, blis-openmp/, atlas/ ...).
    b.name = "reference BLAS (netlib)";
    b.reference = true;
  } else {
    b.name = "unknown BLAS";
  }
  return b;
}

BlasLibrary LoadedBlas() {
  void* sgemm = ::dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info{};
  if (!sgemm || !::dladdr(sgemm, &info) || !info.dli_fname) return ClassifyBlasPath("");
  return ClassifyBlasPath(RealPath(info.dli_fname));
}

std::string BlasWarning(const BlasLibrary& blas) {
  if (!blas.reference) return "";
  return "matrix products run on the reference BLAS (" + blas.path +
         "), about 10x slower than OpenBLAS: install libopenblas0-openmp (scripts/install-deps.sh "
         "does) "
         "or select an optimised libblas.so.3 with update-alternatives";
}

}  // namespace cdt::train
