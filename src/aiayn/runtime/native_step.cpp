// One decoding step of the Transformer's decoder (section 3.1, with the caches of incremental
// decoding), every layer in one native call: what aiayn.runtime.native_build builds and
// aiayn.runtime.native_step fills and calls.
//
// The Python decoder step runs about 30 small ATen operations per layer, each paying 10-20 us of
// Python on top of its kernel; at the sizes translation uses on a CPU that overhead is as large as
// the matrix products (docs/performance.md, "The native decoding step"). Here the layers run from C++: the products by
// the kernel Python chose for the row count (MKL's sgemm through at::linear, oneDNN with a weight
// packed once, ReLU fused there, the panels of native_panels.h for a few rows, or FBGEMM's int8
// products), Eq. 1 written out for each row and head (native_attention.h), the layer norms by ATen.
// The results agree with the Python step up to float32 summation order. Shapes: rows = sentences x
// beam hypotheses (sentence-major), d = d_model, h = heads.
//
// `extend` runs m new positions per row in one call (speculative decoding's check: each product over
// rows * m rows reads its weight once; each position attends over exactly its own prefix as a
// single step does, so that products whose rows' bits do not depend on the row count (the panels)
// give the single steps' logits exactly).
//
// The search's runs cross the boundary as typed objects, each made once and named field by field:
// `SearchRules` (native_rules.h) once per search, inside the `Search` that binds it to a decoder and
// the target embeddings; `BeamState` (native_beam.h) the beam state; `Caches` the decoder's state
// for a call. No call takes more than eight arguments.
//
// Every index a call takes is checked (TORCH_CHECK: a RuntimeError in Python, never a read out of
// bounds). Which kernel a product takes for a number of rows is Python's decision
// (aiayn.runtime.linear): a call's `Caches` carry its row class and padded row count.
//
// The library also carries `pcg64_shuffle` (native_shuffle.h): the batch plan's permutation, numpy's
// draw for draw (aiayn.data.shuffle).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "native_attention.h"
#include "native_beam.h"
#include "native_layers.h"
#include "native_rules.h"
#include "native_scores.h"
#include "native_shuffle.h"

using at::Tensor;
using namespace aiayn_native;  // NOLINT: native_layers.h's pieces, used throughout

// Each row's maximum and the column of its first occurrence (x (rows, columns) float32), as `max(1)`
// and the greedy loop's row_max give them: the values by the vectorised `amax`, then a scan for the first
// column holding it (or the first NaN, which `max` returns where a row has one).
static std::tuple<Tensor, Tensor> first_max(const Tensor& x) {
  const Tensor values = at::amax(x, 1), data = x.contiguous();
  const int64_t rows = x.size(0), columns = x.size(1);
  Tensor index = at::empty({rows}, x.options().dtype(at::kLong));
  const float* top = values.data_ptr<float>();
  const float* row = data.data_ptr<float>();
  int64_t* at = index.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r, row += columns) {
    const float v = top[r];
    const float* found = std::isnan(v) ? std::find_if(row, row + columns, [](float y) { return std::isnan(y); })
                                       : std::find(row, row + columns, v);
    at[r] = found - row;
  }
  return {values, index};
}

// The decoder's state for a call on `rows` rows (aiayn.model.transformer.DecoderState): per layer the
// self-attention caches keys, values (rows, h, capacity, d_k or d_v), the encoder's keys cross_k_t
// (n, h, d_k, src) and values cross_v (n, h, src, d_v), one row per sentence, the source mask
// (n, 1, 1, src) bool or none; and the kernel choice for `rows` rows (Python's: aiayn.runtime.linear's
// row class and padded row count). Python keeps one while a search's tensors stay the same
// (aiayn.runtime.native_step.NativeDecoder.caches); how many positions the caches hold is a call's.
struct Caches : torch::CustomClassHolder {
  std::vector<Tensor> keys, values, cross_k_t, cross_v;
  std::optional<Tensor> mask;
  Rows rows;

  Caches(std::vector<Tensor> keys, std::vector<Tensor> values, std::vector<Tensor> cross_k_t,
         std::vector<Tensor> cross_v, std::optional<Tensor> mask, int64_t row_class, int64_t padded)
      : keys(std::move(keys)), values(std::move(values)), cross_k_t(std::move(cross_k_t)),
        cross_v(std::move(cross_v)), mask(std::move(mask)), rows{row_class, padded} {}

  // The positions a cache has room for (its capacity), or none without layers.
  int64_t capacity() const { return keys.empty() ? std::numeric_limits<int64_t>::max() : keys[0].size(2); }
};

// The target side a search's tokens are embedded with (Transformer._embed: 3.4's scaled embedding plus
// 3.5's position, no dropout at inference), made once per search: embed (vocab, d) the target
// embeddings, scaled by `scale`, positions (P, d) the position table from position 0, and ids
// (columns,) int64 the target id of each output column where the output layer is a shortlist's
// (tokens are then columns).
struct Target : torch::CustomClassHolder {
  Tensor embed, positions;
  double scale;
  std::optional<Tensor> ids;

  Target(Tensor embed, double scale, Tensor positions, std::optional<Tensor> ids)
      : embed(std::move(embed)), positions(std::move(positions)), scale(scale), ids(std::move(ids)) {
    check_float(this->embed, 2, "embed (vocab, d_model)");
    check_float(this->positions, 2, "positions (positions, d_model)");
    TORCH_CHECK(this->positions.size(1) == this->embed.size(1), "the positions must be of the embeddings' width");
    const std::optional<Tensor>& named = this->ids;
    TORCH_CHECK(!named || (named->dim() == 1 && named->scalar_type() == at::kLong && named->numel() > 0 &&
                           named->min().item<int64_t>() >= 0 && named->max().item<int64_t>() < this->embed.size(0)),
                "ids must be 1-d int64 target ids of the embeddings");
  }

  // The output layer's columns: ids names each, or the embeddings do.
  int64_t columns() const { return ids ? ids->size(0) : embed.size(0); }

  // The tokens (rows,) embedded: embed[ids[token] or token] * scale + position (d,) or (rows, d).
  Tensor embedded(const Tensor& token, const Tensor& position) const {
    return embed.index_select(0, ids ? ids->index_select(0, token) : token).mul_(scale).add_(position);
  }
};

// The decoder of one Transformer, its weights held by reference (the model's own tensors).
struct NativeDecoder : torch::CustomClassHolder {
  int64_t heads, d_k, d_v;
  Activation activation;
  bool norm_first;
  double eps;
  int64_t row_classes = -1;     // how many row classes every float linear has a kernel for
  std::vector<Linear> linears;  // per layer: qkv, self out, cross q, cross out, ffn 1, ffn 2; then logits
  std::vector<Norm> norms;      // per layer: self, cross, ffn; then the final norm if there is one

  NativeDecoder(int64_t heads, int64_t d_k, int64_t d_v, bool norm_first, std::string activation, double eps)
      : heads(heads), d_k(d_k), d_v(d_v), activation(activation_named(activation)), norm_first(norm_first),
        eps(eps) {
    TORCH_CHECK(heads > 0 && d_k > 0 && d_v > 0, "heads, d_k and d_v must be positive");
    TORCH_CHECK(std::isfinite(eps) && eps >= 0, "layer norm's eps must be finite and >= 0");
  }

  // A float32 layer: its weight and bias, oneDNN's packed weight and the panels where a row class
  // takes them, and each row class's kernel (aiayn.runtime.linear.KERNELS' index).
  void add_float(Tensor weight, std::optional<Tensor> bias, std::optional<Tensor> packed,
                 std::optional<Tensor> panels, c10::List<int64_t> kernels) {
    check_float(weight, 2, "a weight");
    if (bias) check_float(*bias, 1, "a bias");
    TORCH_CHECK(!bias || bias->size(0) == weight.size(0), "a bias of ", bias ? bias->size(0) : 0,
                " for ", weight.size(0), " outputs");
    const int64_t classes = static_cast<int64_t>(kernels.size());
    TORCH_CHECK(classes > 0 && (row_classes < 0 || classes == row_classes),
                "every linear layer needs one kernel choice per row class, as the first one had");
    row_classes = classes;
    Linear l;
    l.weight = weight;
    l.bias = bias;
    l.outputs = weight.size(0);
    if (packed) l.packed = *packed;
    if (panels) {
      check_float(*panels, 3, "panels");
      TORCH_CHECK(panels->is_contiguous() && panels->size(0) == (weight.size(0) + kPanel - 1) / kPanel &&
                      panels->size(1) == weight.size(1) && panels->size(2) == kPanel,
                  "panels are not pack_panels of the weight's shape");
      l.panels = *panels;
    }
    for (const int64_t k : kernels) {
      TORCH_CHECK(k >= 0 && k <= 2, "kernel ", k, " is not 0 (MKL), 1 (packed) or 2 (panels)");
      TORCH_CHECK(k != 1 || l.packed.defined(), "a row class takes the packed weight, and there is none");
      TORCH_CHECK(k != 2 || l.panels.defined(), "a row class takes the panels, and there are none");
      l.kernel.push_back(static_cast<Kernel>(k));
    }
    linears.push_back(std::move(l));
  }

  void add_int8(c10::intrusive_ptr<LinearPackedParamsBase> params) {
    TORCH_CHECK(params, "an int8 layer without its packed weight");
    Linear l;
    l.outputs = std::get<0>(params->unpack()).size(0);
    l.int8 = std::move(params);
    linears.push_back(std::move(l));
  }

  // A copy of this decoder without its output layer, the layers and norms shared (for a shortlist's
  // restricted output layer, added after: aiayn.runtime.native_step.restricted_native).
  c10::intrusive_ptr<NativeDecoder> without_output() const {
    layers();  // whole layers and an output layer
    auto copy = c10::make_intrusive<NativeDecoder>(*this);
    copy->linears.pop_back();
    return copy;
  }

  void add_norm(Tensor weight, Tensor bias) {
    check_float(weight, 1, "a norm's weight");
    check_float(bias, 1, "a norm's bias");
    TORCH_CHECK(weight.size(0) == bias.size(0), "a norm's weight and bias differ in size");
    norms.push_back({weight, bias});
  }

  // The number of decoder layers; checks that the layers given add up to whole layers and an
  // output layer, with three norms each (and maybe a final one).
  int64_t layers() const {
    const int64_t n = static_cast<int64_t>(linears.size()), k = static_cast<int64_t>(norms.size());
    TORCH_CHECK(n >= 1 && (n - 1) % 6 == 0, "the decoder has ", n,
                " linear layers: not 6 per layer and an output layer");
    const int64_t layers = (n - 1) / 6;
    TORCH_CHECK(k == 3 * layers || k == 3 * layers + 1, "the decoder has ", k, " norms for ", layers,
                " layers: 3 per layer (and a final one) expected");
    return layers;
  }

  Tensor norm(const Tensor& x, int64_t i) const {
    return at::layer_norm(x, {x.size(-1)}, norms[i].weight, norms[i].bias, eps);
  }

  // x + sublayer(x) with 3.1's normalisation: after (post-norm, the paper's) or before (pre-norm).
  template <typename F>
  Tensor residual(const Tensor& x, int64_t norm_index, F sublayer) const {
    if (norm_first) return x + sublayer(norm(x, norm_index));
    return norm(sublayer(x).add_(x), norm_index);
  }

  // Self-attention (Eq. 1, masked: each query over its own prefix) of the queries in qkv's first h
  // * d_k columns (rows, ...), query i reading cache row cache_row[i] (i where null) up to position
  // seen[i] - 1 -> (rows, h * d_v), heads concatenated (3.2.2). native_attention.h.
  Tensor attend_cached(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v, const int64_t* seen,
                       const int64_t* cache_row) const {
    const int64_t rows = qkv.size(0);
    Tensor q = qkv.narrow(1, 0, heads * d_k).contiguous();  // (rows, h * d_k)
    Tensor out = at::empty({rows, heads * d_v}, qkv.options());
    attend_self(q, cache_k, cache_v, seen, cache_row, heads, out.data_ptr<float>(), heads * d_v);
    return out;
  }

  // Masked self-attention of one new position over the cache: q, k, v (rows, h, d_k or d_v).
  Tensor self_attention(const Tensor& x, int64_t layer, const Tensor& cache_k, const Tensor& cache_v,
                        int64_t length, const Rows& r) const {
    const int64_t rows = x.size(0), qk = heads * d_k;
    Tensor qkv = linears[6 * layer](x, false, r);  // (rows, 2 * h * d_k + h * d_v)
    cache_k.select(2, length).copy_(qkv.narrow(1, qk, qk).view({rows, heads, d_k}));
    cache_v.select(2, length).copy_(qkv.narrow(1, 2 * qk, heads * d_v).view({rows, heads, d_v}));
    const std::vector<int64_t> seen(rows, length + 1);
    return linears[6 * layer + 1](attend_cached(qkv, cache_k, cache_v, seen.data(), nullptr), false, r);
  }

  // Encoder-decoder attention of x's rows (rows, d), `per_sentence` consecutive rows to a sentence:
  // k_t (n, h, d_k, src), v (n, h, src, d_v), mask (n, 1, 1, src) True at real source tokens.
  Tensor cross_attention(const Tensor& x, int64_t layer, const Tensor& k_t, const Tensor& v,
                         const std::optional<Tensor>& mask, int64_t per_sentence, const Rows& r) const {
    Tensor q = linears[6 * layer + 2](x, false, r);  // (rows, h * d_k)
    Tensor out = at::empty({x.size(0), heads * d_v}, x.options());
    const Tensor keys = k_t.contiguous(), values = v.contiguous();
    const Tensor real = mask ? mask->contiguous() : Tensor();
    attend_source(q.contiguous(), keys, values, mask ? real.data_ptr<bool>() : nullptr, per_sentence, heads,
                  out.data_ptr<float>(), heads * d_v);
    return linears[6 * layer + 3](out, false, r);
  }

  // The self-attention of m new positions per row (x (rows * m, d), position j of row r at
  // lengths[r] + j), each over exactly its own prefix, as a single step of it attends; their keys
  // and values written to the caches.
  Tensor self_attention_m(const Tensor& x, int64_t layer, const Tensor& cache_k, const Tensor& cache_v,
                          const Tensor& lengths, int64_t m, bool same, const Rows& r) const {
    const int64_t rows = lengths.size(0), qk = heads * d_k, longest = lengths.max().item<int64_t>();
    Tensor qkv = linears[6 * layer](x, false, r);  // (rows * m, 2 * h * d_k + h * d_v)
    Tensor k_new = qkv.narrow(1, qk, qk).view({rows, m, heads, d_k});
    Tensor v_new = qkv.narrow(1, 2 * qk, heads * d_v).view({rows, m, heads, d_v});
    if (same) {
      cache_k.narrow(2, longest, m).copy_(k_new.transpose(1, 2));
      cache_v.narrow(2, longest, m).copy_(v_new.transpose(1, 2));
    } else {  // cache[r, :, lengths[r] + j] = new[r, j]
      using at::indexing::Slice;
      Tensor position = lengths.view({rows, 1}) + at::arange(m, lengths.options());  // (rows, m)
      Tensor row = at::arange(rows, lengths.options()).view({rows, 1});
      Tensor(cache_k).index_put_({row, Slice(), position}, k_new);  // the caller's cache, written
      Tensor(cache_v).index_put_({row, Slice(), position}, v_new);
    }
    std::vector<int64_t> seen(rows * m), cache_row(rows * m);
    auto length_of = lengths.accessor<int64_t, 1>();
    for (int64_t i = 0; i < rows * m; ++i) {
      cache_row[i] = i / m;
      seen[i] = length_of[i / m] + i % m + 1;
    }
    Tensor out = attend_cached(qkv, cache_k, cache_v, seen.data(), cache_row.data());  // (rows * m, h * d_v)
    return linears[6 * layer + 1](out, false, r);
  }

  Tensor feed_forward(const Tensor& x, int64_t layer, const Rows& r) const {
    Tensor h = linears[6 * layer + 4](x, activation == Activation::kRelu, r);  // (rows, d_ff)
    if (activation == Activation::kGelu) h = at::gelu(h);
    if (activation == Activation::kSilu) h = at::silu(h);
    return linears[6 * layer + 5](h, false, r);
  }

  // The decoder's layers (3.1; each layer's attention as given) and output layer over x (rows, d).
  template <typename S, typename C>
  Tensor through(Tensor x, int64_t n_layers, const Rows& r, S self_attn, C cross_attn) const {
    for (int64_t i = 0; i < n_layers; ++i) {
      x = residual(x, 3 * i, [&](const Tensor& in) { return self_attn(in, i); });
      x = residual(x, 3 * i + 1, [&](const Tensor& in) { return cross_attn(in, i); });
      x = residual(x, 3 * i + 2, [&](const Tensor& in) { return feed_forward(in, i, r); });
    }
    if (int64_t(norms.size()) > 3 * n_layers) x = norm(x, 3 * n_layers);
    return linears.back()(x, false, r);
  }

  // The caches and the encoder's keys and values of `n_layers` layers for `rows` rows.
  void check_caches(int64_t n_layers, int64_t rows, int64_t length, const Caches& c) const {
    TORCH_CHECK(int64_t(c.keys.size()) == n_layers && int64_t(c.values.size()) == n_layers &&
                    int64_t(c.cross_k_t.size()) == n_layers && int64_t(c.cross_v.size()) == n_layers,
                "one cache per decoder layer (", n_layers, ") expected");
    TORCH_CHECK(length >= 0, "the caches' length must be >= 0, got ", length);
    if (n_layers == 0) return;
    TORCH_CHECK(c.keys[0].dim() == 4 && c.cross_k_t[0].dim() == 4, "the caches of layer 0 are not 4-d");
    const int64_t n = c.cross_k_t[0].size(0), src = c.cross_k_t[0].size(3), positions = c.keys[0].size(2);
    TORCH_CHECK(n > 0 && rows % n == 0, rows, " rows are not a whole number of beams for ", n, " sentences");
    for (int64_t i = 0; i < n_layers; ++i) {
      for (const Tensor* t : {&c.keys[i], &c.values[i], &c.cross_k_t[i], &c.cross_v[i]}) {
        TORCH_CHECK(t->scalar_type() == at::kFloat, "layer ", i, ": a cache is ", t->scalar_type(),
                    ", not float32");
      }
      TORCH_CHECK(c.keys[i].sizes() == at::IntArrayRef({rows, heads, positions, d_k}) &&
                      c.values[i].sizes() == at::IntArrayRef({rows, heads, positions, d_v}),
                  "layer ", i, ": a self-attention cache is not (rows, heads, capacity, d_k or d_v)");
      TORCH_CHECK(c.cross_k_t[i].sizes() == at::IntArrayRef({n, heads, d_k, src}) &&
                      c.cross_v[i].sizes() == at::IntArrayRef({n, heads, src, d_v}),
                  "layer ", i, ": the encoder's keys and values are not (n, heads, d_k, src), (n, heads, src, d_v)");
    }
    TORCH_CHECK(!c.mask || (c.mask->scalar_type() == at::kBool && c.mask->sizes() == at::IntArrayRef({n, 1, 1, src})),
                "the source mask is not (n, 1, 1, src) bool");
    TORCH_CHECK(length < positions, "KV cache holds ", positions, " positions; step ", length + 1,
                " does not fit");
  }

  // The input of a call: `features` per row (the model's width), `rows` product rows padded to `padded`.
  void check_rows(int64_t features, int64_t rows, const Rows& r) const {
    TORCH_CHECK(norms.empty() || features == norms[0].weight.size(0), "x has ", features,
                " features, the model's norms ", norms.empty() ? 0 : norms[0].weight.size(0));
    TORCH_CHECK(r.row_class >= 0 && (row_classes < 0 || r.row_class < row_classes), "row class ", r.row_class,
                " of ", row_classes);
    TORCH_CHECK(r.padded >= rows, "rows padded to ", r.padded, ", fewer than the ", rows, " rows");
  }

  // x (rows, d): the embedded tokens at position `length`; the caches (`Caches`) hold `length`
  // positions (this step writes one more) -> logits (rows, vocab).
  Tensor step(Tensor x, c10::intrusive_ptr<Caches> caches, int64_t length) {
    const int64_t n_layers = layers();
    check_float(x, 2, "x (rows, d_model)");
    const int64_t rows = x.size(0);
    const Caches& c = *caches;
    check_rows(x.size(1), rows, c.rows);
    check_caches(n_layers, rows, length, c);
    const Rows& r = c.rows;
    return through(
        x.contiguous(), n_layers, r,
        [&](const Tensor& in, int64_t i) { return self_attention(in, i, c.keys[i], c.values[i], length, r); },
        [&](const Tensor& in, int64_t i) {
          return cross_attention(in, i, c.cross_k_t[i], c.cross_v[i], c.mask, rows / c.cross_k_t[i].size(0), r);
        });
  }

  // Several new positions per row in one call (speculative decoding's check): x (rows, m, d), the
  // embedded tokens of row r at positions lengths[r] .. lengths[r] + m - 1; lengths (rows,) int64,
  // the positions each row's caches hold (this call writes m more) -> logits (rows, m, vocab). The
  // products run over rows * m rows with the kernel of the caches' row class (the single step's for
  // these rows), padded to `padded`.
  Tensor extend(Tensor x, Tensor lengths, c10::intrusive_ptr<Caches> caches, int64_t padded) {
    const int64_t n_layers = layers();
    check_float(x, 3, "x (rows, new positions, d_model)");
    const int64_t rows = x.size(0), m = x.size(1);
    TORCH_CHECK(rows > 0 && m > 0, "extend takes at least one row and one new position, got (", rows, ", ",
                m, ")");
    TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == rows && lengths.scalar_type() == at::kLong &&
                    lengths.device().is_cpu(), "lengths must be (rows,) int64 on the CPU, one per row of x");
    const int64_t shortest = lengths.min().item<int64_t>(), longest = lengths.max().item<int64_t>();
    TORCH_CHECK(shortest >= 0, "a row's length must be >= 0, got ", shortest);
    const Caches& c = *caches;
    const Rows r{c.rows.row_class, padded};
    check_rows(x.size(2), rows * m, r);
    check_caches(n_layers, rows, longest + m - 1, c);
    const bool same = shortest == longest;
    Tensor logits = through(
        x.reshape({rows * m, x.size(2)}).contiguous(), n_layers, r,
        [&](const Tensor& in, int64_t i) {
          return self_attention_m(in, i, c.keys[i], c.values[i], lengths, m, same, r);
        },
        [&](const Tensor& in, int64_t i) {
          return cross_attention(in, i, c.cross_k_t[i], c.cross_v[i], c.mask, m * (rows / c.cross_k_t[i].size(0)), r);
        });
    return logits.view({rows, m, logits.size(1)});
  }

  // A draft's k greedy proposals per row (speculative decoding): x (rows, q, d) its unread tokens
  // embedded, row r's newest at newest[r] (rows,) int64, read in one `extend` (its products padded
  // to `padded`); then k - 1 single positions, each the token just chosen, embedded by `target`.
  // `banned` (b,) int64 columns are never chosen -> (rows, k) int64 columns.
  Tensor propose(c10::intrusive_ptr<Target> target, Tensor x, Tensor lengths, Tensor newest, int64_t k,
                 Tensor banned, c10::intrusive_ptr<Caches> caches, int64_t padded) {
    const int64_t rows = x.dim() == 3 ? x.size(0) : 0, q = x.dim() == 3 ? x.size(1) : 0;
    TORCH_CHECK(newest.dim() == 1 && newest.size(0) == rows && newest.scalar_type() == at::kLong &&
                    (rows == 0 || (newest.min().item<int64_t>() >= 0 && newest.max().item<int64_t>() < q)),
                "newest must be (rows,) int64 indices into x's ", q, " positions");
    TORCH_CHECK(banned.dim() == 1 && banned.scalar_type() == at::kLong &&
                    (banned.numel() == 0 || banned.min().item<int64_t>() >= 0),
                "banned must be 1-d int64 ids");
    TORCH_CHECK(k >= 1 && !caches->keys.empty() && lengths.dim() == 1 && lengths.size(0) == rows &&
                    (lengths + newest + k).max().item<int64_t>() <=
                        std::min(target->positions.size(0), caches->capacity()),
                "k = ", k, " proposals do not fit the caches or the position table");
    Tensor logits = extend(x, lengths, caches, padded);
    Tensor held = lengths + newest + 1;  // (rows,) positions each row holds once it read its tokens
    Tensor next = logits.index({at::arange(rows, lengths.options()), newest});  // (rows, vocab)
    TORCH_CHECK(banned.numel() == 0 || banned.max().item<int64_t>() < next.size(1), "a banned id is past the ",
                next.size(1), " outputs");  // what is written lies past the rows' lengths: harmless
    TORCH_CHECK(target->columns() == next.size(1), "ids must be (", next.size(1), ",) int64 target ids");
    Tensor out = at::empty({rows, k}, lengths.options());
    for (int64_t j = 0; j < k; ++j) {
      if (j > 0) {
        Tensor xj = target->embedded(out.select(1, j - 1), target->positions.index_select(0, held)).unsqueeze(1);
        next = extend(xj, held, caches, caches->rows.padded).select(1, 0);
        held = held + 1;
      }
      if (banned.numel() > 0) next.index_fill_(1, banned, -std::numeric_limits<float>::infinity());
      out.select(1, j).copy_(next.argmax(1));
    }
    return out;
  }
};

// Rows follow `index` (rows,) in every layer's cache, `filled` positions each: only the rows that
// take another row's prefix are copied (aiayn.model.cache.KVCache.reorder).
static void reorder(const std::vector<Tensor>& caches, const Tensor& index, int64_t filled) {
  const Tensor moved = (index != at::arange(index.numel(), index.options())).nonzero().select(1, 0);
  if (moved.numel() == 0) return;
  const Tensor source = index.index_select(0, moved);
  for (const Tensor& buffer : caches) {
    Tensor prefix = buffer.narrow(2, 0, filled);
    prefix.index_copy_(0, moved, prefix.index_select(0, source));  // gathered first: the rows overlap
  }
}

// One search's native runs: a decoder, the search's rules and its target side, bound once
// (aiayn.runtime.native_step.NativeSearch makes it when the search starts).
struct Search : torch::CustomClassHolder {
  c10::intrusive_ptr<NativeDecoder> decoder;
  c10::intrusive_ptr<SearchRules> rules;
  c10::intrusive_ptr<Target> target;

  Search(c10::intrusive_ptr<NativeDecoder> decoder, c10::intrusive_ptr<SearchRules> rules,
         c10::intrusive_ptr<Target> target)
      : decoder(std::move(decoder)), rules(std::move(rules)), target(std::move(target)) {}

  // What a run is given besides its search's state: tokens are columns of the output layer, which
  // ids (or the embeddings) name; the rules' columns are among them; the caches and the position
  // table have room for `steps` more positions after `length`.
  void check_run(const Tensor& tokens, int64_t steps, const Caches& c, int64_t length) const {
    decoder->layers();  // whole layers and an output layer
    TORCH_CHECK(length + steps <= c.capacity(), "KV cache holds ", c.capacity(), " positions; ", steps,
                " steps after ", length, " do not fit");  // nothing written yet
    TORCH_CHECK(steps >= 1 && length + steps <= target->positions.size(0), "the position table must hold the ",
                steps, " steps' positions after ", length);
    const int64_t outputs = decoder->linears.back().outputs, columns = target->columns();
    TORCH_CHECK(columns == outputs, "the output layer has ", outputs, " columns, and ",
                target->ids ? "ids" : "embed", " names ", columns);
    TORCH_CHECK(tokens.min().item<int64_t>() >= 0 && tokens.max().item<int64_t>() < columns,
                "tokens must be columns of the output layer, and ids target ids of the embeddings");
    rules->check_columns(columns);
  }

  // Greedy search's steps (section 6.1) in one call, as the greedy loop (aiayn.decode.greedy) takes
  // them one at a time, with the same ATen kernels in the same order, so the same bits: each row's
  // token tokens (rows,) int64 at position `length` embedded, one step, then log_softmax; the rules'
  // mask (no banned column; past its cap, caps (rows,) int64 at search step first_step + j, a row may
  // only end); the first most probable column; log P summed in float32 onto sums (rows,). Stops after
  // `steps` steps or the first step at which some row chose EOS -> (chosen (rows, s), running sums
  // (rows, s)); the caches then hold length + s positions.
  std::tuple<Tensor, Tensor> greedy(Tensor tokens, Tensor sums, Tensor caps, int64_t first_step, int64_t steps,
                                    c10::intrusive_ptr<Caches> caches, int64_t length) {
    const int64_t rows = tokens.size(0);
    check_float(sums, 1, "sums (rows,)");
    TORCH_CHECK(tokens.dim() == 1 && tokens.scalar_type() == at::kLong && rows > 0 && sums.size(0) == rows &&
                    caps.dim() == 1 && caps.scalar_type() == at::kLong && caps.size(0) == rows,
                "tokens, sums and caps must be (rows,): int64, float32, int64");
    TORCH_CHECK(first_step >= 1, "first_step must be >= 1, got ", first_step);
    check_run(tokens, steps, *caches, length);
    Tensor chosen = at::empty({rows, steps}, tokens.options()), running = at::empty({rows, steps}, sums.options());
    const Tensor cap = caps.contiguous();
    Tensor token = tokens;
    int64_t j = 0;
    while (j < steps) {  // a failure anywhere leaves the caches as they were below `length` (Python goes on)
      Tensor x = target->embedded(token, target->positions.select(0, length + j));
      Tensor logp = at::log_softmax(decoder->step(x, caches, length + j), 1);  // (rows, columns)
      rules->mask(logp.unsqueeze(1), first_step + j, cap.data_ptr<int64_t>());
      auto [best, index] = first_max(logp);
      sums = sums + best;
      chosen.select(1, j).copy_(index);
      running.select(1, j).copy_(sums);
      token = index;
      ++j;
      if (index.eq(rules->eos).any().item<bool>()) break;
    }
    return {chosen.narrow(1, 0, j), running.narrow(1, 0, j)};
  }

  // Beam search's steps (section 6.1) in one call, as the beam loop (aiayn.decode.beam.run_beams)
  // takes them one at a time, with the same ATen calls in the same order (native_beam.h), so the
  // same bits: tokens (n * k,) int64 at position `length`, embedded as in `greedy`; `beams` the beam
  // state, updated in place; the search's step number `first_step`; the rules' mask (past its
  // max_len a sentence may only end) and length penalty; n_best. Runs up to `steps` steps, stopping
  // after the first at which some sentence is done (its caches then not reordered: the caller drops
  // it) -> rows (n * k,) each survivor's row, last (n * k,) its token, done (n,) bool, and the steps
  // taken (a 0-d int64).
  std::tuple<Tensor, Tensor, Tensor, Tensor> beam(c10::intrusive_ptr<BeamState> beams, Tensor tokens,
                                                  int64_t first_step, int64_t steps, int64_t n_best,
                                                  c10::intrusive_ptr<Caches> caches, int64_t length) {
    BeamState& b = *beams;
    b.check();
    const int64_t n = b.live_scores.size(0), k = b.live_scores.size(1);
    TORCH_CHECK(tokens.dim() == 1 && tokens.scalar_type() == at::kLong && tokens.size(0) == n * k && n * k > 0,
                "tokens must be (n * k,) int64 for n = ", n, " sentences of k = ", k);
    TORCH_CHECK(first_step >= 1 && n_best >= 1 && n_best <= k && b.live_seqs.size(2) >= first_step + steps - 1,
                "first_step must be >= 1, n_best 1 .. k, and the sequences must hold every step");
    check_run(tokens, steps, *caches, length);
    const Tensor max_lens = b.max_lens.contiguous();
    Tensor token = tokens, rows_of, last, done;
    int64_t j = 0;
    while (j < steps) {
      const int64_t step = first_step + j;
      const BeamState before = b;  // the beams and caches agree at every step's start
      try {  // a step that fails after the first ends the run at the start of that step
        Tensor x = target->embedded(token, target->positions.select(0, length + j));
        Tensor logits = decoder->step(x, caches, length + j);
        const Tensor lse = row_log_normalizers(logits);  // (n * k,)
        Tensor scores = logits.view({n, k, logits.size(1)});
        rules->mask(scores, step, max_lens.data_ptr<int64_t>());
        auto [beam, chosen] = b.advance(scores, lse, step, rules->eos, rules->lp(double(step)));  // (n, k) each
        Tensor ended = b.done(step, n_best, *rules);
        Tensor survivors = (beam + at::arange(0, n * k, k, beam.options()).unsqueeze(1)).view(-1);
        rows_of = survivors, last = chosen.view(-1), done = ended;
      } catch (const std::exception&) {
        if (j == 0) throw;
        b = before;  // the last step's rows, tokens and done stand: the caller goes on from there
        break;
      }
      ++j;
      if (done.any().item<bool>()) break;
      reorder(caches->keys, rows_of, length + j);
      reorder(caches->values, rows_of, length + j);
      token = last;
    }
    return {rows_of, last, done, at::scalar_tensor(j, tokens.options())};
  }
};

TORCH_LIBRARY(aiayn, m) {  // a class before the methods that take it
  m.class_<Caches>("Caches")
      .def(torch::init<std::vector<Tensor>, std::vector<Tensor>, std::vector<Tensor>, std::vector<Tensor>,
                       std::optional<Tensor>, int64_t, int64_t>());
  m.class_<Target>("Target").def(torch::init<Tensor, double, Tensor, std::optional<Tensor>>());
  m.class_<SearchRules>("SearchRules")
      .def(torch::init<int64_t, Tensor, std::string, double>())
      .def_readonly("eos", &SearchRules::eos)
      .def_readonly("banned", &SearchRules::banned)
      .def_readonly("style", &SearchRules::style)
      .def_readonly("alpha", &SearchRules::alpha);
  m.class_<BeamState>("BeamState")
      .def(torch::init<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>())
      .def_readwrite("max_lens", &BeamState::max_lens)
      .def_readwrite("live_seqs", &BeamState::live_seqs)
      .def_readwrite("live_scores", &BeamState::live_scores)
      .def_readwrite("fin_seqs", &BeamState::fin_seqs)
      .def_readwrite("fin_scores", &BeamState::fin_scores)
      .def_readwrite("fin_log_probs", &BeamState::fin_log_probs)
      .def_readwrite("fin_lens", &BeamState::fin_lens);
  m.class_<NativeDecoder>("NativeDecoder")
      .def(torch::init<int64_t, int64_t, int64_t, bool, std::string, double>())
      .def("add_float", &NativeDecoder::add_float)
      .def("add_int8", &NativeDecoder::add_int8)
      .def("add_norm", &NativeDecoder::add_norm)
      .def("without_output", &NativeDecoder::without_output)
      .def("step", &NativeDecoder::step)
      .def("extend", &NativeDecoder::extend)
      .def("propose", &NativeDecoder::propose);
  m.class_<Search>("Search")
      .def(torch::init<c10::intrusive_ptr<NativeDecoder>, c10::intrusive_ptr<SearchRules>, c10::intrusive_ptr<Target>>())
      .def("greedy", &Search::greedy)
      .def("beam", &Search::beam);
  m.def("row_log_normalizers(Tensor logits) -> Tensor", &row_log_normalizers);
  m.def("beam_top(Tensor scores, Tensor offsets, int c) -> (Tensor, Tensor)", &beam_top);
  m.def("pack_panels(Tensor weight) -> Tensor", &pack_panels);
  m.def("panels_fast() -> bool", &panels_fast);
  m.def("pcg64_shuffle(Tensor(a!) values, Tensor(b!) keys, Tensor(c!) state) -> ()", &pcg64_shuffle);
  m.def("panel_linear(Tensor x, Tensor panels, int out, Tensor? bias, bool relu) -> Tensor", &panel_linear);
}
