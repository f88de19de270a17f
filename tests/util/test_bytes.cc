#include <gtest/gtest.h>

#include "util/bytes.h"

namespace headroom {
namespace {

TEST(ParseBytes, AcceptsBinaryDecimalAndPlainForms) {
  EXPECT_EQ(parse_bytes("80GiB"), 80 * kGiB);
  EXPECT_EQ(parse_bytes("80GB"), 80'000'000'000ull);
  EXPECT_EQ(parse_bytes("512MiB"), 512 * kMiB);
  EXPECT_EQ(parse_bytes("1.5GiB"), 3 * kGiB / 2);
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("4096B"), 4096u);
  EXPECT_EQ(parse_bytes(" 2 MiB "), 2 * kMiB);
  EXPECT_EQ(parse_bytes("1kB"), 1000u);
  EXPECT_EQ(parse_bytes("3T"), 3 * kTiB);
  EXPECT_EQ(parse_bytes("0"), 0u);
}

TEST(ParseBytes, RejectsEverythingElse) {
  for (const char* bad : {"", "GiB", "80 gigs", "-1GiB", "1.5", "1.5B", "1..5GiB", ".5GiB", "5.GiB",
                          "80gib", "99999999999999999999", "20000000TiB", "1e9"})
    EXPECT_FALSE(parse_bytes(bad).has_value()) << bad;
}

// 10000000.5TB went through llround's long long and came out 2^63.
TEST(ParseBytes, FractionsAreExactUpToTheLargestUint64) {
  EXPECT_EQ(parse_bytes("10000000.5TB"), 10'000'000'500'000'000'000ull);
  EXPECT_EQ(parse_bytes("18446744.073709551615TB"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("16777215.999999999999TiB"), UINT64_MAX);  // 2^64 - 2^40 + (2^40 - 1)
  EXPECT_EQ(parse_bytes("0.5KiB"), 512u);
  EXPECT_EQ(parse_bytes("0.0001KiB"), 0u);  // 0.1 B rounds to 0
  EXPECT_EQ(parse_bytes("1.0000000000000000000000001GiB"), kGiB);
}

TEST(ParseBytes, RefusesWhatDoesNotFitOrIsNotANumber) {
  for (const char* bad : {"18446744.073709551616TB",
                          "20000000.5TB",
                          "16777216TiB",
                          "18446744073709551616",
                          "-1.5GiB",
                          "-0",
                          "+1GiB",
                          "nan",
                          "NaNGiB",
                          "inf",
                          "infGiB",
                          "1e400GiB",
                          "1e3GiB",
                          "0x10",
                          "1.5GiBx",
                          "1.5 GiB junk",
                          "1.5GiB\n2",
                          "1,5GiB",
                          " ",
                          "1 . 5GiB"})
    EXPECT_FALSE(parse_bytes(bad).has_value()) << bad;
}

TEST(FormatBytes, PicksTheLargestUnitKeepingOneDecimal) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(970 * kMiB), "970.0 MiB");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(format_bytes_exact(2 * kMiB), "2.0 MiB (2097152 B)");
  EXPECT_EQ(format_bytes_exact(100), "100 B");
}

}  // namespace
}  // namespace headroom
