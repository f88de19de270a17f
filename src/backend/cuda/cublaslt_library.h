// cuBLASLt, loaded when the first CudaContext is made rather than linked:
// libcublasLt is 540 MB whose initializers take half a second and 220 MB of
// resident memory in every process that links it, and `headroom plan`,
// `report` or a cpu `train` never call it. The entry points the cuda table
// uses, looked up once by their names.
#pragma once

#include <cublasLt.h>

namespace headroom {

struct CublasLtLibrary {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute;
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
