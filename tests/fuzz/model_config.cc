// model_config: a Hugging Face config.json imported (load_hf_config) and
// its shape rules checked (validate_model_config), as `model.hf_config` is.
#include "model/model_config.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("config.json", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors([&] { validate_model_config(load_hf_config(path), path); });
}
