#include "trace/writer.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "trace/schema.h"
#include "util/error.h"
#include "util/hdf5/hdf5_handle.h"
#include "util/log.h"

namespace headroom {

using hdf5::append_rows;
using hdf5::check_internal;
using hdf5::check_usage;
using hdf5::Hid;

struct TraceWriter::Impl {
  std::string path;
  bool record_events = false;
  trace_detail::TraceTypes types;
  Hid file;
  Hid steps;
  Hid events;
  Hid tags;
  Hid phase_peaks;

  // Filled between flushes without touching the file (see writer.h).
  std::vector<MemoryEvent> event_buffer;
  std::vector<trace_detail::StepRow> step_buffer;
  std::vector<trace_detail::PhasePeakRow> phase_peak_buffer;

  // Rows already in the file.
  uint64_t event_rows = 0;
  uint64_t step_rows = 0;
  uint64_t phase_peak_rows = 0;
  uint64_t tag_rows = 0;
  bool oom_written = false;
  // The first failed write (a full disk): the file was closed then, as the
  // last successful flush left it, and every later write throws this again.
  std::exception_ptr failure;

  void write_header(const TraceHeader& header);
  // Writes everything buffered (and the tags past tag_rows in `all_tags`,
  // when given) in two halves, each ending with H5Fflush: the events, tags
  // and phase peaks first, then the step rows, so a step that is durable has
  // its memory records durable too, whatever moment a kill lands.
  void commit(const std::vector<std::string>* all_tags);
  void write_buffered_memory();
  void write_buffered_steps();
  void write_tags(const std::vector<std::string>& all_tags);
  void flush_file();
  // What each half of commit() may add to the file, generously: new chunks
  // of every table it appends to, the tags' heap, and room for HDF5's
  // metadata (object headers, chunk B-tree nodes).
  uint64_t memory_growth(const std::vector<std::string>* all_tags) const;
  uint64_t steps_growth() const;
  // reserve_space(), then `write`, then H5Fflush: a full disk is found
  // before HDF5 has changed anything, so the file stays as the last flush
  // left it (hdf5_handle.h explains why HDF5 cannot be left to fail).
  template <typename Write>
  void reserved_write(uint64_t bytes, Write&& write);
  // Runs `body`; on any failure closes the file without writing again and
  // remembers the error, so neither a later call nor the destructor (nor
  // HDF5's shutdown at exit) retries the write that failed.
  template <typename Body>
  void or_poison(Body&& body);
  void throw_if_failed() const;
  void close_handles() noexcept;
  void write_oom_group(const Postmortem& postmortem);
};

namespace {

// Room for HDF5's own bookkeeping in one flush: object headers rewritten
// with new extents, a chunk B-tree node or two (about 2 KiB each), the
// metadata and small-data aggregators' 2 KiB blocks. Measured flushes add
// a few KiB; the margin keeps the reservation an upper bound.
constexpr uint64_t kMetadataSlack = 64 * 1024;

// Bytes that appending `count` rows after `old_rows` allocates: unfiltered
// chunks are allocated whole when first written, and never move after.
uint64_t growth(uint64_t old_rows, uint64_t count, hsize_t chunk_rows, hid_t file_type) {
  const auto chunks = [&](uint64_t rows) { return (rows + chunk_rows - 1) / chunk_rows; };
  return (chunks(old_rows + count) - chunks(old_rows)) * chunk_rows * H5Tget_size(file_type);
}

Hid create_file(const std::string& path) {
  Hid access(check_usage(H5Pcreate(H5P_FILE_ACCESS), path, "cannot create trace file"));
#if H5_VERSION_GE(1, 10, 7)
  // Without this, HDF5 holds an exclusive lock for the whole run and a user
  // cannot look at a live trace with h5py. Consistency between flushes comes
  // from writer.h's discipline, not from the lock.
  check_usage(H5Pset_file_locking(access.get(), false, true), path, "cannot create trace file");
#endif
  return Hid(check_usage(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), path,
                         "cannot create trace file"));
}

}  // namespace

void TraceWriter::Impl::write_header(const TraceHeader& header) {
  using hdf5::write_scalar_attribute;
  using hdf5::write_string_attribute;
  hid_t root = file.get();
  const int32_t schema_version = kTraceSchemaVersion;
  write_scalar_attribute(root, "schema_version", H5T_NATIVE_INT32, &schema_version, path);
  write_string_attribute(root, "run_name", header.run_name, path);
  write_scalar_attribute(root, "rank", H5T_NATIVE_INT32, &header.rank, path);
  write_scalar_attribute(root, "world_size", H5T_NATIVE_INT32, &header.world_size, path);
  write_string_attribute(root, "backend", header.backend, path);
  write_string_attribute(root, "device", header.device, path);
  write_scalar_attribute(root, "capacity_bytes", H5T_NATIVE_UINT64, &header.capacity_bytes, path);
  write_string_attribute(root, "outside_allocator", header.outside_allocator, path);
  write_string_attribute(root, "config_toml", header.config_toml, path);
  write_string_attribute(root, "started_at",
                         header.started_at.empty() ? utc_now_iso8601() : header.started_at, path);
  write_string_attribute(root, "headroom_version", header.headroom_version, path);
}

void TraceWriter::Impl::write_buffered_memory() {
  append_rows(events.get(), types.event_mem.get(), event_buffer.data(), event_rows,
              event_buffer.size(), path, trace_detail::kEventsTable);
  event_rows += event_buffer.size();
  event_buffer.clear();

  append_rows(phase_peaks.get(), types.phase_peak_mem.get(), phase_peak_buffer.data(),
              phase_peak_rows, phase_peak_buffer.size(), path, trace_detail::kPhasePeaksTable);
  phase_peak_rows += phase_peak_buffer.size();
  phase_peak_buffer.clear();
}

void TraceWriter::Impl::write_buffered_steps() {
  append_rows(steps.get(), types.step_mem.get(), step_buffer.data(), step_rows, step_buffer.size(),
              path, trace_detail::kStepsTable);
  step_rows += step_buffer.size();
  step_buffer.clear();
}

void TraceWriter::Impl::write_tags(const std::vector<std::string>& all_tags) {
  HR_CHECK(all_tags.size() >= tag_rows,
           path + ": the tag table shrank from " + std::to_string(tag_rows) + " to " +
               std::to_string(all_tags.size()) + " tags; pass the allocator's whole table");
  std::vector<const char*> fresh;
  fresh.reserve(all_tags.size() - tag_rows);
  for (size_t i = tag_rows; i < all_tags.size(); ++i)
    fresh.push_back(all_tags[i].c_str());
  append_rows(tags.get(), types.string.get(), fresh.data(), tag_rows, fresh.size(), path,
              trace_detail::kTagsTable);
  tag_rows = all_tags.size();
}

void TraceWriter::Impl::flush_file() {
  check_internal(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), path, "cannot flush");
}

uint64_t TraceWriter::Impl::memory_growth(const std::vector<std::string>* all_tags) const {
  using namespace trace_detail;
  uint64_t bytes = kMetadataSlack;
  bytes += growth(event_rows, event_buffer.size(), kEventChunkRows, types.event_file.get());
  bytes += growth(phase_peak_rows, phase_peak_buffer.size(), kPhasePeakChunkRows,
                  types.phase_peak_file.get());
  if (all_tags != nullptr && all_tags->size() > tag_rows) {
    const uint64_t fresh = all_tags->size() - tag_rows;
    bytes += growth(tag_rows, fresh, kTagChunkRows, types.string.get());
    // The strings themselves go to a global heap: a 4 KiB collection at
    // least, and per string its bytes, a terminator and a 16-byte header.
    bytes += 4096;
    for (size_t i = tag_rows; i < all_tags->size(); ++i)
      bytes += (*all_tags)[i].size() + 1 + 16 + 7;
  }
  return bytes;
}

uint64_t TraceWriter::Impl::steps_growth() const {
  return kMetadataSlack +
         growth(step_rows, step_buffer.size(), trace_detail::kStepChunkRows, types.step_file.get());
}

template <typename Write>
void TraceWriter::Impl::reserved_write(uint64_t bytes, Write&& write) {
  hdf5::reserve_space(file.get(), bytes, path);
  write();
  flush_file();
  hdf5::release_reserved_space(file.get());
}

void TraceWriter::Impl::commit(const std::vector<std::string>* all_tags) {
  reserved_write(memory_growth(all_tags), [&] {
    write_buffered_memory();
    if (all_tags != nullptr) write_tags(*all_tags);
  });
  if (step_buffer.empty()) return;
  reserved_write(steps_growth(), [&] { write_buffered_steps(); });
}

template <typename Body>
void TraceWriter::Impl::or_poison(Body&& body) {
  throw_if_failed();
  try {
    body();
  } catch (...) {
    failure = std::current_exception();
    // Whatever HDF5 still holds (a dirty chunk, metadata it could not
    // write) goes to memory, not to the file: the file keeps the last
    // successful flush, and closing cannot fail for want of space.
    hdf5::detach_from_disk(file.get());
    close_handles();
    throw;
  }
}

void TraceWriter::Impl::throw_if_failed() const {
  if (failure) std::rethrow_exception(failure);
}

void TraceWriter::Impl::close_handles() noexcept {
  event_buffer.clear();
  step_buffer.clear();
  phase_peak_buffer.clear();
  for (Hid* handle : {&steps, &events, &tags, &phase_peaks, &file})
    handle->reset();  // the file last: it holds the datasets' data
  H5Eclear2(H5E_DEFAULT);
}

TraceWriter::TraceWriter(const std::string& path, const TraceHeader& header,
                         bool record_memory_events)
    : impl_(std::make_unique<Impl>()) {
  hdf5::QuietHdf5Errors quiet;
  Impl& w = *impl_;
  w.path = path;
  w.record_events = record_memory_events;
  w.types = trace_detail::make_trace_types();
  w.file = create_file(path);
  try {
    // The attributes (the config is the big one) and the empty tables'
    // headers; no chunk is allocated until rows arrive.
    const uint64_t header_bytes = kMetadataSlack + header.config_toml.size() +
                                  header.run_name.size() + header.device.size() +
                                  header.outside_allocator.size();
    w.reserved_write(header_bytes, [&] {
      w.write_header(header);
      // Every table is unfiltered: see create_table for why compression and
      // crash consistency do not mix here. Chunk sizes are in schema.h.
      using hdf5::create_table;
      w.steps = create_table(w.file.get(), trace_detail::kStepsTable, w.types.step_file.get(),
                             trace_detail::kStepChunkRows, path);
      Hid memory(check_internal(H5Gcreate2(w.file.get(), trace_detail::kMemoryGroup, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT),
                                path, "cannot create /memory"));
      w.events = create_table(w.file.get(), trace_detail::kEventsTable, w.types.event_file.get(),
                              trace_detail::kEventChunkRows, path);
      const int8_t recorded = record_memory_events ? 1 : 0;
      hdf5::write_scalar_attribute(w.events.get(), "recorded", w.types.boolean.get(), &recorded,
                                   path);
      w.tags = create_table(w.file.get(), trace_detail::kTagsTable, w.types.string.get(),
                            trace_detail::kTagChunkRows, path);
      w.phase_peaks =
          create_table(w.file.get(), trace_detail::kPhasePeaksTable, w.types.phase_peak_file.get(),
                       trace_detail::kPhasePeakChunkRows, path);
      // A run killed before its first step still leaves a readable header
      // (reserved_write ends with H5Fflush).
    });
  } catch (...) {
    // Not yet a trace: close it without writing more, and remove it rather
    // than leave a file that looks like one.
    hdf5::detach_from_disk(w.file.get());
    w.close_handles();
    std::remove(path.c_str());
    throw;
  }
  if (record_memory_events) w.event_buffer.reserve(64 * 1024);
}

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    log::warn(std::string("trace not closed cleanly: ") + e.what());
  } catch (...) {
    log::warn("trace not closed cleanly: unknown error");
  }
}

void TraceWriter::on_memory_event(const MemoryEvent& event) {
  Impl& w = *impl_;
  if (w.record_events && w.file.valid()) w.event_buffer.push_back(event);
}

void TraceWriter::append_step(const StepRecord& step,
                              const std::vector<PhasePeakRecord>& phase_peaks) {
  Impl& w = *impl_;
  if (w.failure) return;  // the next flush() reports the failure again
  HR_CHECK(w.file.valid(), w.path + ": append_step after close");
  w.step_buffer.push_back(trace_detail::StepRow{
      .step = step.step,
      .loss = step.loss,
      .grad_norm = step.grad_norm,
      .lr = step.lr,
      .tokens = step.tokens,
      .padded_tokens = step.padded_tokens,
      .micro_batches = step.micro_batches,
      .longest_sample = step.longest_sample,
      .peak_allocated = step.peak_allocated,
      .peak_reserved = step.peak_reserved,
      .step_seconds = step.step_seconds,
      .tokens_per_second = step.tokens_per_second,
      .skipped = static_cast<int8_t>(step.skipped ? 1 : 0),
      .truncated_samples = step.truncated_samples,
      .padding_fraction = step.padding_fraction,
      .loss_scale = step.loss_scale,
  });
  for (const PhasePeakRecord& peak : phase_peaks)
    w.phase_peak_buffer.push_back({peak.step, peak.phase, peak.peak_allocated, peak.peak_reserved});
}

void TraceWriter::flush(const std::vector<std::string>& tags) {
  Impl& w = *impl_;
  w.throw_if_failed();
  HR_CHECK(w.file.valid(), w.path + ": flush after close");
  hdf5::QuietHdf5Errors quiet;
  w.or_poison([&] { w.commit(&tags); });
}

void TraceWriter::write_oom(const Postmortem& pm) {
  Impl& w = *impl_;
  w.throw_if_failed();
  HR_CHECK(w.file.valid(), w.path + ": write_oom after close");
  HR_CHECK(!w.oom_written, w.path + ": a second OOM postmortem for the same trace");
  hdf5::QuietHdf5Errors quiet;
  // The postmortem is written and flushed on its own, before the buffered
  // rows: a group, its attributes and two one-chunk tables.
  const uint64_t oom_bytes = kMetadataSlack + pm.tag.size() + pm.description.size() +
                             pm.source.size() + 16 * H5Tget_size(w.types.top_block_file.get()) +
                             kNumCategories * H5Tget_size(w.types.live_file.get()) + 4096 +
                             64 * pm.largest_live.size();
  w.or_poison([&] {
    w.reserved_write(oom_bytes, [&] { w.write_oom_group(pm); });
    w.oom_written = true;
    w.commit(nullptr);
  });
}

void TraceWriter::write_collective_timeout(const std::string& message) {
  Impl& w = *impl_;
  w.throw_if_failed();
  HR_CHECK(w.file.valid(), w.path + ": write_collective_timeout after close");
  hdf5::QuietHdf5Errors quiet;
  w.or_poison([&] {
    w.reserved_write(kMetadataSlack + message.size(), [&] {
      Hid group(check_internal(H5Gcreate2(w.file.get(), trace_detail::kCollectiveTimeoutGroup,
                                          H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               w.path, "cannot create /collective_timeout"));
      hdf5::write_string_attribute(group.get(), "message", message, w.path);
    });
    w.commit(nullptr);
  });
}

void TraceWriter::Impl::write_oom_group(const Postmortem& pm) {
  Impl& w = *this;
  using hdf5::write_scalar_attribute;
  using hdf5::write_string_attribute;

  Hid oom(check_internal(
      H5Gcreate2(w.file.get(), trace_detail::kOomGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      path, "cannot create /oom"));
  hid_t g = oom.get();
  write_scalar_attribute(g, "requested_bytes", H5T_NATIVE_UINT64, &pm.requested_bytes, path);
  write_scalar_attribute(g, "rounded_bytes", H5T_NATIVE_UINT64, &pm.rounded_bytes, path);
  write_scalar_attribute(g, "segment_bytes", H5T_NATIVE_UINT64, &pm.segment_bytes, path);
  write_string_attribute(g, "tag", pm.tag, path);
  // Category and phase as their names: an attribute is read one at a time,
  // and a string needs no enum lookup in h5py or h5dump.
  write_string_attribute(g, "category", std::string(name_of(pm.category)), path);
  write_string_attribute(g, "phase", std::string(name_of(pm.phase)), path);
  write_scalar_attribute(g, "layer", H5T_NATIVE_INT32, &pm.layer, path);
  write_scalar_attribute(g, "step", H5T_NATIVE_INT64, &pm.step, path);
  write_string_attribute(g, "description", pm.description, path);
  write_scalar_attribute(g, "allocated", H5T_NATIVE_UINT64, &pm.allocated, path);
  write_scalar_attribute(g, "reserved", H5T_NATIVE_UINT64, &pm.reserved, path);
  write_scalar_attribute(g, "capacity", H5T_NATIVE_UINT64, &pm.capacity, path);
  write_string_attribute(g, "source", pm.source, path);
  const int8_t capacity_limited = pm.capacity_limited ? 1 : 0;
  write_scalar_attribute(g, "capacity_limited", w.types.boolean.get(), &capacity_limited, path);
  // Only where the source had the driver's figures (cuda): the traces of
  // cpu and meta runs keep their attributes as before.
  if (pm.device_total != 0) {
    write_scalar_attribute(g, "device_free", H5T_NATIVE_UINT64, &pm.device_free, path);
    write_scalar_attribute(g, "device_total", H5T_NATIVE_UINT64, &pm.device_total, path);
  }

  std::vector<trace_detail::TopBlockRow> top;
  top.reserve(pm.largest_live.size());
  for (const LiveBlock& b : pm.largest_live)
    top.push_back({b.bytes, b.tag.c_str(), b.category, b.phase, b.layer, b.step});
  Hid top_table = hdf5::create_table(w.file.get(), trace_detail::kTopBlocksTable,
                                     w.types.top_block_file.get(), 16, path);
  append_rows(top_table.get(), w.types.top_block_mem.get(), top.data(), 0, top.size(), path,
              trace_detail::kTopBlocksTable);

  std::vector<trace_detail::LiveRow> live;
  for (Category c : kAllCategories)
    live.push_back({c, pm.live_by_category[static_cast<int>(c)]});
  Hid live_table = hdf5::create_table(w.file.get(), trace_detail::kLiveByCategoryTable,
                                      w.types.live_file.get(), kNumCategories, path);
  append_rows(live_table.get(), w.types.live_mem.get(), live.data(), 0, live.size(), path,
              trace_detail::kLiveByCategoryTable);
}

void TraceWriter::close() {
  Impl& w = *impl_;
  if (!w.file.valid()) return;  // closed, or closed by a failed write
  hdf5::QuietHdf5Errors quiet;
  // A failed commit closes the file itself (or_poison) and throws.
  w.or_poison([&] { w.commit(nullptr); });
  bool closed = true;
  for (Hid* handle : {&w.steps, &w.events, &w.tags, &w.phase_peaks, &w.file})
    closed = handle->reset() && closed;  // the file last: it holds the datasets' data
  if (!closed) hdf5::fail_internal(w.path, "cannot close trace file");
}

const std::string& TraceWriter::path() const {
  return impl_->path;
}

void TraceWriter::renamed(const std::string& path) {
  impl_->path = path;
}
bool TraceWriter::records_memory_events() const {
  return impl_->record_events;
}
bool TraceWriter::is_open() const {
  return impl_->file.valid();
}
uint64_t TraceWriter::events_written() const {
  return impl_->event_rows;
}
size_t TraceWriter::events_buffered() const {
  return impl_->event_buffer.size();
}
uint64_t TraceWriter::steps_written() const {
  return impl_->step_rows;
}

}  // namespace headroom
