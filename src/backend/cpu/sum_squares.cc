// sum_squares: out[0] += sum(x^2) over all of x (fp32 or bf16); out fp32 [1].
// The sum is accumulated in double and rounded into out once, so the global
// gradient norm of an 8B-parameter model does not drift with its size. A NaN
// or inf in x makes out non-finite (this is also the non-finite check), and so
// does a finite sum above fp32's range (a norm above ~1.8e19).
//
// Deterministic for any thread count: x is cut into kPartitions fixed ranges
// (boundaries depend only on numel), each range is summed by one thread in
// index order over kLanes interleaved accumulators, and the partial sums are
// combined serially in range order. Threads only decide who computes a range,
// never how it is summed.
// Allocates: nothing (the partial sums live on the stack, size fixed).
#include <array>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/model_op_checks.h"

namespace headroom {

namespace {

// Enough ranges to keep 256 threads busy; 2 KiB of stack.
constexpr int64_t kPartitions = 256;
// Independent accumulators within a range: breaks the add latency chain (and
// lets the compiler vectorize) without changing the order of any one chain.
constexpr int64_t kLanes = 8;

template <typename T>
inline double widen_exactly(T v) {
  return static_cast<double>(headroom::widen(v));
}

template <typename T>
double sum_range(const T* x, int64_t begin, int64_t end) {
  std::array<double, kLanes> lanes{};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      double v = widen_exactly(x[i + j]);
      lanes[j] += v * v;  // exact: a float's square fits in a double
    }
  for (int64_t j = 0; i < end; ++i, ++j) {
    double v = widen_exactly(x[i]);
    lanes[j] += v * v;
  }
  double sum = 0;
  for (double lane : lanes)
    sum += lane;
  return sum;
}

template <typename T>
double sum_squares_of(const T* x, int64_t n) {
  std::array<double, kPartitions> partial{};
#pragma omp parallel for schedule(static) if (n >= kMinParallelElements)
  for (int64_t p = 0; p < kPartitions; ++p)
    partial[p] = sum_range(x, n * p / kPartitions, n * (p + 1) / kPartitions);
  double sum = 0;
  for (double s : partial)
    sum += s;
  return sum;
}

}  // namespace

void CpuKernels::sum_squares(const Tensor& x, Tensor& out) {
  int64_t n = x.numel();
  const double sum =
      with_floating_type(x.dtype(), [&]<typename T>(T*) { return sum_squares_of(x.data<T>(), n); });
  float* o = out.data<float>();
  *o = static_cast<float>(static_cast<double>(*o) + sum);
}

}  // namespace headroom
