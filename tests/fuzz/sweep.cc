// sweep: the [sweep] table of an experiment (parse_sweep_table: keys checked
// against the schema, values with each key's check), then its expansion
// into tasks as `headroom sweep` makes them.
#include "fuzz_input.h"
#include "sweep/sweep_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string_view toml = fuzz::as_text(data, size);
  return fuzz::swallow_usage_errors([&] {
    const SweepSpec spec = parse_sweep_table(toml, "fuzz.toml");
    for (const SweepTask& task : expand_sweep(spec))
      (void)task.describe();
  });
}
