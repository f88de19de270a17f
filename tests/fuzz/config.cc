// config: an experiment TOML file through load_config_string (parse, schema,
// every value's check, the rules between keys) with `--set` overrides.
// The input's lines after a line "#--set" are the overrides, one per line,
// as `headroom train --set` passes them; the text above it is the file.
// to_toml of an accepted config must load back to an equal config.
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  std::string_view input = fuzz::as_text(data, size);
  std::string_view toml = input;
  std::vector<std::string> overrides;
  constexpr std::string_view kMarker = "\n#--set\n";
  if (const size_t at = input.find(kMarker); at != std::string_view::npos) {
    toml = input.substr(0, at + 1);
    std::string_view rest = input.substr(at + kMarker.size());
    while (!rest.empty()) {
      const size_t end = rest.find('\n');
      overrides.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  return fuzz::swallow_usage_errors([&] {
    const ExperimentConfig config = load_config_string(toml, "fuzz.toml", overrides);
    const std::string echoed = to_toml(config);
    if (!(load_config_string(echoed, "<to_toml>") == config)) std::abort();
  });
}
