// cuBLASLt, loaded when the first CudaContext is made rather than linked:
// libcublasLt is 540 MB whose initializers take half a second and 220 MB of
// resident memory in every process that links it, and `headroom plan`,
// `report` or a cpu `train` never call it. The entry points the cuda table
// uses, looked up once by their names.
#pragma once

#include <cublasLt.h>

namespace headroom {

// X(name) for every entry point: the struct's members and their lookup are
// written from this one list.
#define HEADROOM_CUBLASLT_ENTRY_POINTS(X) \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)

struct CublasLtLibrary {
#define HEADROOM_CUBLASLT_MEMBER(name) decltype(&::name) name;
  HEADROOM_CUBLASLT_ENTRY_POINTS(HEADROOM_CUBLASLT_MEMBER)
#undef HEADROOM_CUBLASLT_MEMBER
};

// The library (libcublasLt.so.<CUBLAS_VER_MAJOR>, through the loader's
// search path: LD_LIBRARY_PATH, the binary's rpath, ld.so.cache), loaded on
// the first call and kept for the process. Throws UsageError naming the
// file and dlerror() when it or an entry point is missing.
const CublasLtLibrary& cublaslt_library();

// cublasStatus_t's enumerator name ("CUBLAS_STATUS_NOT_SUPPORTED"), without
// linking libcublas for cublasGetStatusName.
const char* cublas_status_name(cublasStatus_t status);

}  // namespace headroom
