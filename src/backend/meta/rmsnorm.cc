// rmsnorm on meta: cpu/rmsnorm.cc's checks; allocates nothing, as cpu does
// (y and rstd are the caller's; dw, when not frozen, too).
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::rmsnorm_forward(const Tensor& x, const Tensor& w, float eps, Tensor& y,
                                  Tensor& rstd) {
  check_rmsnorm_forward(kind(), x, w, eps, y, rstd);
}

void MetaBackend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                   const Tensor& rstd, Tensor& dx, Tensor& dw) {
  check_rmsnorm_backward(kind(), dy, x, w, rstd, dx, dw);
}

}  // namespace headroom
