// `headroom report --html` in a real browser: headless Chromium (Debian's
// `chromium`) loads the page of a real quickstart run and of an OOM plan
// (experiments/postmortems/seed004_lora_24gb.toml pushed to OOM), and the
// test asks: the script ran to its end (data-ready), no console errors, the
// screenshot is not blank, one SVG series per category that held bytes, and
// the peak printed equals the trace's. Also the real run's --perfetto
// counters against its --json peaks. Without chromium the browser checks
// skip, except under CI (CI set), where they fail.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "test_util/source_tree.h"
#include "util/bytes.h"

namespace headroom {
namespace {

using nlohmann::json;
using testing::Result;
using testing::slurp;

bool have_chromium() {
  return std::system("command -v chromium > /dev/null 2>&1") == 0;
}

uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(s[at + 3])};
}

// The share of pixels of an 8-bit RGB(A) PNG that are not the page's white,
// decoded here (zlib, PNG's five row filters) so the test needs no imaging
// library. -1 for a PNG it cannot read.
double non_white_share(const std::string& png) {
  if (png.size() < 8 || png.compare(1, 3, "PNG") != 0) return -1;
  uint32_t width = 0, height = 0;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint32_t length = be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + length > png.size()) return -1;
    if (type == "IHDR") {
      width = be32(png, at + 8);
      height = be32(png, at + 12);
      const int depth = png[at + 16], color = png[at + 17];
      if (depth != 8 || (color != 2 && color != 6)) return -1;
      channels = color == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat += png.substr(at + 8, length);
    }
    at += 12 + length;
  }
  if (width == 0 || channels == 0) return -1;
  const size_t stride = size_t{width} * channels;
  std::vector<uint8_t> raw((stride + 1) * height);
  uLongf size = raw.size();
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      size != raw.size())
    return -1;
  std::vector<uint8_t> prev(stride, 0), row(stride);
  uint64_t non_white = 0;
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? row[i - channels] : 0;
      const int b = prev[i];
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int predictor = 0;
      switch (filter) {
        case 1:
          predictor = a;
          break;
        case 2:
          predictor = b;
          break;
        case 3:
          predictor = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          break;
      }
      row[i] = static_cast<uint8_t>(in[i] + predictor);
    }
    for (uint32_t x = 0; x < width; ++x) {
      const uint8_t* px = &row[size_t{x} * channels];
      if (px[0] < 240 || px[1] < 240 || px[2] < 240) ++non_white;
    }
    prev = row;
  }
  return static_cast<double>(non_white) / (double{1} * width * height);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

class ReportBrowser : public testing::ScratchFolder {
 protected:
  // Writes <name>.html and <name>.json of the run folder `run`, loads the
  // page in Chromium and checks it against the JSON's figures.
  void check_page(const std::string& run, const std::string& name, bool expect_oom) {
    Result r = run_headroom("report " + run + " --html " + name + ".html");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_headroom("report " + run + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json report = json::parse(r.out);
    const json& trace = report["traces"][0];
    const uint64_t peak = trace["memory"]["peak_allocated"];
    ASSERT_GT(peak, 0u);
    EXPECT_EQ(trace["oom"].is_null(), !expect_oom);

    if (!have_chromium()) {
      if (std::getenv("CI") != nullptr) FAIL() << "chromium not found under CI (scripts/setup.sh)";
      GTEST_SKIP() << "chromium not found (apt-get install chromium); CI unset, so skipped";
    }
    const std::string page = "file://" + (dir_ / (name + ".html")).string();
    const std::string flags =
        "timeout 120 chromium --headless --disable-gpu --no-sandbox --hide-scrollbars "
        "--user-data-dir='" +
        (dir_ / "chromium").string() + "' --window-size=1280,1400 ";
    const std::string cd = "cd '" + dir_.string() + "' && HOME='" + dir_.string() + "' ";
    int code = std::system((cd + flags + "--enable-logging=stderr --v=0 --dump-dom '" + page +
                            "' > dom.html 2> console.txt")
                               .c_str());
    ASSERT_EQ(code, 0) << slurp(dir_ / "console.txt");
    const std::string dom = slurp(dir_ / "dom.html");
    const std::string console = slurp(dir_ / "console.txt");
    EXPECT_NE(dom.find("data-ready=\"1\""), std::string::npos)
        << "the page's script did not finish";
    EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;
    for (size_t at = console.find("CONSOLE"); at != std::string::npos;
         at = console.find("CONSOLE", at + 1))
      ADD_FAILURE() << "console message: " << console.substr(at, console.find('\n', at) - at);

    // One series per category that held bytes, in the overview chart.
    const size_t overview = dom.find("id=\"timeline-r0\"");
    ASSERT_NE(overview, std::string::npos);
    const std::string chart = dom.substr(overview, dom.find("</svg>", overview) - overview);
    size_t with_bytes = 0;
    for (const auto& [category, bytes] : trace["memory"]["peak_by_category"].items()) {
      const size_t n = count(chart, "data-category=\"" + category + "\"");
      if (bytes.get<uint64_t>() > 0) {
        ++with_bytes;
        EXPECT_EQ(n, 1u) << category;
      } else {
        EXPECT_EQ(n, 0u) << category;
      }
    }
    EXPECT_EQ(count(chart, "class=\"series\""), with_bytes);
    // The peak the page prints is the trace's.
    const std::string marker = "id=\"peak\" data-peak-bytes=\"" + std::to_string(peak) + "\">" +
                               format_bytes_exact(peak) + "<";
    EXPECT_NE(dom.find(marker), std::string::npos) << "looked for " << marker;
    if (expect_oom) {
      EXPECT_NE(dom.find("<section class=\"oom\">"), std::string::npos);
      EXPECT_NE(dom.find("OOM: " + trace["oom"]["tag"].get<std::string>()), std::string::npos);
    }

    code = std::system((cd + flags + "--screenshot='" + (dir_ / (name + ".png")).string() + "' '" +
                        page + "' > shot.txt 2>&1")
                           .c_str());
    ASSERT_EQ(code, 0) << slurp(dir_ / "shot.txt");
    const double share = non_white_share(slurp(dir_ / (name + ".png")));
    EXPECT_GT(share, 0.05) << "the screenshot is (nearly) blank";
    EXPECT_LT(share, 0.95);
    // HEADROOM_REPORT_SHOTS=<folder> keeps the screenshots (docs/).
    if (const char* keep = std::getenv("HEADROOM_REPORT_SHOTS"))
      (void)std::system(("cp '" + (dir_ / (name + ".png")).string() + "' '" + keep + "/'").c_str());
  }
};

TEST_F(ReportBrowser, QuickstartRun) {
  Result r = run_headroom("train --set run.steps=4 --set schedule.warmup_steps=1");
  ASSERT_EQ(r.code, 0) << r.err;
  // Perfetto: each counter's maximum is the category's peak in --json.
  r = run_headroom("report results/quickstart --perfetto q.perfetto.json");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_headroom("report results/quickstart --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = json::parse(r.out);
  const json perfetto = json::parse(slurp(dir_ / "q.perfetto.json"));
  std::map<std::string, uint64_t> counter_max;
  for (const json& e : perfetto["traceEvents"])
    if (e["ph"] == "C") {
      uint64_t& m = counter_max[e["name"]];
      m = std::max(m, e["args"]["bytes"].get<uint64_t>());
    }
  for (const auto& [category, bytes] : report["traces"][0]["memory"]["peak_by_category"].items())
    if (bytes.get<uint64_t>() > 0) {
      EXPECT_EQ(counter_max[category], bytes.get<uint64_t>()) << category;
    }
  EXPECT_EQ(counter_max["reserved"],
            report["traces"][0]["memory"]["peak_reserved"].get<uint64_t>());

  check_page("results/quickstart", "quickstart", false);
}

TEST_F(ReportBrowser, OomPlan) {
  Result r = run_headroom("plan '" + testing::source_dir() +
                          "/experiments/postmortems/seed004_lora_24gb.toml' --set "
                          "checkpoint.activations=none --set loss.chunk_size=0");
  ASSERT_EQ(r.code, 3) << r.err;
  check_page("results/seed004-lora-24gb", "seed004_oom", true);
}

}  // namespace
}  // namespace headroom
