#include "data/length_spec.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.h"

namespace headroom {

namespace {

// What the errors of one parse share: where the text came from, and the text.
struct Source {
  const std::string& name;
  const std::string& text;

  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError(name + " \"" + text + "\": " + why +
                     " (expected fixed:L, uniform:A-B, lognormal:MEDIAN,SIGMA,MIN-MAX or "
                     "histogram:A-B:W,C-D:W,...)");
  }

  template <typename T>
  T number(std::string_view part, const char* what) const {
    T value{};
    const char* end = part.data() + part.size();
    auto [ptr, ec] = std::from_chars(part.data(), end, value);
    if (part.empty() || ec != std::errc() || ptr != end)
      fail(std::string(what) + " \"" + std::string(part) + "\" is not a number");
    return value;
  }

  // "A-B" as two lengths.
  std::pair<int64_t, int64_t> range(std::string_view part) const {
    const size_t dash = part.find('-');
    if (dash == std::string_view::npos) fail("\"" + std::string(part) + "\" is not a range A-B");
    return {number<int64_t>(part.substr(0, dash), "length"),
            number<int64_t>(part.substr(dash + 1), "length")};
  }
};

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t at = s.find(by, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

}  // namespace

LengthSpec parse_length_spec(const std::string& text, const std::string& name) {
  const Source source{name, text};
  const size_t colon = text.find(':');
  if (colon == std::string::npos) source.fail("no kind before ':'");
  const std::string kind = text.substr(0, colon);
  const std::string_view rest = std::string_view(text).substr(colon + 1);
  LengthSpec spec;
  if (kind == "fixed") {
    spec = LengthSpec::fixed(source.number<int64_t>(rest, "length"));
  } else if (kind == "uniform") {
    auto [lo, hi] = source.range(rest);
    spec = LengthSpec::uniform(lo, hi);
  } else if (kind == "lognormal") {
    std::vector<std::string_view> parts = split(rest, ',');
    if (parts.size() != 3) source.fail("lognormal takes MEDIAN,SIGMA,MIN-MAX");
    auto [lo, hi] = source.range(parts[2]);
    spec = LengthSpec::lognormal(source.number<double>(parts[0], "median"),
                                 source.number<double>(parts[1], "sigma"), lo, hi);
  } else if (kind == "histogram") {
    std::vector<LengthSpec::Bucket> buckets;
    for (std::string_view bucket : split(rest, ',')) {
      std::vector<std::string_view> parts = split(bucket, ':');
      if (parts.size() != 2)
        source.fail("histogram bucket \"" + std::string(bucket) + "\" is not A-B:W");
      auto [lo, hi] = source.range(parts[0]);
      buckets.push_back({lo, hi, source.number<double>(parts[1], "weight")});
    }
    spec = LengthSpec::histogram(std::move(buckets));
  } else {
    source.fail("unknown kind \"" + kind + "\"");
  }
  try {
    spec.validate();
  } catch (const UsageError& e) {
    source.fail(e.what());
  }
  int64_t longest = spec.kind == LengthSpec::Kind::kFixed ? spec.min_length : spec.max_length;
  if (spec.kind == LengthSpec::Kind::kHistogram) {
    longest = 0;
    for (const LengthSpec::Bucket& b : spec.buckets)
      longest = std::max(longest, b.max_length);
  }
  if (longest > kMaxSyntheticLength)
    source.fail("a length of " + std::to_string(longest) + " tokens is past the " +
                std::to_string(kMaxSyntheticLength) +
                " a synthetic document may have (each is built in memory)");
  return spec;
}

}  // namespace headroom
