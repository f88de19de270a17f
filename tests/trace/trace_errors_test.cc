// Files that are not (or no longer) headroom traces are refused with a
// UsageError that names the path and the reason, never a crash or an HDF5
// error stack on stderr.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "trace/reader.h"
#include "trace/writer.h"
#include "trace_test_util.h"
#include "util/error.h"

namespace headroom {
namespace {

using testing::sample_header;
using testing::TempDir;

// The UsageError message from opening `path`, or a test failure.
std::string open_error(const std::string& path) {
  try {
    TraceReader::open(path);
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UsageError: " << e.what();
    return "";
  }
  ADD_FAILURE() << path << " opened as a trace";
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "\"" << text << "\" lacks \"" << part << "\"";
}

TEST(TraceErrors, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nope.h5");
  std::string message = open_error(path);
  expect_contains(message, path + ": cannot open trace");
  expect_contains(message, "No such file");
}

TEST(TraceErrors, Directory) {
  TempDir dir;
  const std::string path = dir.file("");
  expect_contains(open_error(path), path + ": cannot open trace");
}

TEST(TraceErrors, TextFile) {
  TempDir dir;
  const std::string path = dir.file("notes.h5");
  std::ofstream(path) << "this is not HDF5\n";
  std::string message = open_error(path);
  expect_contains(message, path + ": not a headroom trace (");
  expect_contains(message, "not an HDF5 file");
}

TEST(TraceErrors, Hdf5FileThatIsNotATrace) {
  TempDir dir;
  const std::string path = dir.file("dataset.h5");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Fclose(file), 0);
  expect_contains(open_error(path), path + ": not a headroom trace (no attribute schema_version");
}

TEST(TraceErrors, MissingTable) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  { TraceWriter writer(path, sample_header(), true); }
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Ldelete(file, "/memory/phase_peaks", H5P_DEFAULT), 0);
  ASSERT_GE(H5Fclose(file), 0);
  expect_contains(open_error(path), path + ": not a headroom trace (no /memory/phase_peaks)");
}

TEST(TraceErrors, NewerSchema) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  { TraceWriter writer(path, sample_header(), true); }
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  hid_t attr = H5Aopen(file, "schema_version", H5P_DEFAULT);
  ASSERT_GE(attr, 0);
  int32_t version = kTraceSchemaVersion + 1;
  ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT32, &version), 0);
  H5Aclose(attr);
  ASSERT_GE(H5Fclose(file), 0);
  std::string message = open_error(path);
  expect_contains(message, path + ": trace schema version 2 is newer");
}

TEST(TraceErrors, TruncatedTrace) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  {
    TraceWriter writer(path, sample_header(), true);
    for (uint64_t seq = 0; seq < 20'000; ++seq)
      writer.on_memory_event(testing::make_event(seq, 0));
    writer.flush({"a", "b", "c"});
  }
  // A copy cut short, as by a full disk or an interrupted scp.
  auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  std::string message = open_error(path);
  expect_contains(message, path + ": not a headroom trace (HDF5 cannot open it: ");
}

TEST(TraceErrors, CreateInMissingFolder) {
  TempDir dir;
  const std::string path = dir.file("no/such/folder/trace.rank0.h5");
  try {
    TraceWriter writer(path, sample_header(), true);
    FAIL() << "created " << path;
  } catch (const UsageError& e) {
    expect_contains(e.what(), path + ": cannot create trace file: No such file or directory");
  }
}

}  // namespace
}  // namespace headroom
