// The tensor-core fragment layouts of cuda/mma_fragments.h, checked on the
// host (no GPU needed): against the PTX ISA's table for m16n8k16, written out
// again here independently, and through an emulation of one warp of
// cuda/flash_attention_forward_mma.cu's two products with the kernel's own
// shared-memory addressing (K read as B = K^T, V read transposed, P fed to
// P V from S's accumulators), compared with plain matrix products.
#include "mma_fragments.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace headroom::cuda {
namespace {

using Matrix = std::vector<std::vector<double>>;

Matrix zeros(int rows, int cols) {
  return Matrix(static_cast<size_t>(rows), std::vector<double>(static_cast<size_t>(cols), 0.0));
}

// The PTX ISA's table, transcribed apart from mma_fragments.h: groupID =
// lane >> 2, threadID_in_group = lane % 4; A's element ai (i < 8) at row
// groupID (+8 for i in {2,3,6,7}), column 2 threadID_in_group + (i & 1)
// (+8 for i >= 4); B's bi (i < 4) at row 2 threadID_in_group + (i & 1)
// (+8 for i >= 2), column groupID; C's ci at row groupID (+8 for i >= 2),
// column 2 threadID_in_group + (i & 1).
struct PtxTable {
  static std::array<int, 2> a(int lane, int i) {
    const int group = lane >> 2, thread = lane % 4;
    const bool low8 = i == 2 || i == 3 || i == 6 || i == 7;
    return {group + (low8 ? 8 : 0), thread * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
  }
  static std::array<int, 2> b(int lane, int i) {
    return {(lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0), lane >> 2};
  }
  static std::array<int, 2> c(int lane, int i) {
    return {(lane >> 2) + (i >= 2 ? 8 : 0), (lane % 4) * 2 + (i & 1)};
  }
};

TEST(MmaFragments, MatchThePtxTable) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int half = 0; half < 2; ++half) {
        const mma::Cell cell = mma::a_cell(lane, reg, half);
        EXPECT_EQ((std::array<int, 2>{cell.row, cell.col}), PtxTable::a(lane, 2 * reg + half))
            << "A lane " << lane << " register " << reg << " half " << half;
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int half = 0; half < 2; ++half) {
        const mma::Cell cell = mma::b_cell(lane, reg, half);
        EXPECT_EQ((std::array<int, 2>{cell.row, cell.col}), PtxTable::b(lane, 2 * reg + half))
            << "B lane " << lane << " register " << reg << " half " << half;
      }
    for (int i = 0; i < 4; ++i) {
      const mma::Cell cell = mma::c_cell(lane, i);
      EXPECT_EQ((std::array<int, 2>{cell.row, cell.col}), PtxTable::c(lane, i))
          << "C lane " << lane << " float " << i;
    }
  }
  // Two entries of the ISA's figure, as printed: lane 5 is thread 1 of group 1.
  EXPECT_EQ(mma::a_cell(5, 3, 1).row, 9);
  EXPECT_EQ(mma::a_cell(5, 3, 1).col, 11);
  EXPECT_EQ(mma::b_cell(5, 1, 0).row, 10);
  EXPECT_EQ(mma::b_cell(5, 1, 0).col, 1);
}

TEST(MmaFragments, EachCoversItsMatrixOnce) {
  std::vector<int> a(mma::kM * mma::kK), b(mma::kK * mma::kN), c(mma::kM * mma::kN);
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int half = 0; half < 2; ++half) {
        const mma::Cell cell = mma::a_cell(lane, reg, half);
        ++a[static_cast<size_t>(cell.row * mma::kK + cell.col)];
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int half = 0; half < 2; ++half) {
        const mma::Cell cell = mma::b_cell(lane, reg, half);
        ++b[static_cast<size_t>(cell.row * mma::kN + cell.col)];
      }
    for (int i = 0; i < 4; ++i) {
      const mma::Cell cell = mma::c_cell(lane, i);
      ++c[static_cast<size_t>(cell.row * mma::kN + cell.col)];
    }
  }
  for (int n : a)
    EXPECT_EQ(n, 1);
  for (int n : b)
    EXPECT_EQ(n, 1);
  for (int n : c)
    EXPECT_EQ(n, 1);
}

TEST(MmaFragments, TwoAccumulatorTilesAreOneOperandStep) {
  for (int lane = 0; lane < 32; ++lane)
    for (int t = 0; t < 4; ++t)
      for (int reg = 0; reg < 4; ++reg)
        for (int half = 0; half < 2; ++half) {
          const mma::Cell a = mma::a_cell(lane, reg, half);
          const mma::Cell c = mma::c_cell(lane, mma::c_index_of_a(reg, half));
          EXPECT_EQ(a.row, c.row);
          EXPECT_EQ(16 * t + a.col, 8 * (2 * t + reg / 2) + c.col);
        }
}

// One warp's registers: per lane, A's 4 pairs, B's 2 pairs, C's 4 floats.
struct A {
  double x[32][4][2];
};
struct B {
  double x[32][2][2];
};
struct C {
  double x[32][4] = {};
};

// What the hardware computes, from the PTX table: d += a b.
void emulated_mma(C& d, const A& a, const B& b) {
  Matrix am = zeros(16, 16), bm = zeros(16, 8);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const auto cell = PtxTable::a(lane, i);
      am[cell[0]][cell[1]] = a.x[lane][i / 2][i % 2];
    }
    for (int i = 0; i < 4; ++i) {
      const auto cell = PtxTable::b(lane, i);
      bm[cell[0]][cell[1]] = b.x[lane][i / 2][i % 2];
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const auto cell = PtxTable::c(lane, i);
      for (int k = 0; k < 16; ++k)
        d.x[lane][i] += am[cell[0]][k] * bm[k][cell[1]];
    }
}

// One warp of the kernel on one key tile, addressing as the kernel does:
// rows of Q, K and Vt (V transposed) as in its shared memory; P = S
// unchanged (the softmax between the products is elementwise per lane).
TEST(MmaFragments, OneWarpOfTheForwardKernelComputesQKAndPV) {
  constexpr int kD = 128, kBK = 64, kSteps = kD / 16, kKeyTiles = kBK / 8, kColumnTiles = kD / 8;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // exact sums in double
  Matrix q = zeros(16, kD), k = zeros(kBK, kD), v = zeros(kBK, kD), vt = zeros(kD, kBK);
  for (auto& row : q)
    for (double& x : row)
      x = small(rng);
  for (auto& row : k)
    for (double& x : row)
      x = small(rng);
  for (int r = 0; r < kBK; ++r)
    for (int c = 0; c < kD; ++c)
      vt[c][r] = v[r][c] = small(rng);

  // qa[s]: the kernel's load_pair(qs + cell.row * ld + 16 s + cell.col).
  std::vector<A> qa(kSteps);
  for (int s = 0; s < kSteps; ++s)
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 4; ++r)
        for (int e = 0; e < 2; ++e) {
          const mma::Cell cell = mma::a_cell(lane, r, 0);
          qa[s].x[lane][r][e] = q[cell.row][16 * s + cell.col + e];
        }
  std::vector<C> s(kKeyTiles);
  for (int j = 0; j < kKeyTiles; ++j)
    for (int st = 0; st < kSteps; ++st) {
      B b;
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r)
          for (int e = 0; e < 2; ++e) {
            const mma::Cell cell = mma::b_cell(lane, r, 0);
            b.x[lane][r][e] = k[8 * j + cell.col][16 * st + cell.row + e];
          }
      emulated_mma(s[j], qa[st], b);
    }
  Matrix scores = zeros(16, kBK);
  for (int j = 0; j < kKeyTiles; ++j)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const mma::Cell cell = mma::c_cell(lane, i);
        scores[cell.row][8 * j + cell.col] = s[j].x[lane][i];
      }
  for (int r = 0; r < 16; ++r)
    for (int key = 0; key < kBK; ++key) {
      double want = 0;
      for (int d = 0; d < kD; ++d)
        want += q[r][d] * k[key][d];
      ASSERT_EQ(scores[r][key], want) << "S row " << r << " key " << key;
    }

  std::vector<C> out(kColumnTiles);
  for (int t = 0; t < kBK / 16; ++t) {
    A a;
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 4; ++r)
        for (int e = 0; e < 2; ++e)
          a.x[lane][r][e] = s[2 * t + r / 2].x[lane][mma::c_index_of_a(r, e)];
    for (int n = 0; n < kColumnTiles; ++n) {
      B b;
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r)
          for (int e = 0; e < 2; ++e) {
            const mma::Cell cell = mma::b_cell(lane, r, 0);
            b.x[lane][r][e] = vt[8 * n + cell.col][16 * t + cell.row + e];
          }
      emulated_mma(out[n], a, b);
    }
  }
  for (int n = 0; n < kColumnTiles; ++n)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const mma::Cell cell = mma::c_cell(lane, i);
        double want = 0;
        for (int key = 0; key < kBK; ++key)
          want += scores[cell.row][key] * v[key][8 * n + cell.col];
        ASSERT_EQ(out[n].x[lane][i], want)
            << "O row " << cell.row << " column " << 8 * n + cell.col;
      }
}

}  // namespace
}  // namespace headroom::cuda
