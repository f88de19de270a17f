// Files that are not (or no longer) headroom traces are refused with a
// UsageError that names the path and the reason, never a crash or an HDF5
// error stack on stderr.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include "trace/reader.h"
#include "trace/records.h"
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

// Not an error: a trace written before /steps had padding_fraction (and
// loss_scale) reads with every other column intact, the fraction unknown
// (NaN) and the scale 1.
TEST(TraceErrors, StepsWithoutPaddingFractionReadAsUnknown) {
  TempDir dir;
  const std::string path = dir.file("old.h5");
  { TraceWriter writer(path, sample_header(), true); }
  struct OldRow {
    int64_t step;
    double loss, grad_norm, lr;
    int64_t tokens, padded_tokens, micro_batches, longest_sample;
    uint64_t peak_allocated, peak_reserved;
    double step_seconds, tokens_per_second;
    int8_t skipped;
    int64_t truncated_samples;
  };
  const OldRow rows[2] = {{0, 9.5, 1.5, 1e-4, 100, 128, 2, 64, 1000, 2000, 0.5, 256.0, 0, 1},
                          {1, 9.0, 1.25, 2e-4, 110, 128, 2, 60, 1001, 2001, 0.25, 512.0, 1, 0}};
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Ldelete(file, "/steps", H5P_DEFAULT), 0);
  hid_t boolean = H5Tenum_create(H5T_NATIVE_INT8);
  const int8_t no = 0, yes = 1;
  H5Tenum_insert(boolean, "FALSE", &no);
  H5Tenum_insert(boolean, "TRUE", &yes);
  hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(OldRow));
#define OLD_MEMBER(name, t) H5Tinsert(type, #name, offsetof(OldRow, name), t)
  OLD_MEMBER(step, H5T_NATIVE_INT64);
  OLD_MEMBER(loss, H5T_NATIVE_DOUBLE);
  OLD_MEMBER(grad_norm, H5T_NATIVE_DOUBLE);
  OLD_MEMBER(lr, H5T_NATIVE_DOUBLE);
  OLD_MEMBER(tokens, H5T_NATIVE_INT64);
  OLD_MEMBER(padded_tokens, H5T_NATIVE_INT64);
  OLD_MEMBER(micro_batches, H5T_NATIVE_INT64);
  OLD_MEMBER(longest_sample, H5T_NATIVE_INT64);
  OLD_MEMBER(peak_allocated, H5T_NATIVE_UINT64);
  OLD_MEMBER(peak_reserved, H5T_NATIVE_UINT64);
  OLD_MEMBER(step_seconds, H5T_NATIVE_DOUBLE);
  OLD_MEMBER(tokens_per_second, H5T_NATIVE_DOUBLE);
  OLD_MEMBER(skipped, boolean);
  OLD_MEMBER(truncated_samples, H5T_NATIVE_INT64);
#undef OLD_MEMBER
  const hsize_t count = 2;
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t steps = H5Dcreate2(file, "/steps", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(steps, 0);
  ASSERT_GE(H5Dwrite(steps, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
  H5Dclose(steps);
  H5Sclose(space);
  H5Tclose(type);
  H5Tclose(boolean);
  H5Fclose(file);

  const std::vector<StepRecord> read = TraceReader::open(path).steps();
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1].step, 1);
  EXPECT_EQ(read[1].tokens, 110);
  EXPECT_EQ(read[1].padded_tokens, 128);
  EXPECT_TRUE(read[1].skipped);
  EXPECT_EQ(read[0].truncated_samples, 1);
  EXPECT_EQ(read[0].tokens_per_second, 256.0);
  EXPECT_TRUE(std::isnan(read[0].padding_fraction));
  EXPECT_TRUE(std::isnan(read[1].padding_fraction));
  EXPECT_EQ(read[0].loss_scale, 1.0) << "before loss scaling, nothing was scaled";
}

}  // namespace
}  // namespace headroom
