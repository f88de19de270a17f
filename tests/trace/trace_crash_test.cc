// A run that is SIGKILLed (OOM killer, Slurm timeout, scancel -s KILL) leaves a
// trace that opens — in TraceReader, h5dump and h5py — and holds exactly the
// steps that were flushed, none of what was still buffered.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_util/source_tree.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"

namespace headroom {
namespace {

using testing::kPython;
using testing::make_event;
using testing::make_step;
using testing::run_command;
using testing::sample_header;
using testing::TempDir;

constexpr int kFlushedSteps = 6;
constexpr uint64_t kEventsPerStep = 3000;
// Where superblock version 0 keeps the end-of-allocation address: after the
// signature (8), eight version and size bytes, two B-tree K values (2 + 2),
// the consistency flags (4), the base and free-space addresses (8 + 8).
constexpr off_t kSuperblockEoaOffset = 40;

std::string tag_for_step(int step) {
  return "block." + std::to_string(step) + ".mlp.up";
}

// Whether kPython can import data_tools/headroom_trace.py (h5py, pandas).
bool have_headroom_trace_py() {
  return run_command(std::string(kPython) + " -c 'import h5py, pandas'").exit_code == 0;
}

// Runs the Python statements `code` (no single quotes) with
// data_tools/headroom_trace.py imported as `ht` and the trace's path in
// `path`.
testing::CommandResult run_with_headroom_trace_py(const std::string& code,
                                                  const std::string& path) {
  return run_command(std::string(kPython) +
                     " -c 'import sys; sys.path.insert(0, sys.argv[1]); import headroom_trace "
                     "as ht; path = sys.argv[2]; " +
                     code + "' '" + testing::source_dir() + "/data_tools' '" + path + "'");
}

// A forked child running `child(path, write_end)`, which never returns.
struct Child {
  pid_t pid = -1;
  int read_end = -1;  // the pipe the child writes to; the caller closes it
};
template <typename Body>
Child fork_child(const std::string& path, Body&& child) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child(path, fds[1]);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// The child: a stand-in training loop. Never returns.
[[noreturn]] void run_and_wait_to_be_killed(const std::string& path, int ready_fd) {
  try {
    TraceWriter writer(path, sample_header(), true);
    std::vector<std::string> tags;
    uint64_t seq = 0;
    for (int step = 0; step < kFlushedSteps; ++step) {
      tags.push_back(tag_for_step(step));
      for (uint64_t i = 0; i < kEventsPerStep; ++i)
        writer.on_memory_event(make_event(seq++, step));
      writer.append_step(make_step(step), {{step, Phase::kForward, 10, 20}});
      writer.flush(tags);
    }
    // Work of the step in progress: buffered, never flushed.
    tags.push_back("never.flushed");
    writer.append_step(make_step(kFlushedSteps), {{kFlushedSteps, Phase::kBackward, 1, 2}});
    for (uint64_t i = 0; i < kEventsPerStep; ++i)
      writer.on_memory_event(make_event(seq++, kFlushedSteps));
    char ready = 'k';
    if (write(ready_fd, &ready, 1) != 1) _exit(10);
    // Keep the hot path busy until the parent's SIGKILL lands.
    for (;;) {
      writer.on_memory_event(make_event(seq++, kFlushedSteps));
      if (writer.events_buffered() > 2'000'000) pause();
    }
  } catch (...) {
    _exit(11);
  }
}

TEST(TraceCrash, SigkilledWriterLeavesEveryFlushedStep) {
  TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  const auto [child, read_end] = fork_child(path, run_and_wait_to_be_killed);
  ASSERT_GT(child, 0);

  pollfd ready{read_end, POLLIN, 0};
  int polled = poll(&ready, 1, 60'000);
  char byte = 0;
  bool signalled = polled == 1 && read(read_end, &byte, 1) == 1 && byte == 'k';
  close(read_end);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(signalled) << "the child did not reach the kill point; exit status "
                         << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  TraceReader reader = TraceReader::open(path);
  EXPECT_EQ(reader.header().run_name, sample_header().run_name);
  std::vector<StepRecord> steps = reader.steps();
  ASSERT_EQ(steps.size(), static_cast<size_t>(kFlushedSteps));
  for (int s = 0; s < kFlushedSteps; ++s)
    EXPECT_EQ(steps[s], make_step(s));
  EXPECT_EQ(reader.num_events(), kFlushedSteps * kEventsPerStep);
  std::vector<std::string> tags = reader.tags();
  ASSERT_EQ(tags.size(), static_cast<size_t>(kFlushedSteps));
  EXPECT_EQ(tags.back(), tag_for_step(kFlushedSteps - 1));
  std::vector<PhasePeakRecord> peaks = reader.phase_peaks();
  ASSERT_EQ(peaks.size(), static_cast<size_t>(kFlushedSteps));
  EXPECT_EQ(peaks.back().step, kFlushedSteps - 1);
  std::vector<MemoryEvent> events = reader.events();
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq != i) {
      ADD_FAILURE() << "event " << i << " has seq " << events[i].seq;
      break;
    }
  }

  if (testing::have_h5dump()) {
    testing::CommandResult dump = run_command("h5dump -H '" + path + "'");
    EXPECT_EQ(dump.exit_code, 0) << dump.output;
    EXPECT_NE(dump.output.find("DATASET \"steps\""), std::string::npos) << dump.output;
  } else {
    ADD_FAILURE() << "h5dump is not installed (apt-get install hdf5-tools)";
  }

  if (!testing::have_h5py()) GTEST_SKIP() << kPython << " has no h5py; h5py check skipped";
  testing::CommandResult py =
      run_command(std::string(kPython) +
                  " -c 'import sys, h5py; f = h5py.File(sys.argv[1], \"r\"); "
                  "print(len(f[\"steps\"]), f[\"steps\"][\"step\"].tolist())' '" +
                  path + "'");
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, std::to_string(kFlushedSteps) + " [0, 1, 2, 3, 4, 5]\n");
}

// The child of the test below: a writer that does nothing but flush steps,
// so that most kills land inside a flush, the worst case. Never returns.
[[noreturn]] void flush_forever(const std::string& path, int ready_fd) {
  try {
    TraceWriter writer(path, sample_header(), true);
    std::vector<std::string> tags;
    uint64_t seq = 0;
    for (int step = 0;; ++step) {
      tags.push_back(tag_for_step(step));
      for (int i = 0; i < 2000; ++i)
        writer.on_memory_event(make_event(seq++, step));
      writer.append_step(make_step(step), {{step, Phase::kLoss, 1, 2}});
      writer.flush(tags);
      if (step == 0) {
        char ready = 'k';
        if (write(ready_fd, &ready, 1) != 1) _exit(10);
      }
    }
  } catch (...) {
    _exit(11);
  }
}

// The child of the test below: two flushes, the second allocating a new
// events chunk, then an exit without closing the file. Sends the 8 bytes
// of the superblock's end-of-allocation field as the first flush left them.
[[noreturn]] void flush_twice_then_vanish(const std::string& path, int eoa_fd) {
  try {
    TraceWriter writer(path, sample_header(), true);
    std::vector<std::string> tags;
    uint64_t seq = 0;
    for (int step = 0; step < 2; ++step) {
      // make_event's tag ids run to 2: three tags by the first flush.
      for (int t = step == 0 ? 0 : 3; t <= step + 2; ++t)
        tags.push_back(tag_for_step(t));
      // 20 000 events: the second flush passes the first 16 384-row chunk.
      for (int i = 0; i < 10'000; ++i)
        writer.on_memory_event(make_event(seq++, step));
      writer.append_step(make_step(step), {{step, Phase::kLoss, 1, 2}});
      writer.flush(tags);
      if (step == 0) {
        char eoa[8];
        const int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0 || pread(fd, eoa, sizeof eoa, kSuperblockEoaOffset) != sizeof eoa) _exit(12);
        close(fd);
        if (write(eoa_fd, eoa, sizeof eoa) != sizeof eoa) _exit(10);
      }
    }
    _exit(0);  // no close: the file stays as the second flush left it
  } catch (...) {
    _exit(11);
  }
}

// HDF5 writes the superblock (which records the end of allocation) last in
// a flush, after the chunk indices. A kill between the two leaves indices
// pointing at chunks past the recorded end; this builds that file exactly,
// by putting the first flush's end back, and reads it. A plain read-only
// HDF5 open refuses every table that grew ("addr overflow"), the finished
// steps' rows included; the kill test below hit it about once in 100 runs.
TEST(TraceCrash, ASuperblockOlderThanTheIndicesLosesNoRow) {
  TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  const auto [child, read_end] = fork_child(path, flush_twice_then_vanish);
  ASSERT_GT(child, 0);
  char first_eoa[8] = {};
  const bool got = read(read_end, first_eoa, sizeof first_eoa) == sizeof first_eoa;
  close(read_end);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(got && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the writer failed; exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);

  {
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char header[9] = {};
    ASSERT_EQ(pread(fd, header, sizeof header, 0), 9);
    // The field's offset holds for superblock version 0, HDF5's default.
    ASSERT_EQ(header[8], 0) << "the trace's superblock is no longer version 0";
    char last_eoa[8] = {};
    ASSERT_EQ(pread(fd, last_eoa, sizeof last_eoa, kSuperblockEoaOffset), 8);
    uint64_t first = 0, last = 0;
    std::memcpy(&first, first_eoa, 8);  // little-endian, as HDF5 stores it
    std::memcpy(&last, last_eoa, 8);
    ASSERT_LT(first, last) << "the second flush allocated nothing";
    ASSERT_EQ(pwrite(fd, first_eoa, sizeof first_eoa, kSuperblockEoaOffset), 8);
    close(fd);
  }

  TraceReader reader = TraceReader::open(path);
  std::vector<StepRecord> steps = reader.steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1], make_step(1));
  std::vector<MemoryEvent> events = reader.events();
  ASSERT_EQ(events.size(), 20'000u);
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq != i || events[i].bytes != 512 * (i + 1)) {
      ADD_FAILURE() << "event row " << i << " is damaged (seq " << events[i].seq << ")";
      break;
    }
  }
  EXPECT_EQ(reader.tags(), (std::vector<std::string>{tag_for_step(0), tag_for_step(1),
                                                     tag_for_step(2), tag_for_step(3)}));
  EXPECT_EQ(reader.phase_peaks().size(), 2u);

  // data_tools/headroom_trace.py reads it the same way.
  if (!have_headroom_trace_py()) GTEST_SKIP() << kPython << " lacks h5py or pandas";
  testing::CommandResult py = run_with_headroom_trace_py(
      "t = ht.load(path); print(len(t.steps), len(t.events), int(t.events.seq.iloc[-1]))", path);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "2 20000 19999\n");
}

// HDF5 refuses to open a file in SWMR read mode that the process already
// holds open without it; the reader then reads through that handle. (Of a
// closed trace, as here, nothing is lost that way.)
TEST(TraceCrash, ATraceAlreadyOpenWithoutSwmrIsStillRead) {
  TempDir dir;
  const std::string path = dir.file("trace.rank0.h5");
  {
    TraceWriter writer(path, sample_header(), true);
    writer.on_memory_event(make_event(0, 0));
    writer.append_step(make_step(0), {{0, Phase::kLoss, 1, 2}});
    writer.flush({tag_for_step(0)});
  }
  // Without file locking, as the reader: HDF5 refuses differing locking
  // flags in one process too.
  const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  ASSERT_GE(H5Pset_file_locking(access, false, true), 0);
  const hid_t plain = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access);
  H5Pclose(access);
  ASSERT_GE(plain, 0);
  {
    TraceReader reader = TraceReader::open(path);
    EXPECT_EQ(reader.steps().size(), 1u);
    EXPECT_EQ(reader.events().size(), 1u);
  }
  H5Fclose(plain);

  if (!have_headroom_trace_py()) GTEST_SKIP() << kPython << " lacks h5py or pandas";
  testing::CommandResult py = run_with_headroom_trace_py(
      "import h5py; mine = h5py.File(path, \"r\"); t = ht.load(path); "
      "print(len(t.steps), len(t.events))",
      path);
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "1 1\n");
}

// A kill inside a flush may lose that flush, but must never damage what
// earlier flushes wrote: every step row in the file is whole, and its events
// and tags are there. (This is what ruled out gzip on the events table: it
// moves the last chunk at each flush, and random kills then left unreadable
// or wrong event rows in about one file in ten.)
TEST(TraceCrash, KillsInsideFlushesNeverDamageEarlierSteps) {
  constexpr int kKills = 12;
  constexpr uint64_t kEvents = 2000;
  for (int trial = 0; trial < kKills; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    TempDir dir;
    const std::string path = dir.file("trace.rank0.h5");
    const auto [child, read_end] = fork_child(path, flush_forever);
    ASSERT_GT(child, 0);
    pollfd ready{read_end, POLLIN, 0};
    char byte = 0;
    bool started = poll(&ready, 1, 60'000) == 1 && read(read_end, &byte, 1) == 1;
    close(read_end);
    // Spread the kills over the first ~100 flushes.
    if (started) usleep(static_cast<useconds_t>(7'000 + (trial * 37'003) % 150'000));
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(started) << "the writer did not start; exit status "
                         << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    TraceReader reader = TraceReader::open(path);
    std::vector<StepRecord> steps = reader.steps();
    ASSERT_GE(steps.size(), 1u);
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s] != make_step(static_cast<int64_t>(s))) {
        ADD_FAILURE() << "step row " << s << " of " << steps.size() << " is damaged";
        break;
      }
    }
    // The flush that was cut may have left some of its events; the finished
    // steps' events must all be there and intact.
    const uint64_t finished_events = steps.size() * kEvents;
    ASSERT_GE(reader.num_events(), finished_events);
    uint64_t checked = 0;
    reader.for_each_event_batch([&](const std::vector<MemoryEvent>& batch) {
      for (const MemoryEvent& e : batch) {
        if (checked == finished_events) return;
        if (e.seq != checked || e.bytes != 512 * (checked + 1)) {
          ADD_FAILURE() << "event row " << checked << " of a finished step is damaged (seq "
                        << e.seq << ")";
          checked = finished_events;
          return;
        }
        ++checked;
      }
    });
    std::vector<std::string> tags = reader.tags();
    ASSERT_GE(tags.size(), steps.size());
    for (size_t s = 0; s < steps.size(); ++s)
      EXPECT_EQ(tags[s], tag_for_step(static_cast<int>(s)));
  }
}

}  // namespace
}  // namespace headroom
