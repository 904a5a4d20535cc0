// One decoding step of the Transformer's decoder (section 3.1, with the caches of incremental
// decoding), every layer in one native call: what aiayn.model.native_step builds and loads.
//
// The Python decoder step runs about 30 small ATen operations per layer, each paying 10-20 us of
// Python on top of its kernel; at the sizes translation uses on a CPU that overhead is as large as
// the matrix products (BENCHMARKS.md, "Session 15"). Here the operations are called from C++ with
// the same kernels for the products (MKL's sgemm through at::linear, oneDNN with a weight packed
// once, ReLU fused there, or FBGEMM's int8 products); self-attention of the new position is Eq. 1
// written out (bmm, softmax, bmm) where Python calls the fused kernel. The results agree with the
// Python step up to float32 summation order. Shapes: rows = sentences x beam hypotheses
// (sentence-major), d = d_model, h = heads.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace {

using at::Tensor;

constexpr int64_t kExactRows = 64;  // aiayn.model.linear.EXACT_ROWS

// aiayn.model.linear.padded_rows: 32 sizes per power of two above kExactRows rows.
int64_t padded_rows(int64_t rows) {
  if (rows <= kExactRows) return rows;
  int64_t bits = 64 - __builtin_clzll(static_cast<uint64_t>(rows));
  int64_t step = int64_t{1} << (bits - 6);
  return (rows + step - 1) / step * step;
}

// aiayn.model.linear.row_class: which of ROW_PROBES (1, 4, 32, 128) a row count is timed as.
int row_class(int64_t rows) { return rows < 2 ? 0 : rows < 12 ? 1 : rows < 64 ? 2 : 3; }

Tensor onednn_linear(const Tensor& x, const Tensor& packed, const std::optional<Tensor>& bias,
                     const char* attr) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                     c10::string_view, c10::List<std::optional<at::Scalar>>,
                                     std::optional<c10::string_view>)>();
  return op.call(x, packed, bias, attr, c10::List<std::optional<at::Scalar>>(), c10::string_view(""));
}

// y = x W^T + b by the kernel aiayn.model.linear.PackedLinear (or quantize.Int8Linear) chose.
struct Linear {
  Tensor weight;                                     // (out, in) float32
  std::optional<Tensor> bias;                        // (out,)
  Tensor packed;                                     // oneDNN's blocked weight, where some row class uses it
  std::array<bool, 4> use_packed{};                  // per row class
  c10::intrusive_ptr<LinearPackedParamsBase> int8;   // FBGEMM's int8 weight, or null

  // x (rows, in) contiguous -> (rows, out); `relu` fuses Eq. 2's max(0, .) where the kernel can.
  Tensor operator()(const Tensor& x, bool relu) const {
    if (int8) {
      Tensor y = int8->apply_dynamic(x, false);
      return relu ? y.relu_() : y;
    }
    const int64_t rows = x.size(0);
    if (!use_packed[row_class(rows)]) {
      Tensor y = at::linear(x, weight, bias);
      return relu ? y.relu_() : y;
    }
    const int64_t padded = padded_rows(rows);
    Tensor x2 = padded == rows ? x : at::constant_pad_nd(x, {0, 0, 0, padded - rows}, 0);
    Tensor y = onednn_linear(x2, packed, bias, relu ? "relu" : "none");
    return padded == rows ? y : y.narrow(0, 0, rows);
  }
};

struct Norm {
  Tensor weight, bias;
};

enum Activation : int64_t { kRelu = 0, kGelu = 1, kSilu = 2 };

}  // namespace

// The decoder of one Transformer, its weights held by reference (the model's own tensors).
struct NativeDecoder : torch::CustomClassHolder {
  int64_t heads, d_k, d_v, activation;
  bool norm_first;
  double eps;
  std::vector<Linear> linears;  // per layer: qkv, self out, cross q, cross out, ffn 1, ffn 2; then logits
  std::vector<Norm> norms;      // per layer: self, cross, ffn; then the final norm if there is one

  NativeDecoder(int64_t heads, int64_t d_k, int64_t d_v, bool norm_first, int64_t activation, double eps)
      : heads(heads), d_k(d_k), d_v(d_v), activation(activation), norm_first(norm_first), eps(eps) {}

  void add_float(Tensor weight, std::optional<Tensor> bias, std::optional<Tensor> packed,
                 c10::List<bool> use_packed) {
    TORCH_CHECK(use_packed.size() == 4, "one kernel choice per row class (4) expected");
    Linear l;
    l.weight = weight;
    l.bias = bias;
    if (packed) l.packed = *packed;
    for (int i = 0; i < 4; ++i) l.use_packed[i] = use_packed.get(i) && l.packed.defined();
    linears.push_back(std::move(l));
  }

  void add_int8(c10::intrusive_ptr<LinearPackedParamsBase> params) {
    Linear l;
    l.int8 = std::move(params);
    linears.push_back(std::move(l));
  }

  void add_norm(Tensor weight, Tensor bias) { norms.push_back({weight, bias}); }

  int64_t layers() const { return static_cast<int64_t>(linears.size() - 1) / 6; }

  Tensor norm(const Tensor& x, int64_t i) const {
    return at::layer_norm(x, {x.size(-1)}, norms[i].weight, norms[i].bias, eps);
  }

  // x + sublayer(x) with 3.1's normalisation: after (post-norm, the paper's) or before (pre-norm).
  template <typename F>
  Tensor residual(const Tensor& x, int64_t norm_index, F sublayer) const {
    if (norm_first) return x + sublayer(norm(x, norm_index));
    return norm(sublayer(x).add_(x), norm_index);
  }

  // Masked self-attention of one new position over the cache: q, k, v (rows, h, d_k or d_v).
  Tensor self_attention(const Tensor& x, int64_t layer, const Tensor& cache_k, const Tensor& cache_v,
                        int64_t length) const {
    const int64_t rows = x.size(0), qk = heads * d_k;
    Tensor qkv = linears[6 * layer](x, false);  // (rows, 2 * h * d_k + h * d_v)
    Tensor q = qkv.narrow(1, 0, qk).mul(1.0 / std::sqrt(double(d_k))).view({rows * heads, 1, d_k});
    cache_k.select(2, length).copy_(qkv.narrow(1, qk, qk).view({rows, heads, d_k}));
    cache_v.select(2, length).copy_(qkv.narrow(1, 2 * qk, heads * d_v).view({rows, heads, d_v}));
    const int64_t seen = length + 1;
    Tensor k = cache_k.narrow(2, 0, seen).reshape({rows * heads, seen, d_k});  // a view
    Tensor v = cache_v.narrow(2, 0, seen).reshape({rows * heads, seen, d_v});
    Tensor weights = at::bmm(q, k.transpose(1, 2));  // (rows * h, 1, seen)
    weights = at::_softmax(weights, -1, false);
    Tensor out = at::bmm(weights, v).view({rows, heads * d_v});  // heads concatenated (3.2.2)
    return linears[6 * layer + 1](out, false);
  }

  // Encoder-decoder attention: the `beam` rows of a sentence query its keys together.
  // k_t (n, h, d_k, src), v (n, h, src, d_v), mask (n, 1, 1, src) True at real source tokens.
  Tensor cross_attention(const Tensor& x, int64_t layer, const Tensor& k_t, const Tensor& v,
                         const std::optional<Tensor>& mask) const {
    const int64_t rows = x.size(0), n = k_t.size(0), beam = rows / n;
    Tensor q = linears[6 * layer + 2](x, false).mul_(1.0 / std::sqrt(double(d_k)));
    q = q.view({n, beam, heads, d_k}).transpose(1, 2);  // (n, h, beam, d_k)
    Tensor scores = at::matmul(q, k_t);                  // (n, h, beam, src)
    if (mask) scores.masked_fill_(mask->logical_not(), -std::numeric_limits<float>::infinity());
    Tensor weights = at::_softmax(scores, -1, false);
    Tensor out = at::matmul(weights, v).transpose(1, 2).reshape({rows, heads * d_v});
    return linears[6 * layer + 3](out, false);
  }

  Tensor feed_forward(const Tensor& x, int64_t layer) const {
    const bool relu = activation == kRelu;
    Tensor h = linears[6 * layer + 4](x, relu);  // (rows, d_ff)
    if (activation == kGelu) h = at::gelu(h);
    if (activation == kSilu) h = at::silu(h);
    return linears[6 * layer + 5](h, false);
  }

  // x (rows, d): the embedded tokens at position `length`; caches (rows, h, capacity, d_k or d_v)
  // per layer, `length` positions filled (this step writes one more); cross_k_t and cross_v per
  // layer, one row per sentence -> logits (rows, vocab).
  Tensor step(Tensor x, std::vector<Tensor> cache_k, std::vector<Tensor> cache_v, int64_t length,
              std::vector<Tensor> cross_k_t, std::vector<Tensor> cross_v, std::optional<Tensor> mask) {
    const int64_t n_layers = layers();
    TORCH_CHECK(int64_t(cache_k.size()) == n_layers && int64_t(cache_v.size()) == n_layers &&
                    int64_t(cross_k_t.size()) == n_layers && int64_t(cross_v.size()) == n_layers,
                "one cache per decoder layer expected");
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x must be (rows, d_model) float32");
    const int64_t rows = x.size(0), n = cross_k_t[0].size(0);
    TORCH_CHECK(n > 0 && rows % n == 0, rows, " rows are not a whole number of beams for ", n, " sentences");
    for (int64_t i = 0; i < n_layers; ++i) {
      TORCH_CHECK(cache_k[i].sizes() == at::IntArrayRef({rows, heads, cache_k[0].size(2), d_k}) &&
                      cache_v[i].sizes() == at::IntArrayRef({rows, heads, cache_k[0].size(2), d_v}),
                  "layer ", i, ": a self-attention cache is not (rows, heads, capacity, d_k or d_v)");
      TORCH_CHECK(cross_k_t[i].dim() == 4 && cross_k_t[i].size(0) == n && cross_k_t[i].size(1) == heads &&
                      cross_k_t[i].size(2) == d_k && cross_v[i].sizes() == at::IntArrayRef({n, heads,
                      cross_k_t[i].size(3), d_v}),
                  "layer ", i, ": the encoder's keys and values are not (n, heads, d_k, src), (n, heads, src, d_v)");
    }
    TORCH_CHECK(!mask || (mask->dim() == 4 && mask->size(0) == n && mask->size(-1) == cross_k_t[0].size(3)),
                "the source mask is not (n, 1, 1, src)");
    TORCH_CHECK(length < cache_k[0].size(2), "KV cache holds ", cache_k[0].size(2), " positions; step ",
                length + 1, " does not fit");
    x = x.contiguous();
    for (int64_t i = 0; i < n_layers; ++i) {
      x = residual(x, 3 * i, [&](const Tensor& in) {
        return self_attention(in, i, cache_k[i], cache_v[i], length);
      });
      x = residual(x, 3 * i + 1, [&](const Tensor& in) {
        return cross_attention(in, i, cross_k_t[i], cross_v[i], mask);
      });
      x = residual(x, 3 * i + 2, [&](const Tensor& in) { return feed_forward(in, i); });
    }
    if (int64_t(norms.size()) > 3 * n_layers) x = norm(x, 3 * n_layers);
    return linears.back()(x, false);
  }
};

TORCH_LIBRARY(aiayn, m) {
  m.class_<NativeDecoder>("NativeDecoder")
      .def(torch::init<int64_t, int64_t, int64_t, bool, int64_t, double>())
      .def("add_float", &NativeDecoder::add_float)
      .def("add_int8", &NativeDecoder::add_int8)
      .def("add_norm", &NativeDecoder::add_norm)
      .def("step", &NativeDecoder::step);
}
