// The decoder's products for a few rows (one sentence's greedy step, speculative decoding's check
// over k + 1 positions): y = x W^T + b with W stored once in panels of 16 outputs, (in, 16) each,
// so that a product streams each weight once for all its rows, in the order it is stored.
//
// Every output is summed in one order, whatever the number of rows, how they are grouped or how
// the panels are split between threads: acc = 0, then acc = fma(x[i], w[i], acc) for i = 0 .. in - 1,
// then acc + b (and max(0, .) fused for Eq. 2). So a row's bits do not depend on the row count
// (`linear.row_invariant`): speculative decoding's pass over k + 1 positions gives the logits of
// k + 1 single steps exactly. oneDNN's and MKL's products pay 30-130 us a call at 1 to 5 rows on a
// 2-core CPU (BENCHMARKS.md); these pay for reading the weight. AVX2 + FMA where the CPU has them
// (GCC's target attribute), plain C++ otherwise. Included by native_step.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AIAYN_X86 1
#endif

namespace aiayn_native {

using at::Tensor;

constexpr int64_t kPanel = 16;  // outputs per panel: two 8-float vectors

// weight (out, in) float32 -> panels (ceil(out / 16), in, 16), outputs past `out` zero.
inline Tensor pack_panels(const Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.device().is_cpu(),
              "pack_panels takes a 2-d float32 CPU weight");
  const int64_t out = weight.size(0), in = weight.size(1), panels = (out + kPanel - 1) / kPanel;
  Tensor padded = at::zeros({panels * kPanel, in}, weight.options());
  padded.narrow(0, 0, out).copy_(weight);
  return padded.view({panels, kPanel, in}).transpose(1, 2).contiguous();  // (panels, in, 16)
}

// y = v + b, and max(0, y) where `relu` (NaN kept): every output's last two operations.
inline float finish(float v, const float* bias, int64_t j, bool relu) {
  const float y = bias ? v + bias[j] : v;
  return relu && y < 0.0f ? 0.0f : y;
}

// Panels p0 .. p0 + P - 1 (each `panel_stride` floats apart) for rows x[0 .. R - 1] (each `in` floats
// apart) -> y (R rows `y_stride` apart, P * 16 columns; bias from its column 0 or null), each output
// summed in the one order every grouping uses.
template <int R, int P>
inline void panel_block(const float* x, int64_t in, const float* w, int64_t panel_stride, const float* bias,
                        bool relu, float* y, int64_t y_stride) {
  float a[R][P * kPanel] = {};
  for (int64_t i = 0; i < in; ++i) {
    for (int p = 0; p < P; ++p) {
      const float* wi = w + p * panel_stride + i * kPanel;
      for (int r = 0; r < R; ++r) {
        const float xr = x[r * in + i];
        for (int j = 0; j < kPanel; ++j) a[r][p * kPanel + j] = std::fma(xr, wi[j], a[r][p * kPanel + j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < P * kPanel; ++j) y[r * y_stride + j] = finish(a[r][j], bias, j, relu);
}

#ifdef AIAYN_X86
// panel_block with AVX2 + FMA (the same bits): R * 2P accumulators in registers (a flat array:
// GCC keeps it there), bias and ReLU applied as they are stored.
template <int R, int P>
__attribute__((target("avx2,fma"))) inline void panel_block_avx2(const float* x, int64_t in, const float* w,
                                                                 int64_t panel_stride, const float* bias,
                                                                 bool relu, float* y, int64_t y_stride) {
  constexpr int V = 2 * P;  // 8-float vectors per row
  __m256 a[R * V];
#pragma GCC unroll 16
  for (int u = 0; u < R * V; ++u) a[u] = _mm256_setzero_ps();
  for (int64_t i = 0; i < in; ++i) {
    __m256 wv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) wv[v] = _mm256_loadu_ps(w + (v / 2) * panel_stride + i * kPanel + (v % 2) * 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xr = _mm256_broadcast_ss(x + r * in + i);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) a[r * V + v] = _mm256_fmadd_ps(xr, wv[v], a[r * V + v]);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      __m256 out = a[r * V + v];
      if (bias) out = _mm256_add_ps(out, _mm256_loadu_ps(bias + v * 8));
      if (relu) out = _mm256_max_ps(zero, out);  // the second operand where either is NaN: NaN kept
      _mm256_storeu_ps(y + r * y_stride + v * 8, out);
    }
  }
}
#endif

inline bool panels_avx2() {
#ifdef AIAYN_X86
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// Whether the panels run at the machine's speed: with AVX2 and FMA on x86 (without FMA, std::fma is
// a library call), and on other CPUs, whose compilers fuse std::fma into one instruction.
inline bool panels_fast() {
#ifdef AIAYN_X86
  return panels_avx2();
#else
  return true;
#endif
}

template <int R, int P>
inline void block(bool avx2, const float* x, int64_t in, const float* w, int64_t panel_stride, const float* bias,
                  bool relu, float* y, int64_t y_stride) {
#ifdef AIAYN_X86
  if (avx2) return panel_block_avx2<R, P>(x, in, w, panel_stride, bias, relu, y, y_stride);
#endif
  panel_block<R, P>(x, in, w, panel_stride, bias, relu, y, y_stride);
}

// R rows (1 .. 6) times panels [first, last) -> y (R rows of `out`), P panels at a time; a panel
// past the last whole one through a buffer (the same sums, bias and ReLU added as it is copied).
template <int R, int P>
inline void panel_rows(const float* x, int64_t in, const float* w, int64_t first, int64_t last, int64_t out,
                       const float* bias, bool relu, float* y) {
  const bool avx2 = panels_avx2();
  const int64_t stride = in * kPanel;
  for (int64_t p = first; p < last; p += P) {
    if (p + P <= last && (p + P) * kPanel <= out) {
      const float* b = bias ? bias + p * kPanel : nullptr;
      block<R, P>(avx2, x, in, w + p * stride, stride, b, relu, y + p * kPanel, out);
      continue;
    }
    for (int64_t q = p; q < std::min<int64_t>(p + P, last); ++q) {
      float one[R * kPanel];
      block<R, 1>(avx2, x, in, w + q * stride, stride, nullptr, false, one, kPanel);
      const int64_t col0 = q * kPanel, cols = std::min<int64_t>(kPanel, out - col0);
      for (int r = 0; r < R; ++r)
        for (int64_t j = 0; j < cols; ++j) {
          y[r * out + col0 + j] = finish(one[r * kPanel + j], bias, col0 + j, relu);
        }
    }
  }
}

// `rows` rows (at most 6) of x over panels [first, last).
inline void panel_group(int64_t rows, const float* x, int64_t in, const float* w, int64_t first, int64_t last,
                        int64_t out, const float* bias, bool relu, float* y) {
  switch (rows) {
    case 1: return panel_rows<1, 4>(x, in, w, first, last, out, bias, relu, y);
    case 2: return panel_rows<2, 2>(x, in, w, first, last, out, bias, relu, y);
    case 3: return panel_rows<3, 2>(x, in, w, first, last, out, bias, relu, y);
    case 4: return panel_rows<4, 1>(x, in, w, first, last, out, bias, relu, y);
    case 5: return panel_rows<5, 1>(x, in, w, first, last, out, bias, relu, y);
    default: return panel_rows<6, 1>(x, in, w, first, last, out, bias, relu, y);
  }
}

// x (rows, in) float32 -> (rows, out) = x W^T + b, relu: max(0, .); panels from pack_panels(W).
inline Tensor panel_linear(const Tensor& x_in, const Tensor& panels, int64_t out, const std::optional<Tensor>& bias,
                           bool relu) {
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == at::kFloat && panels.dim() == 3 &&
                  panels.size(2) == kPanel && panels.size(1) == x_in.size(1) && panels.size(0) * kPanel >= out &&
                  out > panels.size(0) * kPanel - kPanel,
              "a panel product of width ", x_in.size(1), " for panels of width ", panels.size(1));
  TORCH_CHECK(!bias || (bias->is_contiguous() && bias->numel() == out), "a bias of ", bias ? bias->numel() : 0,
              " for ", out, " outputs");
  TORCH_CHECK(x_in.device().is_cpu() && panels.device().is_cpu() && panels.is_contiguous() &&
                  (!bias || (bias->device().is_cpu() && bias->scalar_type() == at::kFloat)),
              "a panel product takes float32 CPU tensors and contiguous panels");
  const Tensor x = x_in.contiguous();
  const int64_t rows = x.size(0), in = x.size(1), n_panels = panels.size(0);
  Tensor y = at::empty({rows, out}, x.options());
  if (rows == 0) return y;
  const float *xp = x.data_ptr<float>(), *wp = panels.data_ptr<float>();
  const float* bp = bias ? bias->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  // tasks of whole blocks of 4 panels (64 outputs), each block's weights read by one thread; blocks
  // of fewer than 8,192 weights (in < 128) go a few to a task
  const int64_t blocks = (n_panels + 3) / 4;
  const int64_t grain = 8192 / (std::max<int64_t>(in, 1) * 4 * kPanel) + 1;
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * 4, last = std::min(end * 4, n_panels);
    for (int64_t r = 0; r < rows; r += 6) {
      const int64_t group = std::min<int64_t>(6, rows - r);
      panel_group(group, xp + r * in, in, wp, first, last, out, bp, relu, yp + r * out);
    }
  });
  return y;
}

}  // namespace aiayn_native
