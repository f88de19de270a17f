// train_state: a checkpoint's trainer_state.json (read_train_state), what
// checkpoint.resume and auto-resume read before anything is written.
#include "fuzz_input.h"
#include "train/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path =
      fuzz::write_file("train_state/trainer_state.json", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors(
      [&] { read_train_state(std::filesystem::path(path).parent_path().string()); });
}
