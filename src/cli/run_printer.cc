#include "run_printer.h"

#include <algorithm>

#include "report/summary.h"
#include "stop_signals.h"
#include "trace/reader.h"
#include "util/bytes.h"

namespace headroom {

namespace {

std::string eta(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

// "4,194,304".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The plan's answer to "will it fit?", with the peak of each phase over
// every step (the step rows in the trace hold them per step).
std::string plan_verdict(const RunResult& result) {
  const MemoryStats& s = result.memory;
  std::string out = "\nplan: peak allocated " + format_bytes_exact(s.peak_allocated) +
                    ", peak reserved " + format_bytes_exact(s.peak_reserved) + "\n";
  out += "  peak allocated by phase:";
  for (Phase phase : kAllPhases) {
    const uint64_t bytes = result.phase_peaks[static_cast<int>(phase)];
    if (bytes) out += " " + std::string(name_of(phase)) + " " + format_bytes(bytes) + ",";
  }
  out.back() = '\n';
  const uint64_t capacity = result.capacity;
  std::string against = "memory.device_capacity";
  if (result.device) {
    const DeviceBudget& d = *result.device;
    against = "what memory.device = \"" + std::string(d.preset->name) + "\" leaves";
    out += "  memory.device " + std::string(d.preset->name) + ": " + format_bytes(d.usable_bytes) +
           " usable; outside the allocator (estimates until measured on the device):\n";
    for (const BudgetLine& line : d.lines)
      out += "    " + line.name + " " + format_bytes(line.bytes) + "\n";
    out += "  the allocator gets " + format_bytes_exact(capacity) + "\n";
  }
  if (result.peak_shape) {
    // Padded batches: the shape behind the peak is what to change to lower it.
    const RunResult::PeakShape& shape = *result.peak_shape;
    out += "  peak set at step " + std::to_string(shape.step) + " by a micro-batch of " +
           std::to_string(shape.rows) + " x " + std::to_string(shape.width) + " tokens";
    if (shape.bucket >= 0)
      out += ", bucket " + std::to_string(shape.bucket) +
             " (<= " + std::to_string(result.buckets[static_cast<size_t>(shape.bucket)]) +
             " tokens) of " + std::to_string(result.buckets.size());
    out += "\n";
    const int64_t last = static_cast<int64_t>(result.buckets.size()) - 1;
    if (last >= 0 && result.largest_bucket_seen < last)
      out += "  note: no planned step reached the last bucket (<= " +
             std::to_string(result.buckets.back()) +
             " tokens), whose shape may peak higher: plan more run.steps\n";
  }
  if (capacity == 0)
    out +=
        "  no memory.device or memory.device_capacity set: nothing to check the peak "
        "against\n";
  else if (s.peak_reserved <= capacity)
    out += "  fits " + against + " " + format_bytes_exact(capacity) + " with " +
           format_bytes(capacity - s.peak_reserved) + " to spare\n";
  else
    out += "  does NOT fit " + against + " " + format_bytes_exact(capacity) + "\n";
  return out;
}

const char* verb(const RunSettings& s) {
  return s.mode == RunMode::kPlan ? "plan" : "train";
}

}  // namespace

void PrintingObserver::on_corpus_synthesis(const RunSettings& s) {
  if (!out_) return;
  std::fprintf(out_,
               "headroom %s: writing a synthetic Markov corpus to %s "
               "(data.synthesize_if_missing)\n",
               verb(s), s.data_path.c_str());
  std::fflush(out_);
}

void PrintingObserver::on_started(const RunSettings& s, double entropy) {
  planning_ = s.backend == BackendKind::kMeta;
  padded_ = s.batch.mode == BatchOptions::Mode::kPadded;
  if (!out_) return;
  const std::string micro_batch =
      s.batch.mode == BatchOptions::Mode::kPacked
          ? std::to_string(s.batch.max_tokens_per_micro_batch) + " tokens"
      : s.batch.buckets.empty() && !s.batch.auto_buckets
          ? std::to_string(s.batch.micro_batch_size) + " padded rows"
          : "bucketed padded rows of <= " + std::to_string(s.batch.max_tokens_per_micro_batch) +
                " tokens";
  std::fprintf(out_, "headroom %s: %s (%s, %.2fM parameters) on %s, %lld steps of %lld x %s%s\n",
               verb(s), s.model.name.c_str(), std::string(name_of(s.transformer.dtype)).c_str(),
               static_cast<double>(s.model.num_parameters()) / 1e6,
               std::string(name_of(s.backend)).c_str(), static_cast<long long>(s.steps),
               static_cast<long long>(s.batch.grad_accum), micro_batch.c_str(),
               !planning_                        ? ""
               : s.target == TargetDevice::kCuda ? " (meta: a cuda device's allocations, no math)"
                                                 : " (meta: this host cpu's allocations, no math)");
  if (entropy > 0 && !planning_)
    std::fprintf(out_,
                 "  data: %s, source entropy %.4f nats/token (the best loss a model can reach)\n",
                 s.data_path.c_str(), entropy);
  std::fflush(out_);
}

void PrintingObserver::on_model_built(int64_t trainable, int64_t all) {
  if (!out_) return;
  std::fprintf(out_, "  trainable params: %s || all params: %s || trainable%%: %.4f\n",
               grouped(trainable).c_str(), grouped(all).c_str(),
               all ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0);
  std::fflush(out_);  // before a postmortem on stderr
}

void PrintingObserver::on_auto_resume(const std::string& checkpoint,
                                      const std::vector<std::string>& passed_over) {
  if (!out_) return;
  for (const std::string& why : passed_over)
    std::fprintf(out_, "  checkpoint.resume = \"auto\": passed over %s\n", why.c_str());
  if (checkpoint.empty())
    std::fprintf(out_,
                 "  checkpoint.resume = \"auto\": no complete checkpoint of this config, "
                 "starting afresh\n");
  else
    std::fprintf(out_, "  checkpoint.resume = \"auto\": continuing from %s\n", checkpoint.c_str());
  std::fflush(out_);
}

void PrintingObserver::on_resumed(const std::string& dir, const TrainState& state,
                                  const Cursor& cursor) {
  if (!out_) return;
  std::fprintf(out_, "  resumed from %s: step %lld, data epoch %lld, micro-batch %lld\n",
               dir.c_str(), static_cast<long long>(state.step),
               static_cast<long long>(cursor.epoch), static_cast<long long>(cursor.position));
}

void PrintingObserver::on_step(const StepReport& r) {
  if (!out_) return;
  const int64_t step = r.record.step;
  const double remaining = r.elapsed_seconds / static_cast<double>(step + 1 - r.first_step) *
                           static_cast<double>(r.steps - step - 1);
  if (!planning_) {
    char padding[32] = "";
    if (padded_)
      std::snprintf(padding, sizeof padding, "  pad %.1f%%", 100.0 * r.record.padding_fraction);
    std::fprintf(out_, "step %lld/%lld  loss %.4f  %.0f tok/s%s  peak %s  eta %s%s\n",
                 static_cast<long long>(step + 1), static_cast<long long>(r.steps), r.record.loss,
                 r.record.tokens_per_second, padding, format_bytes(r.record.peak_allocated).c_str(),
                 eta(remaining).c_str(), r.record.skipped ? "  (skipped: not finite)" : "");
  } else if (r.elapsed_seconds - last_progress_ >= 5.0 && step + 1 < r.steps) {
    // A plan is quick step by step but may have many: say where it is.
    last_progress_ = r.elapsed_seconds;
    std::fprintf(out_, "plan: step %lld/%lld  peak %s  eta %s\n", static_cast<long long>(step + 1),
                 static_cast<long long>(r.steps), format_bytes(r.peak_allocated_so_far).c_str(),
                 eta(remaining).c_str());
  }
  std::fflush(out_);
}

void PrintingObserver::on_out_of_memory(const Postmortem& postmortem,
                                        const std::string& trace_path) {
  if (world_size_ > 1)
    std::fprintf(stderr, "rank %d of %d ran out of memory:\n", rank_, world_size_);
  std::fprintf(stderr, "%s", format_postmortem(postmortem).c_str());
  std::fprintf(stderr, "postmortem written to %s (/oom)\n", trace_path.c_str());
}

void PrintingObserver::on_finished(const RunResult& result) {
  if (!out_ || (result.outcome != RunOutcome::kFinished && result.outcome != RunOutcome::kStopped))
    return;
  if (result.outcome == RunOutcome::kStopped) {
    const std::string by = result.stop_signal
                               ? std::string("on ") + stop_signal_name(result.stop_signal)
                           : world_size_ > 1 ? std::string("on another rank's signal")
                                             : std::string("on request");
    if (!result.committed) {
      // Before the first step: nothing to summarize, nothing written.
      std::fprintf(out_,
                   "\nstopped %s before the first step; the run folder is as it was (rerun "
                   "the same command to start again)\n",
                   by.c_str());
      std::fflush(out_);
      return;
    }
    std::fprintf(out_,
                 "\nstopped %s after step %lld%s%s; rerun with checkpoint.resume = \"auto\" "
                 "to continue\n",
                 by.c_str(), static_cast<long long>(result.next_step),
                 result.checkpoint.empty() ? "" : ", checkpoint ", result.checkpoint.c_str());
  }
  if (!result.checkpoint_seconds.empty()) {
    std::vector<double> seconds = result.checkpoint_seconds;
    std::sort(seconds.begin(), seconds.end());
    std::fprintf(out_, "\ncheckpoints: %zu saved, median %.3f s per save, last %s\n",
                 seconds.size(), seconds[seconds.size() / 2], result.checkpoint.c_str());
  }
  if (result.source_entropy_nats > 0 && !planning_)
    std::fprintf(out_, "\nfinal loss %.4f nats/token vs source entropy %.4f (gap %.4f)\n",
                 result.last_loss, result.source_entropy_nats,
                 result.last_loss - result.source_entropy_nats);
  std::fprintf(out_, "\n%s",
               summarize_trace(TraceReader::open(result.trace_path.string())).c_str());
  if (planning_) std::fprintf(out_, "%s", plan_verdict(result).c_str());
  if (result.host_memory) {
    const MemoryStats& host = *result.host_memory;
    std::fprintf(out_,
                 "\nhost memory (zero.offload_optimizer): peak allocated %s, peak reserved %s; "
                 "optim %s, comm (transfer buffers) %s\n",
                 format_bytes(host.peak_allocated).c_str(),
                 format_bytes(host.peak_reserved).c_str(),
                 format_bytes(host.peak_by_category[static_cast<int>(Category::kOptim)]).c_str(),
                 format_bytes(host.peak_by_category[static_cast<int>(Category::kComm)]).c_str());
  }
  if (result.rss) {
    const RssCheck& rss = *result.rss;
    std::fprintf(
        out_,
        "\nrss check: peak resident %s above the baseline of %s, of which file-backed pages "
        "%s (library code); private %s; allocator peak reserved %s (ratio %.3f)\n",
        format_bytes_exact(rss.peak_above_baseline).c_str(), format_bytes(rss.baseline).c_str(),
        format_bytes_exact(rss.file_backed_growth).c_str(),
        format_bytes_exact(rss.private_peak_above_baseline).c_str(),
        format_bytes_exact(rss.allocator_peak_reserved).c_str(),
        rss.allocator_peak_reserved ? static_cast<double>(rss.private_peak_above_baseline) /
                                          static_cast<double>(rss.allocator_peak_reserved)
                                    : 0.0);
  }
}

}  // namespace headroom
