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

#include "native_scores.h"  // exp_nonpositive, lanes_max, has_avx2
#include "native_vector.h"

namespace aiayn_native {

using at::Tensor;

// a . b over n floats: eight lanes of partial sums, then a fixed tree, whatever the caller.
__attribute__((always_inline)) inline float dot(const float* a, const float* b, int64_t n) {
  f8 s = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s += load8(a + i) * load8(b + i);
  float total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// The softmax of scores[0 .. n) in place, the buffer holding n rounded up to 8 (-inf scores, the
// padding included, get weight exactly 0; exp by native_scores.h's polynomial, 8 at a time);
// returns 1 / the sum of exps.
__attribute__((always_inline)) inline float softmax_weights(float* scores, int64_t n) {
  const int64_t whole = (n + 7) / 8 * 8;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t t = n; t < whole; ++t) scores[t] = minus_inf;
  f8 high = broadcast(minus_inf);
  for (int64_t t = 0; t < whole; t += 8) {
    const f8 x = load8(scores + t);
    high = x > high ? x : high;
  }
  const f8 m = broadcast(lanes_max(high)), zero = {};
  f8 sum = {};
  for (int64_t t = 0; t < whole; t += 8) {
    const f8 x = load8(scores + t);
    const f8 e = x == broadcast(minus_inf) ? zero : exp_nonpositive(x - m);
    store8(scores + t, e);
    sum += e;
  }
  return 1.0f / (((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7])));
}

// out[0 .. d_v) = sum_t w[t] v[t] * inverse, v's rows `stride` apart.
__attribute__((always_inline)) inline void weighted_values(const float* w, int64_t n, const float* v,
                                                           int64_t stride, int64_t d_v, float inverse,
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

// One self-attention query: q (d_k, not yet scaled) over `n` keys and values `stride` floats apart
// -> out (d_v). `scores` holds n rounded up to 8, `query` d_k floats.
__attribute__((always_inline)) inline void self_item(const float* q, const float* keys, const float* values,
                                                     int64_t stride_k, int64_t stride_v, int64_t n, int64_t d_k,
                                                     int64_t d_v, float scale, float* query, float* scores,
                                                     float* out) {
  for (int64_t d = 0; d < d_k; ++d) query[d] = q[d] * scale;
  for (int64_t t = 0; t < n; ++t) scores[t] = dot(query, keys + t * stride_k, d_k);
  const float inverse = softmax_weights(scores, n);
  weighted_values(scores, n, values, stride_v, d_v, inverse, out);
}

// The `rows` queries of one sentence and head (q rows `q_stride` apart, not yet scaled) over its
// keys (d_k, src) and values (src, d_v), mask (src) or null -> out rows `out_stride` apart. The
// keys are read once for all rows; each row's scores are summed over d in order, as alone.
// `scores` holds rows x src rounded up to 8.
__attribute__((always_inline)) inline void source_item(const float* q, int64_t q_stride, int64_t rows,
                                                       const float* keys, const float* values, const bool* mask,
                                                       int64_t src, int64_t d_k, int64_t d_v, float scale,
                                                       float* scores, float* out, int64_t out_stride) {
  const int64_t width = (src + 7) / 8 * 8;
  std::fill(scores, scores + rows * width, 0.0f);
  for (int64_t d = 0; d < d_k; ++d) {
    const float* kd = keys + d * src;
    for (int64_t b = 0; b < rows; ++b) {
      const float qd = q[b * q_stride + d] * scale;
      float* sb = scores + b * width;
      int64_t t = 0;
      for (; t + 8 <= src; t += 8) store8(sb + t, load8(sb + t) + qd * load8(kd + t));
      for (; t < src; ++t) sb[t] += qd * kd[t];
    }
  }
  for (int64_t b = 0; b < rows; ++b) {
    float* sb = scores + b * width;
    if (mask) {
      for (int64_t t = 0; t < src; ++t) {
        if (!mask[t]) sb[t] = -std::numeric_limits<float>::infinity();
      }
    }
    const float inverse = softmax_weights(sb, src);
    weighted_values(sb, src, values, d_v, d_v, inverse, out + b * out_stride);
  }
}

__attribute__((target("avx2,fma"))) inline void self_item_avx2(const float* q, const float* keys,
                                                                const float* values, int64_t stride_k,
                                                                int64_t stride_v, int64_t n, int64_t d_k,
                                                                int64_t d_v, float scale, float* query,
                                                                float* scores, float* out) {
  self_item(q, keys, values, stride_k, stride_v, n, d_k, d_v, scale, query, scores, out);
}

__attribute__((target("avx2,fma"))) inline void source_item_avx2(const float* q, int64_t q_stride, int64_t rows,
                                                                  const float* keys, const float* values,
                                                                  const bool* mask, int64_t src, int64_t d_k,
                                                                  int64_t d_v, float scale, float* scores,
                                                                  float* out, int64_t out_stride) {
  source_item(q, q_stride, rows, keys, values, mask, src, d_k, d_v, scale, scores, out, out_stride);
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
  TORCH_CHECK(q.size(1) == heads * d_k, "queries of width ", q.size(1), " for ", heads, " heads of ", d_k);
  if (rows == 0) return;
  const float* qp = q.data_ptr<float>();
  const float *kp = cache_k.data_ptr<float>(), *vp = cache_v.data_ptr<float>();
  const int64_t ks0 = cache_k.stride(0), ks1 = cache_k.stride(1), ks2 = cache_k.stride(2);
  const int64_t vs0 = cache_v.stride(0), vs1 = cache_v.stride(1), vs2 = cache_v.stride(2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k));
  const int64_t longest = *std::max_element(seen, seen + rows);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, longest * (d_k + d_v)));
  const bool avx2 = has_avx2();
  at::parallel_for(0, rows * heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores((longest + 7) / 8 * 8), query(d_k);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / heads, h = item % heads, c = cache_row ? cache_row[i] : i;
      const float* qi = qp + i * heads * d_k + h * d_k;
      const float *keys = kp + c * ks0 + h * ks1, *values = vp + c * vs0 + h * vs1;
      float* o = out + i * out_stride + h * d_v;
      if (avx2) {
        self_item_avx2(qi, keys, values, ks2, vs2, seen[i], d_k, d_v, scale, query.data(), scores.data(), o);
      } else {
        self_item(qi, keys, values, ks2, vs2, seen[i], d_k, d_v, scale, query.data(), scores.data(), o);
      }
    }
  });
}

// Encoder-decoder attention of queries q (rows, h * d_k, not yet scaled), `per_sentence` consecutive
// rows to a sentence, over its keys k_t (n, h, d_k, src) and values v (n, h, src, d_v), mask (n, src)
// bytes (1 at real source tokens) or null -> out (rows, h * d_v), rows `out_stride` apart.
inline void attend_source(const Tensor& q, const Tensor& k_t, const Tensor& v, const bool* mask,
                          int64_t per_sentence, int64_t heads, float* out, int64_t out_stride) {
  const int64_t n = k_t.size(0), d_k = k_t.size(2), src = k_t.size(3), d_v = v.size(3);
  TORCH_CHECK(q.is_contiguous() && k_t.is_contiguous() && v.is_contiguous(),
              "encoder-decoder attention's queries, keys and values must be contiguous");
  TORCH_CHECK(q.size(1) == heads * d_k && q.size(0) == n * per_sentence, "queries (", q.size(0), ", ", q.size(1),
              ") for ", n, " sentences of ", per_sentence, " rows and ", heads, " heads of ", d_k);
  const float *qp = q.data_ptr<float>(), *kp = k_t.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k));
  const int64_t work = per_sentence * src * (d_k + d_v);
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work));
  const bool avx2 = has_avx2();
  at::parallel_for(0, n * heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(per_sentence * ((src + 7) / 8 * 8));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t s = item / heads, h = item % heads, stride = heads * d_k;
      const float* qs = qp + s * per_sentence * stride + h * d_k;
      const float *keys = kp + (s * heads + h) * d_k * src, *values = vp + (s * heads + h) * src * d_v;
      const bool* ms = mask ? mask + s * src : nullptr;
      float* o = out + s * per_sentence * out_stride + h * d_v;
      if (avx2) {
        source_item_avx2(qs, stride, per_sentence, keys, values, ms, src, d_k, d_v, scale, scores.data(), o,
                         out_stride);
      } else {
        source_item(qs, stride, per_sentence, keys, values, ms, src, d_k, d_v, scale, scores.data(), o,
                    out_stride);
      }
    }
  });
}

}  // namespace aiayn_native
