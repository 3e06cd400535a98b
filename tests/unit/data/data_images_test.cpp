// Images: JPEG/PNG decoding and encoding (known pixel arrays; files PIL writes, decoded as PIL
// decodes them), hostile files (typed errors naming the file, the pixel limit checked on the
// header), ImageFolder (folder layout and list files, against torchvision's ImageFolder) and the
// image transforms (resize against torch's interpolate and PIL, center crop, grayscale).
#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/index.h>
#include <loom/core/tensor.h>
#include <loom/data/image.h>
#include <loom/data/image_folder.h>
#include <loom/data/loader.h>
#include <loom/data/npy.h>
#include <loom/data/transforms.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/reduction.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "unit/common/core_test_util.h"

using namespace loom;
using namespace loom::data;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::TempDir;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A (c, h, w) uint8 image with every value distinct enough to catch a transposition.
Tensor pattern(int64_t c, int64_t h, int64_t w, int salt = 0) {
  std::vector<uint8_t> v;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) v.push_back(static_cast<uint8_t>((k * 97 + y * 31 + x * 7 + salt * 13) % 256));
  return from_vector(v, {c, h, w});
}

// A smooth image (JPEG's lossy compression keeps it within a few levels).
Tensor smooth(int64_t c, int64_t h, int64_t w) {
  std::vector<uint8_t> v;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) v.push_back(static_cast<uint8_t>(40 + k * 30 + y * 2 + x * 2));  // below 256 while h + w < 80
  return from_vector(v, {c, h, w});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return abs(a.astype(Float64) - b.astype(Float64)).max().item<double>();
}

bool have_python(const std::string& modules) {
  return std::system(("/usr/bin/python3 -c 'import " + modules + "' > /dev/null 2>&1").c_str()) == 0;
}

// Runs a Python program with `d` set to the directory (numpy as np imported).
void python(const std::string& dir, const std::string& code) {
  const std::string script = dir + "/make.py";
  write_bytes(script, "import numpy as np\nd = '" + dir + "'\n" + code);
  ASSERT_EQ(std::system(("/usr/bin/python3 '" + script + "'").c_str()), 0) << code;
}

// PNG's CRC-32 (for hand-edited headers that libpng would otherwise refuse for their CRC).
uint32_t crc32(const std::string& s, size_t begin, size_t end) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = begin; i < end; ++i) {
    c ^= static_cast<uint8_t>(s[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

void put_be32(std::string& s, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) s[at + k] = static_cast<char>((v >> (24 - 8 * k)) & 0xFF);
}

}  // namespace

// ---------- decoding and encoding

TEST(Images, PngRoundTripIsExact) {
  for (int64_t c : {1, 3}) {
    const Tensor img = pattern(c, 5, 7);
    const std::string png = encode_png(img);
    const Tensor back = decode_image(png.data(), png.size(), {.mode = c == 1 ? ImageMode::Gray : ImageMode::RGB});
    EXPECT_EQ(back.dtype(), UInt8);
    EXPECT_EQ(back.shape(), (Shape{c, 5, 7}));
    EXPECT_EQ(back.to_vector<uint8_t>(), img.to_vector<uint8_t>()) << c;
  }
}

TEST(Images, ModeConversionAsPil) {
  // RGB read as gray: L = (R 19595 + G 38470 + B 7471 + 2^15) >> 16 (PIL's convert("L"))
  const Tensor rgb = pattern(3, 4, 6);
  const std::string png = encode_png(rgb);
  const Tensor gray = decode_image(png.data(), png.size(), {.mode = ImageMode::Gray});
  ASSERT_EQ(gray.shape(), (Shape{1, 4, 6}));
  const auto v = rgb.to_vector<uint8_t>(), g = gray.to_vector<uint8_t>();
  for (size_t i = 0; i < 24; ++i)
    EXPECT_EQ(g[i], (v[i] * 19595u + v[24 + i] * 38470u + v[48 + i] * 7471u + 0x8000u) >> 16) << i;
  // gray read as RGB: the channel three times
  const Tensor one = pattern(1, 3, 2);
  const std::string png1 = encode_png(one);
  const Tensor three = decode_image(png1.data(), png1.size());
  ASSERT_EQ(three.shape(), (Shape{3, 3, 2}));
  for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(three[k].to_vector<uint8_t>(), one[0].to_vector<uint8_t>());
}

TEST(Images, JpegWithinTolerance) {
  const Tensor rgb = smooth(3, 24, 32);
  const std::string jpg = encode_jpeg(rgb, 95);
  const Tensor back = decode_image(jpg.data(), jpg.size());
  ASSERT_EQ(back.shape(), (Shape{3, 24, 32}));
  EXPECT_LE(max_abs_diff(back, rgb), 6.0);
  const Tensor gray = smooth(1, 16, 16);
  const std::string gjpg = encode_jpeg(gray, 100);
  const Tensor gback = decode_image(gjpg.data(), gjpg.size(), {.mode = ImageMode::Gray});
  ASSERT_EQ(gback.shape(), (Shape{1, 16, 16}));
  EXPECT_LE(max_abs_diff(gback, gray), 2.0);
}

TEST(Images, ReadImageFromFile) {
  TempDir tmp;
  const Tensor img = pattern(3, 9, 4);
  write_bytes(tmp / "a.png", encode_png(img));
  EXPECT_EQ(read_image(tmp / "a.png").to_vector<uint8_t>(), img.to_vector<uint8_t>());
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "missing.png"); }), {"missing.png"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp.dir.string()); }), {"not a regular file"}));
}

TEST(Images, EncoderRefusesBadTensors) {
  EXPECT_THROW(encode_png(zeros({3, 4, 4}, Float32)), DTypeError);
  EXPECT_THROW(encode_png(zeros({2, 4, 4}, UInt8)), ShapeError);
  EXPECT_THROW(encode_jpeg(zeros({4, 4}, UInt8)), ShapeError);
  EXPECT_THROW(encode_jpeg(zeros({3, 4, 4}, UInt8), 0), ValueError);
}

// Files PIL writes (palette, alpha, gray + alpha, 16-bit, progressive and 4:4:4 JPEG) decode to
// PIL's own convert("RGB") / convert("L") pixels; files Loom writes decode in PIL to Loom's.
TEST(Images, AgreesWithPil) {
  if (!have_python("PIL")) GTEST_SKIP() << "/usr/bin/python3 with PIL (python3-pil) is not available";
  TempDir tmp;
  const Tensor mine = pattern(3, 11, 13);
  write_bytes(tmp / "loom.png", encode_png(mine));
  write_bytes(tmp / "loom.jpg", encode_jpeg(smooth(3, 16, 24), 90));
  python(tmp.dir.string(), R"(
from PIL import Image
rng = np.random.default_rng(0)
rgb = rng.integers(0, 256, (10, 14, 3), dtype=np.uint8)
smooth = (np.add.outer(np.arange(20), np.arange(18))[..., None] * np.array([3, 5, 7]) % 256).astype(np.uint8)
Image.fromarray(rgb).save(d + '/rgb.png')
Image.fromarray(rng.integers(0, 256, (10, 14, 4), dtype=np.uint8), 'RGBA').save(d + '/rgba.png')
Image.fromarray(rng.integers(0, 256, (10, 14, 2), dtype=np.uint8), 'LA').save(d + '/la.png')
p = Image.fromarray(rgb).convert('P', palette=Image.ADAPTIVE, colors=16)
p.info['transparency'] = 3
p.save(d + '/palette.png', transparency=3)
Image.fromarray(rng.integers(0, 256, (10, 14), dtype=np.uint8), 'L').save(d + '/gray.png')
Image.fromarray(rgb).convert('1').save(d + '/bits.png')
Image.fromarray(smooth).save(d + '/q90.jpg', quality=90)
Image.fromarray(smooth).save(d + '/444.jpg', quality=80, subsampling=0)
Image.fromarray(smooth).save(d + '/prog.jpg', quality=85, progressive=True)
Image.fromarray(smooth[..., 0]).save(d + '/gray.jpg', quality=90)
for name in ['rgb.png', 'rgba.png', 'la.png', 'palette.png', 'gray.png', 'bits.png', 'q90.jpg', '444.jpg', 'prog.jpg',
             'gray.jpg', 'loom.png', 'loom.jpg']:
    im = Image.open(d + '/' + name)
    np.save(d + '/' + name + '.rgb.npy', np.ascontiguousarray(np.asarray(im.convert('RGB')).transpose(2, 0, 1)))
    np.save(d + '/' + name + '.l.npy', np.asarray(im.convert('L'))[None])
# 16-bit gray: Loom keeps the high byte
v16 = rng.integers(0, 65536, (6, 5), dtype=np.uint16)
Image.fromarray(v16, 'I;16').save(d + '/g16.png')
np.save(d + '/g16.png.l.npy', (v16 >> 8).astype(np.uint8)[None])
)");
  for (std::string name : {"rgb.png", "rgba.png", "la.png", "palette.png", "gray.png", "bits.png", "q90.jpg", "444.jpg", "prog.jpg",
                           "gray.jpg", "loom.png", "loom.jpg"}) {
    const Tensor rgb = read_image(tmp / name);
    EXPECT_EQ(rgb.to_vector<uint8_t>(), load_npy(tmp / (name + ".rgb.npy")).to_vector<uint8_t>()) << name;
    const Tensor l = read_image(tmp / name, {.mode = ImageMode::Gray});
    EXPECT_EQ(l.to_vector<uint8_t>(), load_npy(tmp / (name + ".l.npy")).to_vector<uint8_t>()) << name;
  }
  EXPECT_EQ(read_image(tmp / "loom.png").to_vector<uint8_t>(), mine.to_vector<uint8_t>());
  const Tensor g16 = read_image(tmp / "g16.png", {.mode = ImageMode::Gray});
  EXPECT_EQ(g16.to_vector<uint8_t>(), load_npy(tmp / "g16.png.l.npy").to_vector<uint8_t>());
}

// ---------- hostile files

TEST(Images, CorruptAndTruncatedFilesAreIOErrorsNamingTheFile) {
  TempDir tmp;
  const std::string png = encode_png(pattern(3, 16, 16));
  const std::string jpg = encode_jpeg(smooth(3, 32, 32), 90);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.png", ""},
      {"text.jpg", "hello, not an image"},
      {"short.png", png.substr(0, 8)},
      {"half.png", png.substr(0, png.size() / 2)},
      {"noiend.png", png.substr(0, png.size() - 12)},
      {"half.jpg", jpg.substr(0, jpg.size() / 2)},
      {"head.jpg", jpg.substr(0, 20)},
      {"garbled.png", png.substr(0, 40) + std::string(png.size() - 40, '\x55')},
  };
  for (const auto& c : cases) {
    const std::string& name = c.first;  // a plain reference: clang 14 cannot capture a structured binding
    write_bytes(tmp / name, c.second);
    const std::string msg = error_message<IOError>([&] { read_image(tmp / name); });
    EXPECT_TRUE(contains_all(msg, {name})) << msg;
  }
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "half.jpg"); }), {"JPEG", "truncated"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "text.jpg"); }), {"neither a JPEG nor a PNG"}));
  // the thread's decoder is fresh after a failure: a good image decodes as before
  const Tensor ok = decode_image(jpg.data(), jpg.size());
  EXPECT_LE(max_abs_diff(ok, smooth(3, 32, 32)), 6.0);
}

TEST(Images, HugeDimensionsAreRefusedFromTheHeader) {
  TempDir tmp;
  // PNG: IHDR (width at byte 16, height at 20, CRC over bytes 12..29) set to 100000 x 100000
  std::string png = encode_png(pattern(3, 4, 4));
  put_be32(png, 16, 100000);
  put_be32(png, 20, 100000);
  put_be32(png, 29, crc32(png, 12, 29));
  write_bytes(tmp / "huge.png", png);
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "huge.png"); }),
                           {"huge.png", "100000 x 100000", "more than the limit of 178956970"}));
  // JPEG: the SOF0 frame's height and width (after FF C0, length, precision) set to 60000 x 60000
  std::string jpg = encode_jpeg(smooth(3, 8, 8), 90);
  const size_t sof = jpg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  jpg[sof + 5] = jpg[sof + 7] = static_cast<char>(60000 >> 8);
  jpg[sof + 6] = jpg[sof + 8] = static_cast<char>(60000 & 0xFF);
  write_bytes(tmp / "huge.jpg", jpg);
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "huge.jpg"); }), {"huge.jpg", "60000 x 60000", "limit"}));
  // a lower limit of the caller's
  write_bytes(tmp / "ok.png", encode_png(pattern(1, 10, 10)));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { read_image(tmp / "ok.png", {.max_pixels = 99}); }), {"10 x 10", "99"}));
  EXPECT_NO_THROW(read_image(tmp / "ok.png", {.max_pixels = 100}));
  EXPECT_THROW(read_image(tmp / "ok.png", {.max_pixels = 0}), ValueError);
}

// ---------- ImageFolder

namespace {

// root/<class>/... with PNGs whose pixels are pattern(3, 6, 8, salt), salt = the file's number.
void make_tree(const TempDir& tmp) {
  int salt = 0;
  for (const std::string rel : {"root/dog/b.png", "root/dog/a.PNG", "root/cat/z.png", "root/cat/sub/a.png", "root/cat/m.jpg",
                                "root/bird/x.png"})
    write_bytes(tmp / rel, rel.ends_with(".jpg") ? encode_jpeg(pattern(3, 6, 8, salt++), 95) : encode_png(pattern(3, 6, 8, salt++)));
  write_bytes(tmp / "root/dog/notes.txt", "not an image");
  write_bytes(tmp / "root/stray.png", encode_png(pattern(3, 6, 8)));  // not in a class folder
}

}  // namespace

TEST(ImageFolder, ClassPerFolderInTorchvisionOrder) {
  TempDir tmp;
  make_tree(tmp);
  const ImageFolder ds(tmp / "root");
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(ds.class_index("dog"), 2);
  EXPECT_THROW(ds.class_index("fish"), ValueError);
  std::vector<std::string> got;
  for (const auto& s : ds.samples()) got.push_back(fs::path(s.path).lexically_relative(tmp.dir).string() + " " + std::to_string(s.label));
  // files of a folder before its sub-folders' (torchvision walks sorted folders, then sorted names)
  EXPECT_EQ(got, (std::vector<std::string>{"root/bird/x.png 0", "root/cat/m.jpg 1", "root/cat/z.png 1", "root/cat/sub/a.png 1",
                                           "root/dog/a.PNG 2", "root/dog/b.png 2"}));
  // an example: float32 (C, H, W) in [0, 1], int64 label
  const Example ex = ds.get(5);  // root/dog/b.png, salt 0
  EXPECT_EQ(ex[0].dtype(), Float32);
  EXPECT_EQ(ex[0].shape(), (Shape{3, 6, 8}));
  EXPECT_EQ(ex[1].dtype(), Int64);
  EXPECT_EQ(ex[1].item<int64_t>(), 2);
  EXPECT_LE(max_abs_diff(ex[0], pattern(3, 6, 8, 0).astype(Float32) / 255.0), 1e-6);
  EXPECT_THROW(ds.get(6), IndexError);

  if (have_python("torchvision")) {
    python(tmp.dir.string(), R"(
import torchvision
ds = torchvision.datasets.ImageFolder(d + '/root')
with open(d + '/tv.txt', 'w') as f:
    f.write(' '.join(ds.classes) + '\n')
    for p, y in ds.samples:
        f.write('%s %d\n' % (p, y))
)");
    std::string expect = "bird cat dog\n";
    for (const auto& s : ds.samples()) expect += s.path + " " + std::to_string(s.label) + "\n";
    EXPECT_EQ(read_file(tmp / "tv.txt"), expect);
  }
}

TEST(ImageFolder, ExtensionsModeAndErrors) {
  TempDir tmp;
  make_tree(tmp);
  const ImageFolder png_only(tmp / "root", {.extensions = {".png"}, .mode = ImageMode::Gray});
  EXPECT_EQ(png_only.size(), 5);
  EXPECT_EQ(png_only.get(0)[0].shape(), (Shape{1, 6, 8}));
  // a class folder without images names the class and the extensions
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { ImageFolder(tmp / "root", {.extensions = {".jpg"}}); }),
                           {"bird", "dog", ".jpg"}));
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { ImageFolder(tmp / "nowhere"); }), {"nowhere", "not a directory"}));
  write_bytes(tmp / "flat/a.png", encode_png(pattern(3, 2, 2)));
  EXPECT_THROW(ImageFolder(tmp / "flat/a.png"), IOError);
  // a corrupt image fails when it is read, naming it
  write_bytes(tmp / "root/cat/broken.png", "\x89PNG\r\n\x1a\n broken");
  const ImageFolder with_broken(tmp / "root");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { with_broken.get(1); }), {"broken.png"}));
}

TEST(ImageFolder, ListFile) {
  TempDir tmp;
  make_tree(tmp);
  write_bytes(tmp / "root/list.txt", "# path label\ndog/b.png 1\n  cat/z.png\t0  \n\n" + (tmp / "root/bird/x.png") + ",3\r\n");
  const ImageFolder ds = ImageFolder::from_list(tmp / "root/list.txt");
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.samples()[0].path, tmp / "root/dog/b.png");
  EXPECT_EQ(ds.samples()[1].path, tmp / "root/cat/z.png");
  EXPECT_EQ(ds.samples()[2].path, tmp / "root/bird/x.png");
  EXPECT_EQ(ds.get(2)[1].item<int64_t>(), 3);
  EXPECT_LE(max_abs_diff(ds.get(0)[0], pattern(3, 6, 8, 0).astype(Float32) / 255.0), 1e-6);
  // names as labels: sorted into classes; paths relative to the given root
  write_bytes(tmp / "names.txt", "dog/b.png dog\ncat/z.png cat\ndog/a.PNG dog\n");
  const ImageFolder named = ImageFolder::from_list(tmp / "names.txt", {}, tmp / "root");
  EXPECT_EQ(named.classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(named.samples()[0].label, 1);
  EXPECT_EQ(named.samples()[1].label, 0);
  EXPECT_EQ(named.samples()[0].path, tmp / "root/dog/b.png");
  write_bytes(tmp / "bad.txt", "a.png 1\nlonely\n");
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { ImageFolder::from_list(tmp / "bad.txt"); }), {"bad.txt", "line 2", "lonely"}));
  write_bytes(tmp / "none.txt", "# nothing\n");
  EXPECT_THROW(ImageFolder::from_list(tmp / "none.txt"), IOError);
}

TEST(ImageFolder, ResizeTransformAndLoaderWorkers) {
  TempDir tmp;
  make_tree(tmp);
  const auto ds = std::make_shared<ImageFolder>(
      tmp / "root", ImageFolderOptions{.size = {4}, .transform = Compose({CenterCrop(4, 4), Normalize({0.5}, {0.25})})});
  // resized on decoding (shorter side 6 -> 4, width int(4 * 8 / 6) = 5), then cropped and normalized
  const Example ex = ds->get(5);
  ASSERT_EQ(ex[0].shape(), (Shape{3, 4, 4}));
  const Tensor expect = (center_crop(resize(pattern(3, 6, 8, 0).astype(Float32) / 255.0, {4, 5}), 4, 4) - 0.5) / 0.25;
  EXPECT_LE(max_abs_diff(ex[0], expect), 1e-5);
  // batches are the same built by 0 or 2 worker threads, random augmentation included
  LoaderOptions opts{.batch_size = 4, .shuffle = true, .seed = 3, .n_jobs = 0, .transform = RandomHorizontalFlip()};
  DataLoader serial(ds, opts);
  opts.n_jobs = 2;
  DataLoader workers(ds, opts);
  int batches = 0;
  for (const Batch& b : serial) {
    const std::optional<Batch> w = workers.next();
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(b[0].shape()[1], 3);
    EXPECT_EQ(b[0].to_vector<float>(), (*w)[0].to_vector<float>());
    EXPECT_EQ(b[1].to_vector<int64_t>(), (*w)[1].to_vector<int64_t>());
    ++batches;
  }
  EXPECT_EQ(batches, 2);
  // without a per-example transform, get_batch resizes into the batch: equal to collate of get()
  const ImageFolder plain(tmp / "root", {.size = {5, 7}});
  const Batch fast = plain.get_batch({4, 0, 2});
  const Batch slow = collate({plain.get(4), plain.get(0), plain.get(2)});
  EXPECT_EQ(fast[0].shape(), (Shape{3, 3, 5, 7}));
  EXPECT_EQ(fast[0].to_vector<float>(), slow[0].to_vector<float>());
  EXPECT_EQ(fast[1].to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_THROW(plain.get_batch({0, 6}), IndexError);
  write_bytes(tmp / "root/bird/y.png", encode_png(pattern(3, 2, 2)));
  const ImageFolder mixed(tmp / "root");
  EXPECT_TRUE(contains_all(error_message<ShapeError>([&] { mixed.get_batch({0, 1}); }), {"y.png", "(3, 2, 2)", "(3, 6, 8)"}));
}

// ---------- transforms

TEST(ImageTransforms, ResizeSizesAndCenterCrop) {
  const Tensor x = arange(2 * 3 * 6 * 10, Float32).reshape({2, 3, 6, 10});
  EXPECT_EQ(resize(x, {3}).shape(), (Shape{2, 3, 3, 5}));    // shorter side 6 -> 3, 10 -> int(3 * 10 / 6)
  EXPECT_EQ(resize(x, {4, 7}).shape(), (Shape{2, 3, 4, 7}));
  EXPECT_EQ(resize(x[0][0], {5}).shape(), (Shape{5, 8}));     // int(5 * 10 / 6) = 8
  EXPECT_EQ(resize(x, {6, 10}).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(resize(x, {1, 2, 3}), ValueError);
  EXPECT_THROW(resize(x, {0}), ValueError);
  // halving 4 -> 2 with antialias: output pixel 0 has center 1 and support 2, source pixels
  // 0, 1, 2 at distances 0.5, 0.5, 1.5 (scaled by 1/2): triangle weights 3/4, 3/4, 1/4, normalized
  // to 3/7, 3/7, 1/7 (pixel 1: 1/7, 3/7, 3/7 of pixels 1, 2, 3); without antialias the mean of
  // the two nearest pixels
  const Tensor ramp = arange(4, Float32).reshape({1, 4});
  EXPECT_LE(max_abs_diff(resize(ramp, {1, 2}), from_vector<float>({(0 * 3 + 1 * 3 + 2 * 1) / 7.0f, (1 * 1 + 2 * 3 + 3 * 3) / 7.0f}, {1, 2})), 1e-6);
  EXPECT_EQ(resize(ramp, {1, 2}, false).to_vector<float>(), (std::vector<float>{0.5f, 2.5f}));
  // center crop: top = round((6 - 3) / 2) = 2 (half to even), left = round((10 - 4) / 2) = 3
  const Tensor c = center_crop(x, 3, 4);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 3, 4}));
  EXPECT_EQ(c.index({0, 0, 0, 0}).item<float>(), 2 * 10 + 3);
  EXPECT_EQ(center_crop(x, 5, 4).index({0, 0, 0, 0}).item<float>(), 0 * 10 + 3);  // round(0.5) = 0
  EXPECT_THROW(center_crop(x, 7, 4), ValueError);
  // grayscale: 0.2989 R + 0.587 G + 0.114 B
  const Tensor rgb = from_vector<float>({1, 0, 0, 0.5f}, {2, 2, 1, 1}).reshape({1, 4, 1, 1});
  EXPECT_THROW(rgb_to_grayscale(rgb), ShapeError);
  const Tensor px = from_vector<float>({0.2f, 0.4f, 0.8f}, {3, 1, 1});
  EXPECT_NEAR(rgb_to_grayscale(px).item<float>(), 0.2989 * 0.2 + 0.587 * 0.4 + 0.114 * 0.8, 1e-6);
  EXPECT_EQ(rgb_to_grayscale(px, 3).shape(), (Shape{3, 1, 1}));
  EXPECT_EQ(grayscale_to_rgb(rgb_to_grayscale(px)).shape(), (Shape{3, 1, 1}));
}

// resize against torch.nn.functional.interpolate (bilinear, align_corners=False, antialias on and
// off), center_crop and rgb_to_grayscale against torchvision, on the same random images.
TEST(ImageTransforms, AgreeWithTorch) {
  if (!have_python("torch, torchvision")) GTEST_SKIP() << "/usr/bin/python3 with torch and torchvision is not available";
  TempDir tmp;
  python(tmp.dir.string(), R"(
import torch, torch.nn.functional as F, torchvision.transforms.functional as TF
g = torch.Generator().manual_seed(0)
x = torch.rand(2, 3, 13, 17, generator=g)
np.save(d + '/x.npy', x.numpy())
for i, (h, w) in enumerate([(7, 9), (29, 31), (13, 5), (4, 40), (1, 1), (13, 17)]):
    for aa in (0, 1):
        np.save(d + '/r%d_%d.npy' % (i, aa), F.interpolate(x, size=(h, w), mode='bilinear', align_corners=False,
                                                          antialias=bool(aa)).numpy())
np.save(d + '/crop.npy', TF.center_crop(x, [6, 8]).numpy())
np.save(d + '/gray.npy', TF.rgb_to_grayscale(x).numpy())
)");
  const Tensor x = load_npy(tmp / "x.npy");
  const std::vector<std::vector<int64_t>> sizes = {{7, 9}, {29, 31}, {13, 5}, {4, 40}, {1, 1}, {13, 17}};
  for (size_t i = 0; i < sizes.size(); ++i)
    for (int aa = 0; aa < 2; ++aa) {
      const Tensor ref = load_npy(tmp / ("r" + std::to_string(i) + "_" + std::to_string(aa) + ".npy"));
      EXPECT_LE(max_abs_diff(resize(x, sizes[i], aa == 1), ref), 2e-6) << i << " antialias " << aa;
    }
  EXPECT_EQ(center_crop(x, 6, 8).to_vector<float>(), load_npy(tmp / "crop.npy").to_vector<float>());
  EXPECT_LE(max_abs_diff(rgb_to_grayscale(x), load_npy(tmp / "gray.npy")), 1e-6);
}

// ImageFolder's decode-and-resize against torchvision's ImageFolder with Resize + ToTensor (PIL's
// 8-bit resampling rounds between its two passes: within one level of 255).
TEST(ImageFolder, ResizedImagesAgreeWithTorchvision) {
  if (!have_python("torchvision")) GTEST_SKIP() << "/usr/bin/python3 with torchvision is not available";
  TempDir tmp;
  python(tmp.dir.string(), R"(
from PIL import Image
import torchvision, torchvision.transforms as T
rng = np.random.default_rng(1)
import os
os.makedirs(d + '/root/a'); os.makedirs(d + '/root/b')
Image.fromarray(rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)).save(d + '/root/a/1.png')
Image.fromarray(rng.integers(0, 256, (17, 53, 3), dtype=np.uint8)).save(d + '/root/b/2.png')
yy, xx = np.mgrid[0:64, 0:48]
Image.fromarray(np.stack([yy * 3, xx * 5, yy + xx], -1).astype(np.uint8)).save(d + '/root/b/3.jpg', quality=92)
for name, tf in [('short', T.Resize(12)), ('exact', T.Resize((9, 70))), ('up', T.Resize(90))]:
    ds = torchvision.datasets.ImageFolder(d + '/root', transform=T.Compose([tf, T.ToTensor()]))
    for i in range(len(ds)):
        np.save(d + '/%s%d.npy' % (name, i), ds[i][0].numpy())
)");
  for (const auto& [name, size] : std::vector<std::pair<std::string, std::vector<int64_t>>>{{"short", {12}}, {"exact", {9, 70}}, {"up", {90}}}) {
    const ImageFolder ds(tmp / "root", {.size = size});
    for (int64_t i = 0; i < ds.size(); ++i) {
      const Tensor ref = load_npy(tmp / (name + std::to_string(i) + ".npy"));
      EXPECT_LE(max_abs_diff(ds.get(i)[0], ref), 1.0 / 255 + 1e-6) << name << " " << i;
    }
  }
}
