// Beam search's scores of one step (section 6.1) without writing the log-probabilities out: each
// row's log-normaliser log sum exp(logits) (`row_log_normalizers`), and each sentence's c best
// candidates, logit + offset over its k rows (`beam_top`, offset = the prefix's log P minus the
// normaliser). PyTorch's log_softmax, the add of the prefixes' scores and the top-k read and write
// the (rows, vocab) logits three times, and its exp is accurate to the last bit; here each kernel
// reads them once, and exp is a polynomial within 1 ulp. Both run on PyTorch's threads
// (at::parallel_for) and with AVX2 and FMA where the CPU has them (GCC's target attribute on the
// same code, written with its vector extension). Included by native_step.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>

#include "native_vector.h"

namespace aiayn_native {

using at::Tensor;

// exp(x) for x <= 0 (x - max of a row), 8 lanes: x = n ln 2 + r, |r| <= ln 2 / 2, exp(r) by its
// Taylor polynomial to r^7 (truncation < 6e-9 relative; Estrin's scheme), times 2^n built in the
// exponent bits.
// Below -87 (near float's smallest normal, -inf included) it gives exp(-87); NaN stays NaN.
__attribute__((always_inline)) inline f8 exp_nonpositive(const f8& in) {
  const f8 lowest = broadcast(-87.0f);
  const f8 x = in < lowest ? lowest : in;  // NaN compares false: kept
  const i8 rounded = __builtin_convertvector(x * 1.44269504f - 0.5f, i8);  // x <= 0: truncation rounds
  const f8 n = __builtin_convertvector(rounded, f8);
  const f8 r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // Cody and Waite: ln 2 in two parts
  const f8 r2 = r * r, r4 = r2 * r2;  // Estrin's scheme: a short chain of dependent products
  const f8 low = (r + 1.0f) + r2 * (r * (1.0f / 6) + 0.5f);
  const f8 high = (r * (1.0f / 120) + 1.0f / 24) + r2 * (r * (1.0f / 5040) + 1.0f / 720);
  const f8 p = low + r4 * high;
  const u8 scale = (u8)(rounded + 127) << 23;  // 2^n, n in [-126, 0] (NaN: any, p is NaN)
  f8 two_n;
  std::memcpy(&two_n, &scale, sizeof two_n);
  return p * two_n;
}

__attribute__((always_inline)) inline float lanes_max(const f8& v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

__attribute__((always_inline)) inline float lanes_sum(const f8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Adds a block of `n` vectors to the running maximum m and sum s8 of exp(x - m) (8 lanes): the
// block's maximum first; when it raises m to m', the sum is rescaled by exp(m - m') (few times a row).
template <int n>
__attribute__((always_inline)) inline void absorb(const f8 (&v)[n], float& m, f8& s8) {
  f8 top = v[0];
#pragma GCC unroll 8
  for (int i = 1; i < n; ++i) top = v[i] > top ? v[i] : top;
  const float bm = lanes_max(top);
  if (bm > m) {
    s8 *= exp_nonpositive(broadcast(m - bm));
    m = bm;
  }
  if (m == -std::numeric_limits<float>::infinity()) {  // nothing finite so far: only a NaN counts
    for (int i = 0; i < n; ++i) s8 += v[i] != v[i] ? v[i] : f8{};
    return;
  }  // (past here a NaN in x reaches the sum through exp)
  const f8 mm = broadcast(m);
  f8 e[n];
#pragma GCC unroll 8
  for (int i = 0; i < n; ++i) e[i] = exp_nonpositive(v[i] - mm);  // independent: overlapped
  f8 sum = e[0];
  for (int i = 1; i < n; ++i) sum += e[i];
  s8 += sum;
}

// log sum_j exp(x[j]) over one row of `width` floats in one pass (blocks of 64 floats, `absorb`;
// the tail padded with -inf, whose exp adds 1e-38 a lane). NaN where the maximum is not finite or
// the row holds a NaN.
__attribute__((always_inline)) inline float row_lse(const float* x, int64_t width) {
  constexpr int n = 8;  // vectors a block
  const float minus_inf = -std::numeric_limits<float>::infinity();
  float m = minus_inf;
  f8 s8 = {};
  const int64_t whole = width / (8 * n) * (8 * n);
  for (int64_t start = 0; start < whole; start += 8 * n) {
    f8 v[n];
    std::memcpy(&v, x + start, sizeof v);
    absorb<n>(v, m, s8);
  }
  if (whole < width) {
    f8 v[n];
    for (int i = 0; i < n; ++i) v[i] = broadcast(minus_inf);
    for (int64_t j = whole; j < width; ++j) v[(j - whole) / 8][(j - whole) % 8] = x[j];
    absorb<n>(v, m, s8);
  }
  if (!std::isfinite(m)) return std::numeric_limits<float>::quiet_NaN();
  return m + std::log(lanes_sum(s8));
}

// The c best of x[j] + offset over one row, merged into values/index (sorted, best first; index
// counts from `first`): blocks of 64 whose maximum plus the offset cannot enter are skipped, which
// is exact because rounding x + offset is monotonic in x.
__attribute__((always_inline)) inline void row_top(const float* x, int64_t width, float offset, int64_t first,
                                                   int64_t c, float* values, int64_t* index) {
  constexpr int64_t block = 64;
  for (int64_t start = 0; start < width; start += block) {
    const int64_t end = start + block < width ? start + block : width;
    float m;
    if (end - start == block) {
      f8 a, b;
      std::memcpy(&a, x + start, sizeof a);
      for (int64_t j = start + 8; j < end; j += 8) {
        std::memcpy(&b, x + j, sizeof b);
        a = b > a ? b : a;
      }
      m = lanes_max(a);
    } else {
      m = x[start];
      for (int64_t j = start + 1; j < end; ++j) m = x[j] > m ? x[j] : m;
    }
    if (!(m + offset > values[c - 1])) continue;
    for (int64_t j = start; j < end; ++j) {
      const float v = x[j] + offset;
      if (!(v > values[c - 1])) continue;
      int64_t at = c - 1;
      for (; at > 0 && v > values[at - 1]; --at) {
        values[at] = values[at - 1];
        index[at] = index[at - 1];
      }
      values[at] = v;
      index[at] = first + j;
    }
  }
}

// A NaN candidate (index `at`) put first in values/index (c slots, best first), the others moved down.
inline void nan_first(int64_t at, int64_t c, float* values, int64_t* index) {
  for (int64_t i = c - 1; i > 0; --i) {
    values[i] = values[i - 1];
    index[i] = index[i - 1];
  }
  values[0] = std::numeric_limits<float>::quiet_NaN();
  index[0] = at;
}

__attribute__((target("avx2,fma"))) inline float row_lse_avx2(const float* x, int64_t width) {
  return row_lse(x, width);
}

__attribute__((target("avx2,fma"))) inline void row_top_avx2(const float* x, int64_t width, float offset,
                                                              int64_t first, int64_t c, float* values,
                                                              int64_t* index) {
  row_top(x, width, offset, first, c, values, index);
}

inline bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

inline void check_scores(const Tensor& t, int64_t dim, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.dim() == dim && t.is_contiguous(), what,
              " must be a contiguous ", dim, "-d float32 CPU tensor");
}

// logits (rows, vocab) -> (rows,): log sum exp of each row (NaN where a row holds one).
inline Tensor row_log_normalizers(const Tensor& logits) {
  check_scores(logits, 2, "logits");
  const int64_t rows = logits.size(0), width = logits.size(1);
  Tensor out = at::empty({rows}, logits.options());
  const float* x = logits.data_ptr<float>();
  float* y = out.data_ptr<float>();
  const bool avx2 = has_avx2();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      y[r] = avx2 ? row_lse_avx2(x + r * width, width) : row_lse(x + r * width, width);
    }
  });
  return out;
}

// scores (n, k, vocab), offsets (n, k) -> the c largest scores[i, j, v] + offsets[i, j] of each
// sentence i, sorted (n, c), and their indices into its k * vocab candidates (j * vocab + v);
// -inf (index 0) where fewer than c are above -inf. Equal candidates: the lower index first. A row
// whose offset is NaN gives one NaN candidate, ranked first (as topk ranks NaN); NaN scores in a row
// with a finite offset are not candidates (a NaN logit makes its row's normaliser NaN).
inline std::tuple<Tensor, Tensor> beam_top(const Tensor& scores, const Tensor& offsets, int64_t c) {
  check_scores(scores, 3, "scores");
  check_scores(offsets, 2, "offsets");
  const int64_t n = scores.size(0), k = scores.size(1), width = scores.size(2);
  TORCH_CHECK(offsets.size(0) == n && offsets.size(1) == k, "offsets must be (", n, ", ", k, ")");
  TORCH_CHECK(c >= 1 && c <= k * width, "c = ", c, " is not in [1, ", k * width, "]");
  Tensor values = at::full({n, c}, -std::numeric_limits<float>::infinity(), scores.options());
  Tensor index = at::zeros({n, c}, scores.options().dtype(at::kLong));
  const float* x = scores.data_ptr<float>();
  const float* off = offsets.data_ptr<float>();
  float* v = values.data_ptr<float>();
  int64_t* ix = index.data_ptr<int64_t>();
  const bool avx2 = has_avx2();
  at::parallel_for(0, n, 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const float* row = x + (i * k + j) * width;
        if (std::isnan(off[i * k + j])) {  // a row whose normaliser is NaN (NaN logits): NaN first,
          nan_first(j * width, c, v + i * c, ix + i * c);  // as topk ranks it, so the search sees it
          continue;
        }
        if (avx2) {
          row_top_avx2(row, width, off[i * k + j], j * width, c, v + i * c, ix + i * c);
        } else {
          row_top(row, width, off[i * k + j], j * width, c, v + i * c, ix + i * c);
        }
      }
    }
  });
  return {values, index};
}

}  // namespace aiayn_native
