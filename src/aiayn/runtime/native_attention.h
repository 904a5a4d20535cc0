// Eq. 1 for the queries of a decoding step, one query per row and head, written out: the scores
// q . k / sqrt(d_k) over the row's own keys, their softmax, the weighted sum of the values (3.2.1,
// multi-head as in 3.2.2). Decoding calls it for one new position per row (a step) or several
// (speculative decoding's check, one position after the other): a query's output depends only on
// its query, its keys and values and how many of them it reads, never on the other rows or
// positions of the call, so a pass over k + 1 positions gives each the bits a single step gives
// it. ATen's bmm, softmax and matmul cost 5-20 us a call at these sizes (a few rows, tens of
// positions), as much as the products; here a layer's attention is one loop over rows and heads
// on PyTorch's threads. Included by native_step.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "native_vector.h"

namespace aiayn_native {

using at::Tensor;

// a . b over n floats: eight lanes of partial sums, then a fixed tree, whatever the caller.
inline float dot(const float* a, const float* b, int64_t n) {
  f8 s = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s += load8(a + i) * load8(b + i);
  float total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// The softmax of scores[0 .. n) in place (-inf scores get weight 0); returns 1 / the sum of exps.
inline float softmax_weights(float* scores, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < n; ++t) m = std::max(m, scores[t]);
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    scores[t] = scores[t] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(scores[t] - m);
    sum += scores[t];
  }
  return 1.0f / sum;
}

// out[0 .. d_v) = sum_t w[t] v[t] * inverse, v's rows `stride` apart.
inline void weighted_values(const float* w, int64_t n, const float* v, int64_t stride, int64_t d_v, float inverse,
                            float* __restrict out) {
  std::fill(out, out + d_v, 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const float wt = w[t] * inverse;
    const float* vt = v + t * stride;
    int64_t j = 0;
    for (; j + 8 <= d_v; j += 8) store8(out + j, load8(out + j) + wt * load8(vt + j));
    for (; j < d_v; ++j) out[j] += wt * vt[j];
  }
}

// scores[0 .. src) = sum_d q[d] keys[d, .] (keys (d_k, src)), in d's order for every position.
inline void source_scores(const float* q, const float* keys, int64_t d_k, int64_t src, float scale,
                          float* __restrict scores) {
  std::fill(scores, scores + src, 0.0f);
  for (int64_t d = 0; d < d_k; ++d) {
    const float qd = q[d] * scale;
    const float* kd = keys + d * src;
    int64_t t = 0;
    for (; t + 8 <= src; t += 8) store8(scores + t, load8(scores + t) + qd * load8(kd + t));
    for (; t < src; ++t) scores[t] += qd * kd[t];
  }
}

// Self-attention of queries q (rows, h * d_k; row i's query at its own position, not yet scaled)
// over the caches k (R, h, capacity, d_k), v (R, h, capacity, d_v), query i reading cache row
// cache_row[i] (i where null) up to and including position seen[i] - 1 -> out (rows, h * d_v), rows
// `out_stride` apart.
inline void attend_self(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, const int64_t* seen,
                        const int64_t* cache_row, int64_t heads, float* out, int64_t out_stride) {
  const int64_t rows = q.size(0), d_k = cache_k.size(3), d_v = cache_v.size(3);
  TORCH_CHECK(q.is_contiguous() && cache_k.stride(3) == 1 && cache_v.stride(3) == 1,
              "attention's queries and caches must be contiguous along their features");
  const float* qp = q.data_ptr<float>();
  const float *kp = cache_k.data_ptr<float>(), *vp = cache_v.data_ptr<float>();
  const int64_t ks0 = cache_k.stride(0), ks1 = cache_k.stride(1), ks2 = cache_k.stride(2);
  const int64_t vs0 = cache_v.stride(0), vs1 = cache_v.stride(1), vs2 = cache_v.stride(2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k));
  const int64_t longest = *std::max_element(seen, seen + rows);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, longest * (d_k + d_v)));
  at::parallel_for(0, rows * heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(longest), query(d_k);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / heads, h = item % heads, n = seen[i], c = cache_row ? cache_row[i] : i;
      for (int64_t d = 0; d < d_k; ++d) query[d] = qp[i * heads * d_k + h * d_k + d] * scale;
      const float* keys = kp + c * ks0 + h * ks1;
      for (int64_t t = 0; t < n; ++t) scores[t] = dot(query.data(), keys + t * ks2, d_k);
      const float inverse = softmax_weights(scores.data(), n);
      weighted_values(scores.data(), n, vp + c * vs0 + h * vs1, vs2, d_v, inverse, out + i * out_stride + h * d_v);
    }
  });
}

// Encoder-decoder attention of queries q (rows, h * d_k, not yet scaled), `beam` consecutive rows per
// sentence, over its keys k_t (n, h, d_k, src) and values v (n, h, src, d_v), mask (n, src) bytes
// (1 at real source tokens) or null -> out (rows, h * d_v), rows `out_stride` apart.
inline void attend_source(const Tensor& q, const Tensor& k_t, const Tensor& v, const bool* mask, int64_t beam,
                          int64_t heads, float* out, int64_t out_stride) {
  const int64_t rows = q.size(0), d_k = k_t.size(2), src = k_t.size(3), d_v = v.size(3);
  TORCH_CHECK(q.is_contiguous() && k_t.is_contiguous() && v.is_contiguous(),
              "encoder-decoder attention's queries, keys and values must be contiguous");
  const float *qp = q.data_ptr<float>(), *kp = k_t.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k));
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, src * (d_k + d_v)));
  at::parallel_for(0, rows * heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(src);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / heads, h = item % heads, s = i / beam;
      const float* query = qp + i * heads * d_k + h * d_k;
      const float* keys = kp + (s * heads + h) * d_k * src;  // (d_k, src)
      source_scores(query, keys, d_k, src, scale, scores.data());
      if (mask) {
        for (int64_t t = 0; t < src; ++t) {
          if (!mask[s * src + t]) scores[t] = -std::numeric_limits<float>::infinity();
        }
      }
      const float inverse = softmax_weights(scores.data(), src);
      weighted_values(scores.data(), src, vp + (s * heads + h) * src * d_v, d_v, d_v, inverse,
                      out + i * out_stride + h * d_v);
    }
  });
}

}  // namespace aiayn_native
