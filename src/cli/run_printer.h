// What `train` and `plan` print while a run goes: its opening lines, a
// line per step (a plan's progress every 5 s), the postmortem of an
// out-of-memory on stderr, and the summary of the trace at the end (a
// plan's verdict against the device). Printing only: the run is train/run.h's.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "train/run.h"

namespace headroom {

// Prints a run's progress to `out` (nullptr: nothing, for the ranks of a
// plan after the first) and an out-of-memory postmortem to stderr.
class PrintingObserver : public RunObserver {
 public:
  PrintingObserver(std::FILE* out, int rank, int world_size)
      : out_(out), rank_(rank), world_size_(world_size) {}

  void on_corpus_synthesis(const RunSettings& s) override;
  void on_started(const RunSettings& s, double entropy) override;
  // PEFT's print_trainable_parameters(), so a LoRA run's numbers can be
  // checked against the ones users know.
  void on_model_built(int64_t trainable, int64_t all) override;
  void on_auto_resume(const std::string& checkpoint,
                      const std::vector<std::string>& passed_over) override;
  void on_resumed(const std::string& dir, const TrainState& state, const Cursor& cursor) override;
  void on_step(const StepReport& r) override;
  void on_out_of_memory(const Postmortem& postmortem, const std::string& trace_path) override;
  // After an OOM the postmortem is the message, and after a non-finite stop
  // the error: the summary would repeat them. `headroom report` shows both.
  void on_finished(const RunResult& result) override;

 private:
  std::FILE* out_;
  int rank_;
  int world_size_;
  bool planning_ = false;
  bool padded_ = false;       // batch.mode = "padded": the progress line shows the padding
  double last_progress_ = 0;  // elapsed seconds at the last plan progress line
};

}  // namespace headroom
