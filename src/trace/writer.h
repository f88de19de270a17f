// TraceWriter: one rank's HDF5 trace (schema v1, docs/trace.md), written
// incrementally so that a run killed at any moment leaves a file that opens
// and holds every step that was flushed.
//
// How that is guaranteed:
//  - Every HDF5 call that modifies the file happens inside flush(),
//    write_oom() or close(); each ends with H5Fflush, which writes the
//    library's cached metadata and chunks, so the bytes the OS holds form a
//    complete, consistent file. Between those calls nothing touches the file:
//    on_memory_event() and append_step() only append to vectors in memory.
//    A SIGKILL between flushes therefore leaves the file exactly as the last
//    flush left it; what was buffered since is lost.
//  - A kill *inside* a flush loses at most that flush. No table is
//    compressed, so a chunk, once placed, never moves and rewriting the last
//    one cannot clobber rows an earlier flush made durable (with gzip it
//    could: see hdf5::create_table). And flush() writes events, tags
//    and phase peaks, H5Fflush, and only then the step rows, H5Fflush: a
//    step that is in the file has its memory records in the file.
//    tests/trace/trace_crash_test.cc kills writers at random moments.
//  - The file uses HDF5's default (1.8-compatible) format, not libver latest
//    or SWMR: its superblock has no "open for writing" flag, so h5py, h5dump
//    and TraceReader open a file whose writer died without closing it.
//  - File locking is turned off for the writer, so a trace can be inspected
//    (read-only) while the run is alive; between flushes it is consistent.
//  - It survives the process dying, not the machine: there is no fsync.
//  - A kill inside the constructor (before its first H5Fflush) can leave a
//    file that is not yet a trace; no step had run. A constructor that fails
//    (a full disk) removes the file it created.
//  - A full disk is found before HDF5 writes: each flush first reserves the
//    room it can need (hdf5::reserve_space), so HDF5 does not fail halfway
//    through a flush, which it could not undo. When a write fails anyway,
//    the writer closes the file without writing again (what HDF5 still
//    holds goes to memory: hdf5::detach_from_disk), so the file keeps every
//    step flushed before the failure, and neither a retry, the destructor
//    nor HDF5's shutdown at exit touches it again.
//
// Not thread-safe: driven from the step loop, like the allocator it observes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memory/event.h"
#include "memory/postmortem.h"
#include "trace/records.h"

namespace headroom {

class TraceWriter : public MemoryObserver {
 public:
  // Creates `path` (truncating an existing file) and writes the root
  // attributes and the empty tables; on failure nothing is left at `path`. With
  // record_memory_events false, events are ignored and /memory/events stays empty (its `recorded`
  // attribute says so, so readers can tell "off" from "nothing happened"). Throws UsageError
  // "<path>: cannot create trace file: <reason>" (or
  // "...: No space left on device (disk full)").
  TraceWriter(const std::string& path, const TraceHeader& header, bool record_memory_events);
  ~TraceWriter() override;  // close(), swallowing errors
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Hot path: copies the event into a buffer (64 B each until the next
  // flush, so flush at least every few steps). No HDF5 call. Ignored when
  // memory events are off or after close().
  void on_memory_event(const MemoryEvent& event) override;

  // Buffers one step and the phase peaks measured during it. No HDF5 call.
  void append_step(const StepRecord& step, const std::vector<PhasePeakRecord>& phase_peaks);

  // Writes everything buffered: events, the tags in `tags` not yet written,
  // steps, phase peaks; then H5Fflush. `tags` is the allocator's whole tag
  // table (Allocator::tags()): it only grows, so tag i keeps id i across
  // flushes. Passing a shorter table than last time is a bug (InternalError).
  // A full disk (or quota, or RLIMIT_FSIZE) throws UsageError "<path>:
  // cannot write: No space left on device (disk full)", another failed write
  // InternalError "<path>: ...". Either closes the file, which keeps every
  // step of the earlier flushes; a later flush() or write_oom() throws the
  // same error again, append_step() and on_memory_event() ignore their input.
  void flush(const std::vector<std::string>& tags);

  // Writes /oom (the postmortem) and everything buffered, then H5Fflush.
  // The tag table is not updated here: call flush(allocator.tags()) first so
  // the events leading to the OOM resolve their tags. At most once per file.
  void write_oom(const Postmortem& postmortem);

  // Writes /collective_timeout (its "message" attribute: the collective a
  // rank waited for in vain, naming the group, step and phase) and
  // everything buffered, then H5Fflush. At most once per file; throws like
  // flush().
  void write_collective_timeout(const std::string& message);

  // Writes what is buffered (tags as of the last flush) and closes the file.
  // Idempotent; does nothing after a failed write (which closed the file and
  // was reported then). Throws like flush(); the destructor swallows instead.
  void close();

  const std::string& path() const;
  // The file was moved to `path` while open (a run's staged trace taking its
  // final name): path() and every later error name it from now on.
  void renamed(const std::string& path);
  bool records_memory_events() const;
  bool is_open() const;
  uint64_t events_written() const;  // rows in /memory/events so far
  size_t events_buffered() const;   // events waiting for the next flush
  uint64_t steps_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom
