#include "loom/data/transforms.h"

#include <cmath>

#include "data/resize.h"
#include "loom/core/grad_mode.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/manipulation.h"
#include "loom/ops/reduction.h"

namespace loom::data {

namespace {

void require_batch(const Tensor& x, int64_t min_ndim, const char* who) {
  if (!x.defined()) throw ValueError(std::string(who) + ": the input is undefined");
  if (x.ndim() < min_ndim)
    throw ShapeError(std::string(who) + ": input of shape " + shape_str(x.shape()) + " has " + std::to_string(x.ndim()) +
                     " axes (valid: a batch with at least " + std::to_string(min_ndim) + " axes, the last two (height, width))");
}

void require_samples(const Tensor& v, int64_t n, const char* who, const char* what) {
  if (v.ndim() != 1 || v.dim(0) != n)
    throw ShapeError(std::string(who) + ": " + what + " has shape " + shape_str(v.shape()) + " (valid: (" + std::to_string(n) +
                     ",), one per sample)");
}

Tensor& field_of(Batch& b, size_t field, const std::string& who) {
  if (field >= b.size())
    throw IndexError(who + ": field " + std::to_string(field) + " does not exist in a batch of " + std::to_string(b.size()) + " fields");
  return b[field];
}

}  // namespace

Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std, int64_t channel_axis) {
  if (!x.defined()) throw ValueError("normalize: the input is undefined");
  if (mean.empty() || mean.size() != std.size())
    throw ValueError("normalize: mean has " + std::to_string(mean.size()) + " values and std " + std::to_string(std.size()) +
                     " (valid: the same non-zero count, one per channel or one for all)");
  for (double s : std)
    if (!(s > 0)) throw ValueError("normalize: std values must be > 0, got " + std::to_string(s));
  const DType dt = is_floating(x.dtype()) ? x.dtype() : Float32;
  const Tensor xf = x.dtype() == dt ? x : x.astype(dt);
  const int64_t c = static_cast<int64_t>(mean.size());
  if (c == 1) return (xf - mean[0]) / std[0];
  const int64_t axis = normalize_axis(channel_axis, x.ndim(), "normalize");
  if (x.dim(axis) != c)
    throw ShapeError("normalize: input of shape " + shape_str(x.shape()) + " has " + std::to_string(x.dim(axis)) +
                     " channels along axis " + std::to_string(axis) + " but mean/std have " + std::to_string(c) + " values");
  Shape s(static_cast<size_t>(x.ndim() - axis), 1);
  s[0] = c;
  const Tensor m = from_vector(mean, s, x.device()).astype(dt);
  const Tensor d = from_vector(std, s, x.device()).astype(dt);
  return (xf - m) / d;
}

Tensor crop(const Tensor& x, const Tensor& top, const Tensor& left, int64_t height, int64_t width, int64_t padding) {
  require_batch(x, 3, "crop");
  const int64_t n = x.dim(0), h = x.dim(-2), w = x.dim(-1);
  if (padding < 0) throw ValueError("crop: padding must be >= 0, got " + std::to_string(padding));
  if (height < 1 || width < 1 || height > h + 2 * padding || width > w + 2 * padding)
    throw ValueError("crop: a (" + std::to_string(height) + ", " + std::to_string(width) + ") window does not fit images of (" +
                     std::to_string(h) + ", " + std::to_string(w) + ") padded by " + std::to_string(padding));
  require_samples(top, n, "crop", "top");
  require_samples(left, n, "crop", "left");
  const std::vector<int64_t> ts = top.astype(Int64).to_vector<int64_t>(), ls = left.astype(Int64).to_vector<int64_t>();
  std::vector<std::pair<int64_t, int64_t>> pw(static_cast<size_t>(x.ndim()), {0, 0});
  pw[pw.size() - 2] = {padding, padding};
  pw[pw.size() - 1] = {padding, padding};
  const Tensor padded = padding > 0 ? pad(x, pw, 0.0) : x;
  std::vector<Tensor> samples;
  samples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = ts[static_cast<size_t>(i)], l = ls[static_cast<size_t>(i)];
    if (t < 0 || l < 0 || t + height > h + 2 * padding || l + width > w + 2 * padding)
      throw ValueError("crop: offset (" + std::to_string(t) + ", " + std::to_string(l) + ") of sample " + std::to_string(i) +
                       " puts the window outside the padded image");
    samples.push_back(padded.index({i, Ellipsis, Slice(t, t + height), Slice(l, l + width)}));
  }
  if (n == 0) {
    Shape s = x.shape();
    s[s.size() - 2] = height;
    s[s.size() - 1] = width;
    return zeros(s, x.dtype(), x.device());
  }
  return stack(samples, 0);
}

Tensor random_crop(const Tensor& x, int64_t height, int64_t width, int64_t padding, Generator& gen) {
  require_batch(x, 3, "random_crop");
  const int64_t n = x.dim(0), h = x.dim(-2), w = x.dim(-1);
  if (height < 1 || width < 1 || height > h + 2 * padding || width > w + 2 * padding || padding < 0)
    throw ValueError("random_crop: a (" + std::to_string(height) + ", " + std::to_string(width) +
                     ") window does not fit images of (" + std::to_string(h) + ", " + std::to_string(w) + ") padded by " +
                     std::to_string(padding));
  const Tensor top = randint(0, h + 2 * padding - height + 1, {n}, Int64, Device::cpu(), &gen);
  const Tensor left = randint(0, w + 2 * padding - width + 1, {n}, Int64, Device::cpu(), &gen);
  return crop(x, top, left, height, width, padding);
}

Tensor horizontal_flip(const Tensor& x, const Tensor& flip_mask) {
  require_batch(x, 2, "horizontal_flip");
  require_samples(flip_mask, x.dim(0), "horizontal_flip", "the flip mask");
  Shape s(static_cast<size_t>(x.ndim()), 1);
  s[0] = x.dim(0);
  const Tensor m = (flip_mask.dtype() == Bool ? flip_mask : flip_mask != 0.0).reshape(s);
  return where(m, flip(x, {-1}), x);
}

Tensor random_horizontal_flip(const Tensor& x, double p, Generator& gen) {
  require_batch(x, 2, "random_horizontal_flip");
  return horizontal_flip(x, bernoulli({x.dim(0)}, p, Bool, Device::cpu(), &gen));
}

Tensor resize(const Tensor& x, const std::vector<int64_t>& size, bool antialias) {
  if (!x.defined()) throw ValueError("resize: the input is undefined");
  if (x.ndim() < 2)
    throw ShapeError("resize: input of shape " + shape_str(x.shape()) + " (valid: at least 2 axes, the last two (height, width))");
  const int64_t h = x.dim(-2), w = x.dim(-1);
  if (h == 0 || w == 0)
    throw ShapeError("resize: input of shape " + shape_str(x.shape()) + " has an empty image (valid: height, width >= 1)");
  const auto [oh, ow] = detail::resize_target(h, w, size, "resize");
  Shape s = x.shape();
  s[s.size() - 2] = oh;
  s[s.size() - 1] = ow;
  const Tensor xf = (x.dtype() == Float32 ? x : x.astype(Float32)).to(Device::cpu()).contiguous();
  Tensor out = empty(s, Float32, Device::cpu());
  const int64_t planes = xf.numel() / (h * w);
  detail::resize_planes(xf.data<float>(), planes, h, w, out.data<float>(), oh, ow, antialias);
  return x.device() == Device::cpu() ? out : out.to(x.device());
}

Tensor center_crop(const Tensor& x, int64_t height, int64_t width) {
  require_batch(x, 2, "center_crop");
  const int64_t h = x.dim(-2), w = x.dim(-1);
  if (height < 1 || width < 1 || height > h || width > w)
    throw ValueError("center_crop: a (" + std::to_string(height) + ", " + std::to_string(width) +
                     ") window does not fit images of (" + std::to_string(h) + ", " + std::to_string(w) + ")");
  // Python's round(): halves to even (the default rounding mode)
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(h - height) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(w - width) / 2.0));
  return x.index({Ellipsis, Slice(top, top + height), Slice(left, left + width)}).contiguous();
}

Tensor rgb_to_grayscale(const Tensor& x, int64_t num_output_channels) {
  if (!x.defined()) throw ValueError("rgb_to_grayscale: the input is undefined");
  if (x.ndim() < 3 || x.dim(-3) != 3)
    throw ShapeError("rgb_to_grayscale: input of shape " + shape_str(x.shape()) + " (valid: (..., 3, H, W), RGB along axis -3)");
  if (num_output_channels != 1 && num_output_channels != 3)
    throw ValueError("rgb_to_grayscale: num_output_channels must be 1 or 3, got " + std::to_string(num_output_channels));
  const Tensor xf = is_floating(x.dtype()) ? x : x.astype(Float32);
  const Tensor r = xf.index({Ellipsis, Slice(0, 1), Slice(), Slice()});
  const Tensor g = xf.index({Ellipsis, Slice(1, 2), Slice(), Slice()});
  const Tensor b = xf.index({Ellipsis, Slice(2, 3), Slice(), Slice()});
  const Tensor l = r * 0.2989 + g * 0.587 + b * 0.114;
  return num_output_channels == 1 ? l : concatenate({l, l, l}, -3);
}

Tensor grayscale_to_rgb(const Tensor& x) {
  if (!x.defined()) throw ValueError("grayscale_to_rgb: the input is undefined");
  if (x.ndim() < 3 || x.dim(-3) != 1)
    throw ShapeError("grayscale_to_rgb: input of shape " + shape_str(x.shape()) + " (valid: (..., 1, H, W), one channel along axis -3)");
  return concatenate({x, x, x}, -3);
}

Tensor one_hot(const Tensor& labels, int64_t num_classes, DType dtype) {
  if (!labels.defined()) throw ValueError("one_hot: the labels are undefined");
  if (!is_integral(labels.dtype()))
    throw DTypeError(std::string("one_hot: labels have dtype ") + dtype_name(labels.dtype()) + " (valid: an integer dtype)");
  if (num_classes < 1) throw ValueError("one_hot: num_classes must be >= 1, got " + std::to_string(num_classes));
  if (labels.numel() > 0) {
    const int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
    if (lo < 0 || hi >= num_classes)
      throw ValueError("one_hot: labels range over [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (valid: 0 to " +
                       std::to_string(num_classes - 1) + ")");
  }
  return equal(labels.astype(Int64).expand_dims(-1), arange(num_classes, Int64, labels.device())).astype(dtype);
}

// --- Transform objects

Example Transform::apply_example(Example example, Generator& gen) const {
  for (Tensor& t : example) t = t.expand_dims(0);
  Batch out = (*this)(std::move(example), gen);
  for (Tensor& t : out) t = t[0];
  return out;
}

Compose::Compose(std::vector<Transform> transforms)
    : Transform(
          [ts = std::move(transforms)](Batch b, Generator& gen) {
            for (const Transform& t : ts) b = t(std::move(b), gen);
            return b;
          },
          "compose") {}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std, size_t field, int64_t channel_axis)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "Normalize");
            t = normalize(t, mean, std, channel_axis);
            return b;
          },
          "normalize") {}

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding, size_t field)
    : Transform(
          [=](Batch b, Generator& gen) {
            Tensor& t = field_of(b, field, "RandomCrop");
            t = random_crop(t, height, width, padding, gen);
            return b;
          },
          "random_crop") {}

RandomHorizontalFlip::RandomHorizontalFlip(double p, size_t field)
    : Transform(
          [=](Batch b, Generator& gen) {
            Tensor& t = field_of(b, field, "RandomHorizontalFlip");
            t = random_horizontal_flip(t, p, gen);
            return b;
          },
          "random_horizontal_flip") {
  if (!(p >= 0 && p <= 1)) throw ValueError("RandomHorizontalFlip: p must be in [0, 1], got " + std::to_string(p));
}

Resize::Resize(std::vector<int64_t> size, bool antialias, size_t field)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "Resize");
            t = resize(t, size, antialias);
            return b;
          },
          "resize") {
  detail::resize_target(1, 1, size, "Resize");  // a bad size fails here, not in the first batch
}

CenterCrop::CenterCrop(int64_t height, int64_t width, size_t field)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "CenterCrop");
            t = center_crop(t, height, width);
            return b;
          },
          "center_crop") {
  if (height < 1 || width < 1)
    throw ValueError("CenterCrop: height and width must be >= 1, got " + std::to_string(height) + ", " + std::to_string(width));
}

Grayscale::Grayscale(int64_t num_output_channels, size_t field)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "Grayscale");
            t = rgb_to_grayscale(t, num_output_channels);
            return b;
          },
          "grayscale") {
  if (num_output_channels != 1 && num_output_channels != 3)
    throw ValueError("Grayscale: num_output_channels must be 1 or 3, got " + std::to_string(num_output_channels));
}

GrayscaleToRGB::GrayscaleToRGB(size_t field)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "GrayscaleToRGB");
            t = grayscale_to_rgb(t);
            return b;
          },
          "grayscale_to_rgb") {}

OneHot::OneHot(int64_t num_classes, size_t field, DType dtype)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "OneHot");
            t = one_hot(t, num_classes, dtype);
            return b;
          },
          "one_hot") {}

Cast::Cast(DType dtype, double scale, size_t field)
    : Transform(
          [=](Batch b, Generator&) {
            Tensor& t = field_of(b, field, "Cast");
            t = t.astype(dtype);
            if (scale != 1.0) t = t * scale;
            return b;
          },
          "cast") {}

Lambda::Lambda(std::function<Tensor(const Tensor&, Generator&)> fn, size_t field, std::string name)
    : Transform(
          [fn = std::move(fn), field, name](Batch b, Generator& gen) {
            Tensor& t = field_of(b, field, name);
            t = fn(t, gen);
            return b;
          },
          name) {}

}  // namespace loom::data
