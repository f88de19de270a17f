#include "backend/cuda/cublaslt_library.h"

#include <string>

#include "util/error.h"
#include "util/shared_library.h"

namespace headroom {

namespace {

CublasLtLibrary load_cublaslt() {
  const SharedLibrary library("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR),
                              "run.backend = \"cuda\"",
                              "install the CUDA toolkit's cuBLAS or add its lib folder to "
                              "LD_LIBRARY_PATH");
  constexpr std::string_view too_old = "a cuBLASLt older than the one headroom was built with?";
  CublasLtLibrary lib{};
#define HEADROOM_CUBLASLT_FIND(name) library.find(lib.name, #name, too_old);
  HEADROOM_CUBLASLT_ENTRY_POINTS(HEADROOM_CUBLASLT_FIND)
#undef HEADROOM_CUBLASLT_FIND
  return lib;
}

}  // namespace

const CublasLtLibrary& cublaslt_library() {
  // Loaded once, immutable afterwards (C++ guarantees one initialization).
  static const CublasLtLibrary library = load_cublaslt();
  return library;
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "an unknown cublasStatus_t";
}

}  // namespace headroom
