// bias on meta: cpu/bias.cc's checks; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::bias_forward(Tensor& x, const Tensor& bias) {
  check_bias_forward(kind(), x, bias);
}

void MetaBackend::bias_backward(const Tensor& dy, Tensor& d_bias) {
  check_bias_backward(kind(), dy, d_bias);
}

}  // namespace headroom
