#include "trace/reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "trace/schema.h"
#include "util/error.h"
#include "util/hdf5/hdf5_handle.h"

namespace headroom {

using hdf5::check_usage;
using hdf5::Hid;

struct TraceReader::Impl {
  std::string path;
  TraceHeader header;
  trace_detail::TraceTypes types;
  Hid file;
  Hid steps;
  Hid events;
  Hid tags;
  Hid phase_peaks;
  bool events_recorded = true;
  bool has_padding_fraction = true;  // /steps of traces before it lack the column
  bool has_loss_scale = true;        // likewise
};

namespace {

[[noreturn]] void not_a_trace(const std::string& path, const std::string& why) {
  throw UsageError(path + ": not a headroom trace (" + why + ")");
}

Hid open_table(hid_t file, const char* name, const std::string& path) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) not_a_trace(path, std::string("no ") + name);
  return Hid(
      check_usage(H5Dopen2(file, name, H5P_DEFAULT), path, std::string("cannot open ") + name));
}

std::string required_string(hid_t root, const char* name, const std::string& path) {
  std::optional<std::string> value = hdf5::read_string_attribute(root, name, path);
  if (!value) not_a_trace(path, std::string("no attribute ") + name + " on /");
  return *value;
}

template <typename T>
T required_scalar(hid_t object, const char* name, hid_t mem_type, const std::string& path,
                  const char* where) {
  T value{};
  if (!hdf5::read_scalar_attribute(object, name, mem_type, &value, path))
    not_a_trace(path, std::string("no attribute ") + name + " on " + where);
  return value;
}

void check_event(const MemoryEvent& e, uint64_t row, const std::string& path) {
  auto bad = [&](const char* field, int value) {
    throw UsageError(path + ": /memory/events[" + std::to_string(row) + "]: " + field + " " +
                     std::to_string(value) + " is out of range");
  };
  if (static_cast<int>(e.action) > static_cast<int>(MemoryAction::kOom))
    bad("action", static_cast<int>(e.action));
  if (static_cast<int>(e.category) >= kNumCategories) bad("category", static_cast<int>(e.category));
  if (static_cast<int>(e.phase) >= kNumPhases) bad("phase", static_cast<int>(e.phase));
}

}  // namespace

TraceReader::TraceReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

TraceReader TraceReader::open(const std::string& path) {
  hdf5::QuietHdf5Errors quiet;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw UsageError(path + ": cannot open trace: " + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) throw UsageError(path + ": cannot open trace: is a directory");
  // Otherwise HDF5 reports an unreadable file as "not an HDF5 file".
  if (::access(path.c_str(), R_OK) != 0)
    throw UsageError(path + ": cannot open trace: " + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    not_a_trace(path, "not an HDF5 file");
  }

  auto impl = std::make_unique<Impl>();
  Impl& r = *impl;
  r.path = path;
  r.types = trace_detail::make_trace_types();

  Hid access(check_usage(H5Pcreate(H5P_FILE_ACCESS), path, "cannot open trace"));
#if H5_VERSION_GE(1, 10, 7)
  // A live run's trace must be readable; the writer does not lock it either.
  check_usage(H5Pset_file_locking(access.get(), false, true), path, "cannot open trace");
#endif
  // SWMR read mode for one effect: HDF5 then reads past the end of
  // allocation recorded in the superblock. HDF5 writes the superblock last in
  // every flush, after the chunk indices and object headers, so a writer
  // killed between the two leaves an index that points at chunks (already
  // written: raw data goes first) just past the recorded end, and a plain
  // read-only open refuses the whole table ("addr overflow"), the finished
  // steps' rows with it. The writer is never in SWMR mode, so HDF5 still
  // refuses a copy cut short ("truncated file": it skips that check only
  // for files a SWMR writer holds), and nothing changes for a closed file.
  r.file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, access.get()));
  // HDF5 keeps one handle per file in a process and refuses a second open
  // with another SWMR flag: a trace this process already holds open (its
  // writer, say) is read through that handle, as before SWMR mode.
  if (!r.file.valid()) r.file = Hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()));
  if (!r.file.valid()) {
    std::string reason = hdf5::hdf5_reason();
    H5Eclear2(H5E_DEFAULT);
    not_a_trace(path, "HDF5 cannot open it: " + reason);
  }

  hid_t root = r.file.get();
  if (!hdf5::has_attribute(root, "schema_version"))
    not_a_trace(path, "no attribute schema_version on /");
  TraceHeader& h = r.header;
  h.schema_version = required_scalar<int32_t>(root, "schema_version", H5T_NATIVE_INT32, path, "/");
  if (h.schema_version > kTraceSchemaVersion)
    throw UsageError(path + ": trace schema version " + std::to_string(h.schema_version) +
                     " is newer than this headroom reads (" + std::to_string(kTraceSchemaVersion) +
                     "); use a newer headroom");
  if (h.schema_version < 1) not_a_trace(path, "schema_version " + std::to_string(h.schema_version));
  h.run_name = required_string(root, "run_name", path);
  h.rank = required_scalar<int32_t>(root, "rank", H5T_NATIVE_INT32, path, "/");
  h.world_size = required_scalar<int32_t>(root, "world_size", H5T_NATIVE_INT32, path, "/");
  h.backend = required_string(root, "backend", path);
  h.device = required_string(root, "device", path);
  h.capacity_bytes =
      required_scalar<uint64_t>(root, "capacity_bytes", H5T_NATIVE_UINT64, path, "/");
  if (H5Aexists(root, "outside_allocator") > 0)
    h.outside_allocator = required_string(root, "outside_allocator", path);
  h.config_toml = required_string(root, "config_toml", path);
  h.started_at = required_string(root, "started_at", path);
  h.headroom_version = required_string(root, "headroom_version", path);

  r.steps = open_table(root, trace_detail::kStepsTable, path);
  {
    Hid file_type(check_usage(H5Dget_type(r.steps.get()), path, "cannot read /steps' type"));
    r.has_padding_fraction = H5Tget_member_index(file_type.get(), "padding_fraction") >= 0;
    r.has_loss_scale = H5Tget_member_index(file_type.get(), "loss_scale") >= 0;
  }
  if (H5Lexists(root, trace_detail::kMemoryGroup, H5P_DEFAULT) <= 0)
    not_a_trace(path, "no /memory");
  r.events = open_table(root, trace_detail::kEventsTable, path);
  r.tags = open_table(root, trace_detail::kTagsTable, path);
  r.phase_peaks = open_table(root, trace_detail::kPhasePeaksTable, path);
  if (hdf5::has_attribute(r.events.get(), "recorded")) {
    r.events_recorded = required_scalar<int8_t>(r.events.get(), "recorded", r.types.boolean.get(),
                                                path, trace_detail::kEventsTable) != 0;
  }
  return TraceReader(std::move(impl));
}

const std::string& TraceReader::path() const {
  return impl_->path;
}
const TraceHeader& TraceReader::header() const {
  return impl_->header;
}

uint64_t TraceReader::num_steps() const {
  hdf5::QuietHdf5Errors quiet;
  return hdf5::num_rows(impl_->steps.get(), impl_->path, trace_detail::kStepsTable);
}

std::vector<StepRecord> TraceReader::steps() const {
  hdf5::QuietHdf5Errors quiet;
  const Impl& r = *impl_;
  hsize_t n = hdf5::num_rows(r.steps.get(), r.path, trace_detail::kStepsTable);
  std::vector<trace_detail::StepRow> rows(n);
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  for (trace_detail::StepRow& row : rows) {
    row.padding_fraction = unknown;
    row.loss_scale = 1.0;  // before the column, nothing was scaled
  }
  const hid_t type = !r.has_padding_fraction ? r.types.step_mem_before_padding.get()
                     : !r.has_loss_scale     ? r.types.step_mem_before_loss_scale.get()
                                             : r.types.step_mem.get();
  hdf5::read_rows(r.steps.get(), type, rows.data(), 0, n, r.path, trace_detail::kStepsTable);
  std::vector<StepRecord> out;
  out.reserve(n);
  for (const trace_detail::StepRow& row : rows) {
    out.push_back(StepRecord{
        .step = row.step,
        .loss = row.loss,
        .grad_norm = row.grad_norm,
        .lr = row.lr,
        .tokens = row.tokens,
        .padded_tokens = row.padded_tokens,
        .micro_batches = row.micro_batches,
        .longest_sample = row.longest_sample,
        .peak_allocated = row.peak_allocated,
        .peak_reserved = row.peak_reserved,
        .step_seconds = row.step_seconds,
        .tokens_per_second = row.tokens_per_second,
        .skipped = row.skipped != 0,
        .truncated_samples = row.truncated_samples,
        .padding_fraction = row.padding_fraction,
        .loss_scale = row.loss_scale,
    });
  }
  return out;
}

std::vector<PhasePeakRecord> TraceReader::phase_peaks() const {
  hdf5::QuietHdf5Errors quiet;
  const Impl& r = *impl_;
  hsize_t n = hdf5::num_rows(r.phase_peaks.get(), r.path, trace_detail::kPhasePeaksTable);
  std::vector<trace_detail::PhasePeakRow> rows(n);
  hdf5::read_rows(r.phase_peaks.get(), r.types.phase_peak_mem.get(), rows.data(), 0, n, r.path,
                  trace_detail::kPhasePeaksTable);
  std::vector<PhasePeakRecord> out;
  out.reserve(n);
  for (const trace_detail::PhasePeakRow& row : rows) {
    if (static_cast<int>(row.phase) >= kNumPhases)
      throw UsageError(r.path + ": /memory/phase_peaks: phase out of range");
    out.push_back({row.step, row.phase, row.peak_allocated, row.peak_reserved});
  }
  return out;
}

std::vector<std::string> TraceReader::tags() const {
  hdf5::QuietHdf5Errors quiet;
  const Impl& r = *impl_;
  const hsize_t n = hdf5::num_rows(r.tags.get(), r.path, trace_detail::kTagsTable);
  // Reads rows [0, count) into `out`, or returns false (nothing kept) when
  // one of them cannot be read.
  auto read_prefix = [&](hsize_t count, std::vector<std::string>& out) {
    std::vector<char*> raw(count, nullptr);
    bool ok = true;
    try {
      hdf5::read_rows(r.tags.get(), r.types.string.get(), raw.data(), 0, count, r.path,
                      trace_detail::kTagsTable);
    } catch (const UsageError&) {
      ok = false;
    }
    out.clear();
    if (ok) out.reserve(count);
    for (char* text : raw) {
      if (ok) out.emplace_back(text != nullptr ? text : "");
      H5free_memory(text);  // HDF5 allocated each string, also in a failed read; free(NULL) is fine
    }
    return ok;
  };
  std::vector<std::string> out;
  if (read_prefix(n, out)) return out;
  // A torn last flush: its rows are the unreadable ones, at the end. Find
  // the longest readable prefix (readable rows form a prefix, so bisect).
  hsize_t good = 0, bad = n;
  while (bad - good > 1) {
    const hsize_t mid = good + (bad - good) / 2;
    std::vector<std::string> probe;
    if (read_prefix(mid, probe))
      good = mid;
    else
      bad = mid;
  }
  if (good > 0 && read_prefix(good, out)) return out;
  throw UsageError(r.path + ": cannot read " + trace_detail::kTagsTable +
                   ": not even its first row is readable");
}

bool TraceReader::events_recorded() const {
  return impl_->events_recorded;
}

uint64_t TraceReader::num_events() const {
  hdf5::QuietHdf5Errors quiet;
  return hdf5::num_rows(impl_->events.get(), impl_->path, trace_detail::kEventsTable);
}

void TraceReader::for_each_event_batch(
    const std::function<void(const std::vector<MemoryEvent>&)>& consume,
    uint64_t batch_rows) const {
  HR_CHECK(batch_rows > 0, "batch_rows must be positive");
  const Impl& r = *impl_;
  uint64_t total = num_events();
  std::vector<MemoryEvent> batch;
  for (uint64_t start = 0; start < total; start += batch_rows) {
    uint64_t count = std::min(batch_rows, total - start);
    batch.resize(count);
    {
      hdf5::QuietHdf5Errors quiet;
      hdf5::read_rows(r.events.get(), r.types.event_mem.get(), batch.data(), start, count, r.path,
                      trace_detail::kEventsTable);
    }
    for (uint64_t i = 0; i < count; ++i)
      check_event(batch[i], start + i, r.path);
    consume(batch);
  }
}

std::vector<MemoryEvent> TraceReader::read_events(uint64_t start, uint64_t count) const {
  const Impl& r = *impl_;
  const uint64_t total = num_events();
  count = start >= total ? 0 : std::min(count, total - start);
  std::vector<MemoryEvent> rows(count);
  if (count == 0) return rows;
  {
    hdf5::QuietHdf5Errors quiet;
    hdf5::read_rows(r.events.get(), r.types.event_mem.get(), rows.data(), start, count, r.path,
                    trace_detail::kEventsTable);
  }
  for (uint64_t i = 0; i < count; ++i)
    check_event(rows[i], start + i, r.path);
  return rows;
}

std::vector<MemoryEvent> TraceReader::events() const {
  std::vector<MemoryEvent> out;
  out.reserve(num_events());
  for_each_event_batch([&](const std::vector<MemoryEvent>& batch) {
    out.insert(out.end(), batch.begin(), batch.end());
  });
  return out;
}

std::optional<std::string> TraceReader::collective_timeout() const {
  const Impl& r = *impl_;
  if (H5Lexists(r.file.get(), trace_detail::kCollectiveTimeoutGroup, H5P_DEFAULT) <= 0)
    return std::nullopt;
  Hid group(check_usage(H5Gopen2(r.file.get(), trace_detail::kCollectiveTimeoutGroup, H5P_DEFAULT),
                        r.path, "cannot open /collective_timeout"));
  return hdf5::read_string_attribute(group.get(), "message", r.path);
}

bool TraceReader::has_oom() const {
  return H5Lexists(impl_->file.get(), trace_detail::kOomGroup, H5P_DEFAULT) > 0;
}

Postmortem TraceReader::oom() const {
  const Impl& r = *impl_;
  const std::string& path = r.path;
  if (!has_oom())
    throw UsageError(path + ": the trace has no /oom (the run did not run out of memory)");
  hdf5::QuietHdf5Errors quiet;
  Hid group(check_usage(H5Gopen2(r.file.get(), trace_detail::kOomGroup, H5P_DEFAULT), path,
                        "cannot open /oom"));
  hid_t g = group.get();
  const char* where = trace_detail::kOomGroup;
  auto string_attr = [&](const char* name) {
    std::optional<std::string> value = hdf5::read_string_attribute(g, name, path);
    if (!value) throw UsageError(path + ": /oom has no attribute " + name);
    return *value;
  };
  auto u64 = [&](const char* name) {
    return required_scalar<uint64_t>(g, name, H5T_NATIVE_UINT64, path, where);
  };

  Postmortem pm;
  pm.requested_bytes = u64("requested_bytes");
  pm.rounded_bytes = u64("rounded_bytes");
  pm.segment_bytes = u64("segment_bytes");
  pm.tag = string_attr("tag");
  std::string category = string_attr("category");
  std::string phase = string_attr("phase");
  auto parsed_category = parse_category(category);
  auto parsed_phase = parse_phase(phase);
  if (!parsed_category) throw UsageError(path + ": /oom: unknown category \"" + category + "\"");
  if (!parsed_phase) throw UsageError(path + ": /oom: unknown phase \"" + phase + "\"");
  pm.category = *parsed_category;
  pm.phase = *parsed_phase;
  pm.layer = required_scalar<int32_t>(g, "layer", H5T_NATIVE_INT32, path, where);
  pm.step = required_scalar<int64_t>(g, "step", H5T_NATIVE_INT64, path, where);
  pm.description = string_attr("description");
  pm.allocated = u64("allocated");
  pm.reserved = u64("reserved");
  pm.capacity = u64("capacity");
  pm.source = string_attr("source");
  pm.capacity_limited =
      required_scalar<int8_t>(g, "capacity_limited", r.types.boolean.get(), path, where) != 0;
  if (H5Aexists(g, "device_total") > 0) {
    pm.device_free = u64("device_free");
    pm.device_total = u64("device_total");
  }

  Hid top = open_table(r.file.get(), trace_detail::kTopBlocksTable, path);
  hsize_t n = hdf5::num_rows(top.get(), path, trace_detail::kTopBlocksTable);
  std::vector<trace_detail::TopBlockRow> rows(n);
  hdf5::read_rows(top.get(), r.types.top_block_mem.get(), rows.data(), 0, n, path,
                  trace_detail::kTopBlocksTable);
  for (const trace_detail::TopBlockRow& row : rows) {
    pm.largest_live.push_back(LiveBlock{row.bytes, row.tag != nullptr ? row.tag : "", row.category,
                                        row.phase, row.layer, row.step});
    H5free_memory(const_cast<char*>(row.tag));
  }
  for (const LiveBlock& b : pm.largest_live) {
    if (static_cast<int>(b.category) >= kNumCategories || static_cast<int>(b.phase) >= kNumPhases)
      throw UsageError(path + ": /oom/top_blocks: category or phase out of range");
  }

  Hid live = open_table(r.file.get(), trace_detail::kLiveByCategoryTable, path);
  hsize_t m = hdf5::num_rows(live.get(), path, trace_detail::kLiveByCategoryTable);
  std::vector<trace_detail::LiveRow> live_rows(m);
  hdf5::read_rows(live.get(), r.types.live_mem.get(), live_rows.data(), 0, m, path,
                  trace_detail::kLiveByCategoryTable);
  for (const trace_detail::LiveRow& row : live_rows) {
    if (static_cast<int>(row.category) >= kNumCategories)
      throw UsageError(path + ": /oom/live_by_category: category out of range");
    pm.live_by_category[static_cast<int>(row.category)] = row.bytes;
  }
  return pm;
}

}  // namespace headroom
