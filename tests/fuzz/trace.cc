// trace: a trace file as `headroom report` opens it (build_run_report:
// TraceReader, the steps, phase peaks, tags, the memory event replay, the
// OOM), rendered as text, JSON, HTML and Perfetto. The input rewrites a
// valid trace (a plan's, with memory events) value by value (hdf5_rewrite.h:
// the file stays well-formed HDF5; its content is the fuzzer's).
#include "fuzz_input.h"
#include "hdf5_rewrite.h"
#include "report/run_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headroom;
  fuzz::Script script(data, size);
  const std::string path =
      fuzz::rewrite_hdf5(HEADROOM_FUZZ_FIXTURES "/plan.rank0.h5", "trace.rank0.h5", script);
  return fuzz::swallow_usage_errors([&] {
    const RunReport run = build_run_report(path);
    (void)render_text(run);
    (void)render_json(run);
    (void)render_html(run);
    (void)render_perfetto(run);
  });
}
