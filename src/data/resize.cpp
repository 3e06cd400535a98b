// Separable bilinear resampling (see resize.h): a horizontal pass into a planar float buffer,
// then a vertical pass that mixes whole rows (the inner loop runs along a row and vectorizes).
#include "data/resize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "loom/core/error.h"

namespace loom::data::detail {

std::pair<int64_t, int64_t> resize_target(int64_t h, int64_t w, const std::vector<int64_t>& size, const char* who) {
  for (int64_t s : size)
    if (s < 1) throw ValueError(std::string(who) + ": size values must be >= 1, got " + std::to_string(s));
  if (size.size() == 2) return {size[0], size[1]};
  if (size.size() != 1)
    throw ValueError(std::string(who) + ": size has " + std::to_string(size.size()) +
                     " values (valid: {s}, the shorter side, or {height, width})");
  const int64_t s = size[0];
  // torchvision: the longer side is int(s * long / short), computed in floating point
  if (h <= w) return {s, std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(s) * static_cast<double>(w) / static_cast<double>(h)))};
  return {std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(s) * static_cast<double>(h) / static_cast<double>(w))), s};
}

ResizeTaps resize_taps(int64_t in, int64_t out, bool antialias) {
  ResizeTaps t;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double fscale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = fscale;  // the triangle filter's support (1) widened by the scale
  t.ksize = std::min<int64_t>(antialias ? static_cast<int64_t>(std::ceil(support)) * 2 + 1 : 2, in);
  t.first.resize(static_cast<size_t>(out));
  t.weights.assign(static_cast<size_t>(out * t.ksize), 0.0f);
  std::vector<double> w(static_cast<size_t>(t.ksize) + 1);
  for (int64_t i = 0; i < out; ++i) {
    int64_t lo, n;
    if (antialias) {
      const double center = (static_cast<double>(i) + 0.5) * scale;
      lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
      const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
      n = std::min<int64_t>(hi - lo, t.ksize);
      double total = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double x = std::abs((static_cast<double>(k + lo) - center + 0.5) / fscale);
        w[static_cast<size_t>(k)] = x < 1.0 ? 1.0 - x : 0.0;
        total += w[static_cast<size_t>(k)];
      }
      for (int64_t k = 0; k < n; ++k) w[static_cast<size_t>(k)] = total > 0 ? w[static_cast<size_t>(k)] / total : 0.0;
    } else {
      const double src = std::max((static_cast<double>(i) + 0.5) * scale - 0.5, 0.0);
      lo = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
      const double l = lo < in - 1 ? src - static_cast<double>(lo) : 0.0;
      n = std::min<int64_t>(2, in - lo);
      w[0] = 1.0 - l;
      w[1] = l;
    }
    // The window starts early enough that all ksize taps lie inside the source.
    const int64_t first = std::min(lo, in - t.ksize);
    t.first[static_cast<size_t>(i)] = first;
    for (int64_t k = 0; k < n; ++k)
      t.weights[static_cast<size_t>(i * t.ksize + (lo - first) + k)] = static_cast<float>(w[static_cast<size_t>(k)]);
  }
  return t;
}

namespace {

// dst(oh, w) = rows of src(h, w) mixed by the taps, times scale; `planes` planes one after another.
void vertical(const float* src, int64_t planes, int64_t h, int64_t w, float* dst, int64_t oh, const ResizeTaps& t, float scale) {
  for (int64_t p = 0; p < planes; ++p) {
    const float* s = src + p * h * w;
    float* d = dst + p * oh * w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      float* out = d + oy * w;
      const float* wt = t.weights.data() + oy * t.ksize;
      const float* base = s + t.first[static_cast<size_t>(oy)] * w;
      const float w0 = wt[0] * scale;
      for (int64_t x = 0; x < w; ++x) out[x] = w0 * base[x];
      for (int64_t k = 1; k < t.ksize; ++k) {
        const float wk = wt[k] * scale;
        if (wk == 0.0f) continue;
        const float* row = base + k * w;
        for (int64_t x = 0; x < w; ++x) out[x] += wk * row[x];
      }
    }
  }
}

}  // namespace

void resize_planes(const float* src, int64_t planes, int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow, bool antialias) {
  std::vector<float> tmp;
  const float* mid = src;
  float* mid_out = h == oh ? dst : nullptr;
  if (w != ow) {
    if (!mid_out) {
      tmp.resize(static_cast<size_t>(planes * h * ow));
      mid_out = tmp.data();
    }
    const ResizeTaps t = resize_taps(w, ow, antialias);
    for (int64_t r = 0; r < planes * h; ++r) {
      const float* row = src + r * w;
      float* out = mid_out + r * ow;
      for (int64_t ox = 0; ox < ow; ++ox) {
        const float* wt = t.weights.data() + ox * t.ksize;
        const float* s = row + t.first[static_cast<size_t>(ox)];
        float acc = 0;
        for (int64_t k = 0; k < t.ksize; ++k) acc += wt[k] * s[k];
        out[ox] = acc;
      }
    }
    mid = mid_out;
  }
  if (h != oh) {
    vertical(mid, planes, h, ow, dst, oh, resize_taps(h, oh, antialias), 1.0f);
  } else if (w == ow) {
    std::copy(src, src + planes * h * w, dst);
  }
}

namespace {

// One row of interleaved pixels (w, C) -> C plane rows of ow, times scale; K taps known at
// compile time for the common filters (the loop over taps unrolls).
template <int64_t C, int64_t K>
void horizontal_row(const float* row, const ResizeTaps& t, int64_t ow, float scale, float* out, int64_t plane) {
  for (int64_t ox = 0; ox < ow; ++ox) {
    const float* wt = t.weights.data() + ox * K;
    const float* s = row + t.first[static_cast<size_t>(ox)] * C;
    float acc[C] = {};
    for (int64_t k = 0; k < K; ++k)
      for (int64_t ch = 0; ch < C; ++ch) acc[ch] += wt[k] * s[k * C + ch];
    for (int64_t ch = 0; ch < C; ++ch) out[ch * plane + ox] = acc[ch] * scale;
  }
}

template <int64_t C>
void horizontal_row_k(const float* row, const ResizeTaps& t, int64_t ow, float scale, float* out, int64_t plane) {
  switch (t.ksize) {
    case 2: return horizontal_row<C, 2>(row, t, ow, scale, out, plane);
    case 3: return horizontal_row<C, 3>(row, t, ow, scale, out, plane);
    case 5: return horizontal_row<C, 5>(row, t, ow, scale, out, plane);
    case 7: return horizontal_row<C, 7>(row, t, ow, scale, out, plane);
    default:
      for (int64_t ox = 0; ox < ow; ++ox) {
        const float* wt = t.weights.data() + ox * t.ksize;
        const float* s = row + t.first[static_cast<size_t>(ox)] * C;
        for (int64_t ch = 0; ch < C; ++ch) {
          float acc = 0;
          for (int64_t k = 0; k < t.ksize; ++k) acc += wt[k] * s[k * C + ch];
          out[ch * plane + ox] = acc * scale;
        }
      }
  }
}

}  // namespace

void resize_hwc_u8(const uint8_t* src, int64_t h, int64_t w, int64_t c, float* dst, int64_t oh, int64_t ow, float scale,
                   bool antialias) {
  // Vertical pass first, on whole interleaved rows (w * c contiguous values: it vectorizes), into
  // float rows of (oh, w, c); then the horizontal pass de-interleaves into the c planes.
  const int64_t n = w * c;
  std::vector<float> tmp(static_cast<size_t>(oh * n));
  if (h != oh) {
    const ResizeTaps t = resize_taps(h, oh, antialias);
    for (int64_t oy = 0; oy < oh; ++oy) {
      float* out = tmp.data() + oy * n;
      const float* wt = t.weights.data() + oy * t.ksize;
      const uint8_t* base = src + t.first[static_cast<size_t>(oy)] * n;
      const float w0 = wt[0];
      for (int64_t i = 0; i < n; ++i) out[i] = w0 * static_cast<float>(base[i]);
      for (int64_t k = 1; k < t.ksize; ++k) {
        const float wk = wt[k];
        if (wk == 0.0f) continue;
        const uint8_t* row = base + k * n;
        for (int64_t i = 0; i < n; ++i) out[i] += wk * static_cast<float>(row[i]);
      }
    }
  } else {
    for (int64_t i = 0; i < h * n; ++i) tmp[static_cast<size_t>(i)] = static_cast<float>(src[i]);
  }
  const int64_t plane = oh * ow;
  if (w == ow) {
    for (int64_t i = 0; i < oh * w; ++i)
      for (int64_t ch = 0; ch < c; ++ch) dst[ch * plane + i] = tmp[static_cast<size_t>(i * c + ch)] * scale;
    return;
  }
  const ResizeTaps t = resize_taps(w, ow, antialias);
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float* row = tmp.data() + oy * n;
    float* out = dst + oy * ow;
    if (c == 3) {
      horizontal_row_k<3>(row, t, ow, scale, out, plane);
    } else if (c == 1) {
      horizontal_row_k<1>(row, t, ow, scale, out, plane);
    } else {
      for (int64_t ox = 0; ox < ow; ++ox) {
        const float* wt = t.weights.data() + ox * t.ksize;
        const float* s = row + t.first[static_cast<size_t>(ox)] * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          float acc = 0;
          for (int64_t k = 0; k < t.ksize; ++k) acc += wt[k] * s[k * c + ch];
          out[ch * plane + ox] = acc * scale;
        }
      }
    }
  }
}

}  // namespace loom::data::detail
