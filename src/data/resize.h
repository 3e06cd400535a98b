#pragma once
// Private to src/data: the separable bilinear resampling behind data::resize (transforms.cpp) and
// ImageFolder's fused decode-resize (image_folder.cpp).
//
// Output pixel i of an axis resized from `in` to `out` samples at center = (i + 0.5) * in / out.
// With antialias (PIL's and torch's antialias=True), the triangle filter is widened by the
// scale when shrinking (support = max(in / out, 1)) and its weights over the source pixels
// j in [center - support, center + support) are normalized; without antialias, the two nearest
// pixels of center - 0.5 (clamped at the edges) are mixed, as torch's bilinear with
// align_corners=False.
#include <cstdint>
#include <utility>
#include <vector>

namespace loom::data::detail {

struct ResizeTaps {
  int64_t ksize = 0;           // weights per output pixel
  std::vector<int64_t> first;  // first source index of output pixel i
  std::vector<float> weights;  // ksize per output pixel (zeros past the source's edge)
};

// The (height, width) an image of (h, w) is resized to for `size` (as torchvision's Resize):
// {s}: the shorter side becomes s and the longer int(s * long / short); {oh, ow}: exactly that.
// Throws ValueError naming `who` for any other size.
std::pair<int64_t, int64_t> resize_target(int64_t h, int64_t w, const std::vector<int64_t>& size, const char* who);

ResizeTaps resize_taps(int64_t in, int64_t out, bool antialias);

// `planes` float planes of (h, w) -> (oh, ow), each written to dst + p * oh * ow.
void resize_planes(const float* src, int64_t planes, int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow, bool antialias);

// Interleaved uint8 (h, w, c) pixels -> c float planes of (oh, ow), times `scale` (1/255: [0, 1]).
void resize_hwc_u8(const uint8_t* src, int64_t h, int64_t w, int64_t c, float* dst, int64_t oh, int64_t ow, float scale,
                   bool antialias);

}  // namespace loom::data::detail
