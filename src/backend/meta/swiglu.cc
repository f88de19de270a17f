// swiglu on meta: cpu/swiglu.cc's checks; allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_swiglu_forward(kind(), gate, up, out);
}

void MetaBackend::swiglu_backward(const Tensor& d_out, const Tensor& gate, const Tensor& up,
                                  Tensor& d_gate, Tensor& d_up) {
  check_swiglu_backward(kind(), d_out, gate, up, d_gate, d_up);
}

}  // namespace headroom
