// Loom's own pooling and batch-norm kernels against oneDNN 2.6's pooling and batch
// normalization primitives called directly, on the main job's shapes (forward, float32, NCHW,
// plain layouts). Prints JSON lines; the faster of the two is what Loom should run.
#include <loom/loom.h>
#include <omp.h>

#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

using namespace loom;

namespace {

double median_seconds(const std::function<void()>& f) { return bench::measure(f).median; }


void print(const char* name, int threads, double s) {
  std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.9g}\n", name, threads, s);
}

}  // namespace

int main() {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    omp_set_num_threads(threads);
    const int64_t N = 128, C = 32, H = 28, W = 28;
    Tensor x = uniform({N, C, H, W});
    Tensor y = empty({N, C, H / 2, W / 2});
    // max pool 2x2 / 2
    print("maxpool2x2_n128_c32_28_loom", threads, median_seconds([&] { max_pool2d(x, 2); }));
    dnnl::memory::desc src({N, C, H, W}, dt::f32, tag::nchw), dst({N, C, H / 2, W / 2}, dt::f32, tag::nchw);
    dnnl::pooling_forward::desc pd(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst, {2, 2}, {2, 2},
                                   {0, 0}, {0, 0});
    dnnl::pooling_forward pool(dnnl::pooling_forward::primitive_desc(pd, eng));
    dnnl::memory msrc(src, eng, x.data_ptr()), mdst(dst, eng, y.data_ptr());
    print("maxpool2x2_n128_c32_28_onednn", threads, median_seconds([&] {
            pool.execute(strm, {{DNNL_ARG_SRC, msrc}, {DNNL_ARG_DST, mdst}});
            strm.wait();
          }));
    // batch norm, training statistics, with scale and shift
    Tensor w = ones({C}), b = zeros({C}), rm = zeros({C}), rv = ones({C});
    print("batchnorm_train_n128_c32_28_loom", threads, median_seconds([&] { batch_norm(x, rm, rv, w, b, true); }));
    Tensor out = empty_like(x), mean = empty({C}), var = empty({C}), ss = empty({2, C});
    dnnl::batch_normalization_forward::desc bd(dnnl::prop_kind::forward_training, src, 1e-5f,
                                               dnnl::normalization_flags::use_scale_shift);
    dnnl::batch_normalization_forward bn(dnnl::batch_normalization_forward::primitive_desc(bd, eng));
    dnnl::memory::desc cdesc({C}, dt::f32, tag::x), ssdesc({2, C}, dt::f32, tag::nc);
    dnnl::memory mo(src, eng, out.data_ptr()), mm(cdesc, eng, mean.data_ptr()), mv(cdesc, eng, var.data_ptr()),
        mss(ssdesc, eng, ss.data_ptr());
    print("batchnorm_train_n128_c32_28_onednn", threads, median_seconds([&] {
            bn.execute(strm, {{DNNL_ARG_SRC, msrc}, {DNNL_ARG_DST, mo}, {DNNL_ARG_MEAN, mm}, {DNNL_ARG_VARIANCE, mv},
                              {DNNL_ARG_SCALE_SHIFT, mss}});
            strm.wait();
          }));
  }
  return 0;
}
