// trace: a trace file as `headroom report` opens it (build_run_report:
// TraceReader, the steps, phase peaks, tags, the memory event replay, the
// OOM), rendered as text, JSON, HTML and Perfetto.
#include "fuzz_input.h"
#include "report/run_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  const std::string path = fuzz::write_file("trace.rank0.h5", fuzz::as_text(data, size));
  return fuzz::swallow_usage_errors([&] {
    const RunReport run = build_run_report(path);
    (void)render_text(run);
    (void)render_json(run);
    (void)render_html(run);
    (void)render_perfetto(run);
  });
}
