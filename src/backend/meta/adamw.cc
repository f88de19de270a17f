// adamw_update on meta: cpu/adamw.cc's check (dtypes, the master rule,
// hyperparameters); allocates nothing, as cpu does.
#include "backend/meta/meta_backend.h"
#include "backend/model_op_checks.h"

namespace headroom {

void MetaBackend::adamw_update(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWParams& params) {
  check_adamw_update(kind(), param, master, grad, m, v, params);
}

}  // namespace headroom
