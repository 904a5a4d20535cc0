// The pieces native_step.cpp's decoder is made of: a product by the kernel Python chose for its row
// class (MKL's sgemm through at::linear, oneDNN with a weight packed once, the panels of
// native_panels.h, or FBGEMM's int8), the
// weights of a layer norm, the feed-forward activation, and a check of the tensors Python hands in.
// Included by native_step.cpp (aiayn.runtime.native_build builds it, keyed by both files' bytes).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include <optional>
#include <string>
#include <vector>

#include "native_panels.h"

namespace aiayn_native {

using at::Tensor;

inline Tensor onednn_linear(const Tensor& x, const Tensor& packed, const std::optional<Tensor>& bias,
                            const char* attr) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                     c10::string_view, c10::List<std::optional<at::Scalar>>,
                                     std::optional<c10::string_view>)>();
  return op.call(x, packed, bias, attr, c10::List<std::optional<at::Scalar>>(), c10::string_view(""));
}

// The rows of one step: which row class's kernel each product takes and, for oneDNN, how many
// rows it computes (zeros below the real ones); aiayn.runtime.linear.row_class and padded_rows.
struct Rows {
  int64_t row_class;
  int64_t padded;
};

// The kernels a row class's products can take (aiayn.runtime.linear.KERNELS, in its order).
enum class Kernel : int64_t { kMkl = 0, kPacked = 1, kPanels = 2 };

// y = x W^T + b by the kernel aiayn.runtime.linear.PackedLinear (or quantize.Int8Linear) chose.
struct Linear {
  Tensor weight;                                     // (out, in) float32
  std::optional<Tensor> bias;                        // (out,)
  Tensor packed;                                     // oneDNN's blocked weight, where some row class uses it
  Tensor panels;                                     // pack_panels(weight), where some row class uses it
  std::vector<Kernel> kernel;                        // per row class
  c10::intrusive_ptr<LinearPackedParamsBase> int8;   // FBGEMM's int8 weight, or null
  int64_t outputs = 0;                               // out: the width of its products

  // x (rows, in) contiguous -> (rows, out); `relu` fuses Eq. 2's max(0, .) where the kernel can.
  Tensor operator()(const Tensor& x, bool relu, const Rows& r) const {
    if (int8) {
      Tensor y = int8->apply_dynamic(x, false);
      return relu ? y.relu_() : y;
    }
    const Kernel k = kernel[r.row_class];  // row_class checked against kernel's size by step
    if (k == Kernel::kPanels) return panel_linear(x, panels, weight.size(0), bias, relu);
    if (k == Kernel::kMkl) {
      Tensor y = at::linear(x, weight, bias);
      return relu ? y.relu_() : y;
    }
    const int64_t rows = x.size(0);
    TORCH_CHECK(x.size(1) == weight.size(1), "a product of width ", x.size(1), " for a weight of width ",
                weight.size(1));
    Tensor x2 = r.padded == rows ? x : at::constant_pad_nd(x, {0, 0, 0, r.padded - rows}, 0);
    Tensor y = onednn_linear(x2, packed, bias, relu ? "relu" : "none");
    return r.padded == rows ? y : y.narrow(0, 0, rows);
  }
};

struct Norm {
  Tensor weight, bias;
};

enum class Activation { kRelu, kGelu, kSilu };

inline Activation activation_named(const std::string& name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  TORCH_CHECK(name == "swish", "activation '", name, "' is not relu, gelu or swish");
  return Activation::kSilu;
}

inline void check_float(const Tensor& t, int64_t dim, const char* what) {
  TORCH_CHECK(t.defined() && t.dim() == dim && t.scalar_type() == at::kFloat, what, " must be a ", dim,
              "-d float32 tensor");
}

}  // namespace aiayn_native
