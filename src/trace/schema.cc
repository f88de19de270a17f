#include "trace/schema.h"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "util/error.h"

namespace headroom::trace_detail {

using hdf5::Hid;

namespace {

constexpr const char* kTypes = "(trace schema)";

hid_t checked(hid_t id, const char* what) {
  return hdf5::check_internal(id, kTypes, what);
}

// An enum whose names are what users see in h5py (h5py.check_enum_dtype) and
// h5dump; values are the C++ enumerators, so rows need no translation.
template <typename Enum, size_t N>
Hid make_enum(hid_t base, const std::array<Enum, N>& values, std::string_view (*name)(Enum)) {
  Hid type(checked(H5Tenum_create(base), "H5Tenum_create"));
  for (Enum value : values) {
    auto raw = static_cast<std::underlying_type_t<Enum>>(value);
    std::string text(name(value));
    checked(H5Tenum_insert(type.get(), text.c_str(), &raw), "H5Tenum_insert");
  }
  return type;
}

std::string_view action_name(MemoryAction action) {
  switch (action) {
    case MemoryAction::kAlloc:
      return "alloc";
    case MemoryAction::kFree:
      return "free";
    case MemoryAction::kSegmentAlloc:
      return "segment_alloc";
    case MemoryAction::kSegmentFree:
      return "segment_free";
    case MemoryAction::kOom:
      return "oom";
  }
  return "?";
}
std::string_view category_name(Category c) {
  return name_of(c);
}
std::string_view phase_name(Phase p) {
  return name_of(p);
}

Hid make_bool() {
  // h5py's own encoding of numpy bool, so `skipped` reads back as bool.
  Hid type(checked(H5Tenum_create(H5T_NATIVE_INT8), "H5Tenum_create"));
  int8_t no = 0, yes = 1;
  checked(H5Tenum_insert(type.get(), "FALSE", &no), "H5Tenum_insert");
  checked(H5Tenum_insert(type.get(), "TRUE", &yes), "H5Tenum_insert");
  return type;
}

// Builds a compound from (name, offset, type) members; `packed` drops the
// struct's padding for the on-disk type.
struct Member {
  const char* name;
  size_t offset;
  hid_t type;
};

Hid make_compound(size_t size, std::initializer_list<Member> members) {
  Hid type(checked(H5Tcreate(H5T_COMPOUND, size), "H5Tcreate"));
  for (const Member& m : members)
    checked(H5Tinsert(type.get(), m.name, m.offset, m.type), "H5Tinsert");
  return type;
}

Hid packed_copy(const Hid& mem_type) {
  Hid type(checked(H5Tcopy(mem_type.get()), "H5Tcopy"));
  checked(H5Tpack(type.get()), "H5Tpack");
  return type;
}

}  // namespace

TraceTypes make_trace_types() {
  TraceTypes t;
  constexpr std::array<MemoryAction, 5> kActions = {MemoryAction::kAlloc, MemoryAction::kFree,
                                                    MemoryAction::kSegmentAlloc,
                                                    MemoryAction::kSegmentFree, MemoryAction::kOom};
  t.action = make_enum(H5T_NATIVE_UINT8, kActions, action_name);
  t.category = make_enum(H5T_NATIVE_UINT8, kAllCategories, category_name);
  t.phase = make_enum(H5T_NATIVE_UINT8, kAllPhases, phase_name);
  t.boolean = make_bool();
  t.string = hdf5::utf8_string_type(kTypes);

  // The events table is MemoryEvent itself in memory: on_memory_event only
  // copies the struct, and H5Dwrite packs it.
  t.event_mem = make_compound(sizeof(MemoryEvent),
                              {
                                  {"seq", offsetof(MemoryEvent, seq), H5T_NATIVE_UINT64},
                                  {"t_ns", offsetof(MemoryEvent, t_ns), H5T_NATIVE_INT64},
                                  {"step", offsetof(MemoryEvent, step), H5T_NATIVE_INT64},
                                  {"action", offsetof(MemoryEvent, action), t.action.get()},
                                  {"bytes", offsetof(MemoryEvent, bytes), H5T_NATIVE_UINT64},
                                  {"address", offsetof(MemoryEvent, address), H5T_NATIVE_UINT64},
                                  {"category", offsetof(MemoryEvent, category), t.category.get()},
                                  {"tag_id", offsetof(MemoryEvent, tag_id), H5T_NATIVE_UINT32},
                                  {"phase", offsetof(MemoryEvent, phase), t.phase.get()},
                                  {"layer", offsetof(MemoryEvent, layer), H5T_NATIVE_INT32},
                              });
  t.event_file = packed_copy(t.event_mem);

  // Every member but padding_fraction and loss_scale, which newer headrooms added.
  const std::initializer_list<Member> step_members = {
      {"step", offsetof(StepRow, step), H5T_NATIVE_INT64},
      {"loss", offsetof(StepRow, loss), H5T_NATIVE_DOUBLE},
      {"grad_norm", offsetof(StepRow, grad_norm), H5T_NATIVE_DOUBLE},
      {"lr", offsetof(StepRow, lr), H5T_NATIVE_DOUBLE},
      {"tokens", offsetof(StepRow, tokens), H5T_NATIVE_INT64},
      {"padded_tokens", offsetof(StepRow, padded_tokens), H5T_NATIVE_INT64},
      {"micro_batches", offsetof(StepRow, micro_batches), H5T_NATIVE_INT64},
      {"longest_sample", offsetof(StepRow, longest_sample), H5T_NATIVE_INT64},
      {"peak_allocated", offsetof(StepRow, peak_allocated), H5T_NATIVE_UINT64},
      {"peak_reserved", offsetof(StepRow, peak_reserved), H5T_NATIVE_UINT64},
      {"step_seconds", offsetof(StepRow, step_seconds), H5T_NATIVE_DOUBLE},
      {"tokens_per_second", offsetof(StepRow, tokens_per_second), H5T_NATIVE_DOUBLE},
      {"skipped", offsetof(StepRow, skipped), t.boolean.get()},
      {"truncated_samples", offsetof(StepRow, truncated_samples), H5T_NATIVE_INT64},
  };
  t.step_mem_before_padding = make_compound(sizeof(StepRow), step_members);
  t.step_mem_before_loss_scale = make_compound(sizeof(StepRow), step_members);
  checked(H5Tinsert(t.step_mem_before_loss_scale.get(), "padding_fraction",
                    offsetof(StepRow, padding_fraction), H5T_NATIVE_DOUBLE),
          "H5Tinsert");
  t.step_mem = make_compound(sizeof(StepRow), step_members);
  checked(H5Tinsert(t.step_mem.get(), "padding_fraction", offsetof(StepRow, padding_fraction),
                    H5T_NATIVE_DOUBLE),
          "H5Tinsert");
  checked(
      H5Tinsert(t.step_mem.get(), "loss_scale", offsetof(StepRow, loss_scale), H5T_NATIVE_DOUBLE),
      "H5Tinsert");
  t.step_file = packed_copy(t.step_mem);

  t.phase_peak_mem = make_compound(
      sizeof(PhasePeakRow),
      {
          {"step", offsetof(PhasePeakRow, step), H5T_NATIVE_INT64},
          {"phase", offsetof(PhasePeakRow, phase), t.phase.get()},
          {"peak_allocated", offsetof(PhasePeakRow, peak_allocated), H5T_NATIVE_UINT64},
          {"peak_reserved", offsetof(PhasePeakRow, peak_reserved), H5T_NATIVE_UINT64},
      });
  t.phase_peak_file = packed_copy(t.phase_peak_mem);

  t.top_block_mem = make_compound(
      sizeof(TopBlockRow), {
                               {"bytes", offsetof(TopBlockRow, bytes), H5T_NATIVE_UINT64},
                               {"tag", offsetof(TopBlockRow, tag), t.string.get()},
                               {"category", offsetof(TopBlockRow, category), t.category.get()},
                               {"phase", offsetof(TopBlockRow, phase), t.phase.get()},
                               {"layer", offsetof(TopBlockRow, layer), H5T_NATIVE_INT32},
                               {"step", offsetof(TopBlockRow, step), H5T_NATIVE_INT64},
                           });
  t.top_block_file = packed_copy(t.top_block_mem);

  t.live_mem = make_compound(sizeof(LiveRow),
                             {
                                 {"category", offsetof(LiveRow, category), t.category.get()},
                                 {"bytes", offsetof(LiveRow, bytes), H5T_NATIVE_UINT64},
                             });
  t.live_file = packed_copy(t.live_mem);
  return t;
}

}  // namespace headroom::trace_detail
