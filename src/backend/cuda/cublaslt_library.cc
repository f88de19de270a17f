#include "backend/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <string>

#include "util/error.h"

namespace headroom {

namespace {

CublasLtLibrary load_cublaslt() {
  const std::string file = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw UsageError("run.backend = \"cuda\": cannot load " + file + " (" + dlerror() +
                     "); install the CUDA toolkit's cuBLAS or add its lib folder to "
                     "LD_LIBRARY_PATH");
  CublasLtLibrary lib{};
  auto find = [&](auto& entry, const char* name) {
    void* symbol = dlsym(handle, name);
    if (symbol == nullptr)
      throw UsageError(file + ": no entry point " + name + " (" + dlerror() +
                       "): a cuBLASLt older than the one headroom was built with?");
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(symbol);
  };
#define HEADROOM_CUBLASLT_FIND(name) find(lib.name, #name);
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
