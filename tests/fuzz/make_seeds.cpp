// Writes the fuzz targets' seed corpora: small files that Loom itself writes (safetensors,
// model, state and checkpoint files, NPY, NPZ, vocabularies), and, for the formats Loom reads
// but does not write (IDX, CSV, plain text, deflated NPZ members), small files in the layout
// the readers document. Generated at build time so that no binary seed is committed.
//   make_seeds <dir>   -> <dir>/<target>/<seed> for every target in tests/fuzz
#include <loom/core/file.h>
#include <zlib.h>

#include <filesystem>
#include <iostream>

#include "fuzz/fuzz_common.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(root / target);
  write_file_atomic((root / target / name).string(), bytes);
}

// zlib's deflate with the given window bits: 15 + 16 a gzip file, -15 raw deflate (as ZIP members hold it).
std::string deflate_with(const std::string& s, int window_bits) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, s.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  zs.avail_in = static_cast<uInt>(s.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
std::string gzip(const std::string& s) { return deflate_with(s, 15 + 16); }
std::string deflate_raw(const std::string& s) { return deflate_with(s, -15); }

void le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

// A one-member ZIP with a deflated member (np.savez_compressed's layout; Loom writes stored ones).
std::string deflated_npz(const std::string& key, const std::string& npy) {
  const std::string name = key + ".npy", data = deflate_raw(npy);
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(npy.data()), static_cast<uInt>(npy.size())));
  std::string zip, cd;
  le(zip, 0x04034b50, 4), le(zip, 20, 2), le(zip, 0, 2), le(zip, 8, 2), le(zip, 0, 4), le(zip, crc, 4);
  le(zip, data.size(), 4), le(zip, npy.size(), 4), le(zip, name.size(), 2), le(zip, 0, 2);
  zip += name + data;
  le(cd, 0x02014b50, 4), le(cd, 20, 2), le(cd, 20, 2), le(cd, 0, 2), le(cd, 8, 2), le(cd, 0, 4), le(cd, crc, 4);
  le(cd, data.size(), 4), le(cd, npy.size(), 4), le(cd, name.size(), 2), le(cd, 0, 2), le(cd, 0, 2), le(cd, 0, 2);
  le(cd, 0, 2), le(cd, 0, 4), le(cd, 0, 4);
  cd += name;
  const size_t cd_offset = zip.size();
  zip += cd;
  le(zip, 0x06054b50, 4), le(zip, 0, 2), le(zip, 0, 2), le(zip, 1, 2), le(zip, 1, 2), le(zip, cd.size(), 4), le(zip, cd_offset, 4);
  le(zip, 0, 2);
  return zip;
}

// An IDX file: 0, 0, type code, rank, big-endian dimensions, big-endian elements.
std::string idx(uint8_t code, const std::vector<uint32_t>& dims, const std::vector<int64_t>& values, int esize) {
  std::string s{'\0', '\0', static_cast<char>(code), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int i = 3; i >= 0; --i) s += static_cast<char>((d >> (8 * i)) & 0xff);
  for (int64_t v : values)
    for (int i = esize - 1; i >= 0; --i) s += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  return s;
}

uint64_t bits(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

// Small graphs covering the layer kinds graph_from_json rebuilds.
std::vector<std::pair<std::string, Graph>> graphs() {
  std::vector<std::pair<std::string, Graph>> out;
  manual_seed(1);
  {
    loom_fuzz::Net net;
    out.emplace_back("net", net.graph);
  }
  {
    nn::Input x(5, Float32, "x");
    nn::Linear l1(x, 5, {}, "l1");
    nn::Activation a1(l1, nn::tanh, "a1");
    nn::Layer l1b = l1.reuse_with(nn::Activation(l1, nn::sigmoid, "a2"), "l1b");
    nn::Linear out_l(nn::Add(a1, l1b, "add"), 5, {.shared_weights = l1.state().param("weights"), .transpose_weights = true}, "out");
    out.emplace_back("tied", Graph::build({out_l}, {x}));
  }
  {
    nn::Input img(Shape{-1, 2, 6, 6}, Float32, "img");
    nn::Conv2D c(img, 3, 3, {.padding = "same"}, "conv");
    nn::BatchNorm bn(c, {}, "bn");
    nn::Activation r(bn, nn::relu, "relu");
    nn::MaxPool2D p(r, 2, {}, "pool");
    nn::AvgPool2D ap(p, 1, {}, "avg");
    nn::Conv2DTranspose t(ap, 2, {2, 2}, {.stride = {2, 2}}, "up");
    nn::AdaptiveAvgPool2D ad(t, {2, 2}, "adapt");
    nn::Flatten f(ad, "flat");
    nn::Dropout d(f, 0.2, 3, "drop");
    nn::Linear fc(d, 3, {}, "fc");
    out.emplace_back("cnn", Graph::build({fc}, {img}));
  }
  {
    nn::Input seq(Shape{-1, 4, 3}, Float32, "seq");
    nn::RNN enc(seq, 3, {.cell = nn::CellKind::GRU, .bidirectional = true}, "enc");
    nn::RNN mid(enc, 2, {.cell = nn::CellKind::RNN}, "mid");
    nn::RNN dec(mid, 2, {.cell = nn::CellKind::LSTM, .return_sequences = false}, "dec");
    nn::Conv1D c1(seq, 2, 2, {}, "c1");
    nn::GlobalPool gp(c1, nn::GlobalPool::Mode::Max, "gp");
    nn::Linear fc(nn::Concat({dec, gp}, 1, "cat"), 2, {}, "fc");
    out.emplace_back("rnn", Graph::build({fc}, {seq}));
  }
  out.emplace_back("zoo_mlp", zoo::mlp(4, {5}, 3, nn::relu, 0.1).graph);
  out.emplace_back("zoo_lstm_lm", zoo::lstm_lm(12, 4, 5, 2, 0.1).graph);
  out.emplace_back("zoo_transformer", zoo::transformer_classifier(12, 5, 8, 2, 8, 1, 3).graph);
  out.emplace_back("zoo_unet", zoo::unet(1, 2, 2, 1, true).graph);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds <dir>\n";
    return 2;
  }
  root = argv[1];
  loom_fuzz::init();

  // NPY and NPZ, through Loom's writers.
  manual_seed(2);
  const std::vector<std::pair<std::string, Tensor>> arrays = {
      {"f32", arange(6, Float32).reshape({2, 3})},
      {"f64_0d", full({}, 2.5, Float64)},
      {"i32_empty", zeros({0, 3}, Int32)},
      {"i64", arange(4, Int64) - 2},
      {"u8", arange(5, UInt8)},
      {"bool", from_vector<uint8_t>({1, 0, 1}, {3}).astype(Bool)},
      {"f16", arange(3, Float32).astype(Float16)},
      {"f32_transposed", arange(6, Float32).reshape({2, 3}).transpose({1, 0})},
      {"f32_4d", normal({1, 2, 2, 2})},
  };
  for (const auto& [name, a] : arrays) put("npy", name + ".npy", data::npy_to_bytes(a));
  put("npz", "empty.npz", data::npz_to_bytes({}));
  put("npz", "two.npz", data::npz_to_bytes({{"x", arrays[0].second}, {"y", arrays[3].second}}));
  put("npz", "mixed.npz", data::npz_to_bytes({{"b", arrays[5].second}, {"h", arrays[6].second}, {"s", arrays[1].second}}));
  put("npz", "deflated.npz", deflated_npz("x", data::npy_to_bytes(arrays[0].second)));

  // safetensors, through Loom's writer.
  put("safetensors", "empty.safetensors", io::encode_safetensors({}));
  put("safetensors", "meta.safetensors", io::encode_safetensors({{"w", arrays[0].second}}, {{"k", "v"}, {"loom.format", "state"}}));
  put("safetensors", "dtypes.safetensors",
      io::encode_safetensors({{"b", arrays[5].second}, {"u8", arrays[4].second}, {"i32", arrays[2].second}, {"i64", arrays[3].second},
                              {"f16", arrays[6].second}, {"bf16", arange(2, Float32).astype(BFloat16)}, {"f64", arrays[1].second}}));

  // Model files (also safetensors seeds), their architectures alone, state files and checkpoints.
  for (const auto& [name, g] : graphs()) {
    const std::string file = io::encode_safetensors(io::graph_state(g), {{"loom.format", "model"}, {"loom.graph", graph_to_json(g)}});
    put("model", name + ".safetensors", file);
    put("graph_json", name + ".json", graph_to_json(g));
  }
  put("graph_json", "zoo_lenet.json", graph_to_json(zoo::lenet().graph));
  put("graph_json", "zoo_resnet.json", graph_to_json(zoo::resnet({1, 1, 1, 1}, 10).graph));
  put("graph_json", "zoo_densenet.json", graph_to_json(zoo::densenet(4, {2, 2}, 8, 2, 0.5, 10).graph));
  {
    manual_seed(3);
    loom_fuzz::Net net;
    const fs::path tmp = root / "tmp";
    fs::create_directories(tmp);
    io::save_model((tmp / "m").string(), net.graph, {{"step", full({}, 3, Int64)}}, {{"note", "seed"}});
    put("model", "net_extra.safetensors", read_file((tmp / "m").string()));
    put("state", "model.safetensors", read_file((tmp / "m").string()));
    put("safetensors", "model.safetensors", read_file((tmp / "m").string()));
    io::save_state((tmp / "s").string(), net.graph);
    put("state", "plain.safetensors", read_file((tmp / "s").string()));
    io::save_state((tmp / "s").string(), net.graph, {{"m", arrays[0].second}}, {{"epoch", "2"}});
    put("state", "extra.safetensors", read_file((tmp / "s").string()));

    train::Model model = loom_fuzz::make_model(net);
    data::DataLoader loader(loom_fuzz::toy_data(), {.batch_size = 8, .shuffle = true, .seed = 1});
    model.save_checkpoint((tmp / "c").string());
    put("checkpoint", "fresh.safetensors", read_file((tmp / "c").string()));
    model.fit(loader, {.epochs = 1, .progress = false});
    model.save_checkpoint((tmp / "c").string(), &loader);
    put("checkpoint", "trained.safetensors", read_file((tmp / "c").string()));
    fs::remove_all(tmp);
  }

  // IDX (MNIST layout; Loom reads but does not write it).
  put("idx", "images.idx", idx(0x08, {2, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 255, 254, 253, 9, 8, 7, 6, 5, 4}, 1));
  put("idx", "labels.idx", idx(0x08, {5}, {1, 0, 9, 3, 3}, 1));
  put("idx", "int8.idx", idx(0x09, {2, 2}, {-1, 2, -128, 127}, 1));
  put("idx", "int16.idx", idx(0x0B, {3}, {-300, 7, 32767}, 2));
  put("idx", "int32.idx", idx(0x0C, {2}, {-70000, 1}, 4));
  put("idx", "float32.idx", idx(0x0D, {2}, {static_cast<int64_t>(bits(1.5f)), static_cast<int64_t>(bits(-0.25f))}, 4));
  put("idx", "float64.idx", idx(0x0E, {1, 1}, {static_cast<int64_t>(bits(3.25))}, 8));
  put("idx", "empty.idx", idx(0x08, {0, 4}, {}, 1));
  put("idx", "images.idx.gz", gzip(idx(0x08, {1, 2, 2}, {1, 2, 3, 4}, 1)));
  put("idx", "int16.idx.gz", gzip(idx(0x0B, {2}, {-2, 2}, 2)));

  // CSV: two option bytes (tests/fuzz/fuzz_csv.cpp), then the file.
  auto csv = [](char delim, int flags, const std::string& text) { return std::string{delim, static_cast<char>(flags)} + text; };
  put("csv", "header.csv", csv(',', 1, "a,b,c\n1,2,3\n4.5,-6e2,nan\n"));
  put("csv", "quoted.csv", csv(',', 1 | (3 << 6), "\"a\", \"b\"\r\n\"1\",2\r\n\r\n 3 , \"4\"\r\n"));
  put("csv", "noheader_i64.csv", csv(';', 3 << 1, "1;2\n-3;4\n"));
  put("csv", "tsv_columns.csv", csv('\t', 1 | (1 << 4) | (1 << 6), "# comment\nx\ty\tz\n1\t2\t3\n"));
  put("csv", "bool.csv", csv(',', 1 | (5 << 1) | (2 << 6), "p,q\ntrue,0\nFALSE,1\n"));
  put("csv", "u8.csv", csv('|', 4 << 1, "255|0\n+7|1\n"));
  put("csv", "inf_f64.csv", csv(' ', 1 << 1, "inf -inf\n1e308 -0\n"));
  put("csv", "header.csv.gz", csv(',', 1, gzip("a,b\n1,2\n")));

  // Text: one option byte (tests/fuzz/fuzz_text.cpp), then the file.
  put("text", "ptb.txt", std::string{'\x10'} + " the cat sat on the mat \n the <unk> ran \n\n a b c a\n");
  put("text", "tabs.txt", std::string{'\x05'} + "x\ty\r\nz x\n");
  put("text", "ptb.txt.gz", std::string{'\x10'} + gzip("one two two\nthree\n"));
  {
    const fs::path tmp = root / "tmp";
    fs::create_directories(tmp);
    data::Vocabulary::from_tokens(data::split_tokens("the cat sat on the mat the end")).save((tmp / "v").string());
    put("text", "vocab.txt", std::string{'\x10'} + read_file((tmp / "v").string()));
    fs::remove_all(tmp);
  }
  // Images, through Loom's encoders: PNG gray and RGB, JPEG gray and RGB (4:2:0).
  {
    auto img = [](int64_t c, int64_t h, int64_t w) {
      std::vector<uint8_t> v;
      for (int64_t i = 0; i < c * h * w; ++i) v.push_back(static_cast<uint8_t>(i * 37 % 256));
      return from_vector(v, {c, h, w});
    };
    put("image", "gray.png", data::encode_png(img(1, 5, 7)));
    put("image", "rgb.png", data::encode_png(img(3, 9, 6)));
    put("image", "gray.jpg", data::encode_jpeg(img(1, 8, 8), 90));
    put("image", "rgb.jpg", data::encode_jpeg(img(3, 17, 12), 75));
  }
  // ONNX models, through Loom's exporter (what import_onnx reads back).
  {
    loom_fuzz::Net net;
    put("onnx", "net.onnx", io::encode_onnx(net.graph));
    put("onnx", "lenet.onnx", io::encode_onnx(zoo::lenet(10).graph));
    nn::Input x({-1, 2, 6, 6}, Float32, "x");
    nn::Layer h = nn::Conv2D(x, 2, 3, {.padding = 1}, "conv");
    h = nn::MaxPool2D(nn::BatchNorm(h, {}, "bn"), 2, {}, "pool");
    h = nn::Concat({nn::Flatten(h, "flat"), nn::Flatten(nn::Transpose(h, {0, 2, 1}, "t"), "flat_t")}, -1, "cat");
    put("onnx", "conv.onnx", io::encode_onnx(Graph::build({nn::Activation(h, nn::softmax, "probs")}, {x})));
    // attention: the blocks the importer matches back to MultiHeadAttention / TransformerEncoderLayer
    nn::Input s(Shape{-1, -1, 4}, Float32, "s");
    nn::Input keep(Shape{-1, -1}, DType::Bool, "keep");
    nn::Layer e = nn::TransformerEncoderLayer(s, 2, {.ff_units = 6, .activation = nn::gelu, .norm_first = true, .causal = true}, keep, "enc");
    e = nn::TransformerEncoderLayer(e, 1, {.ff_units = 5}, std::nullopt, "enc_post");
    put("onnx", "attention.onnx", io::encode_onnx(Graph::build({nn::MultiHeadAttention(e, s, s, 2, {.bias = false}, std::nullopt, "cross")}, {s, keep})));
  }
  // Requests to the model server (fuzz_serve): the method's byte, the path, a newline, the body.
  {
    const std::string infer = R"({"id": "1", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                  "data": [1, 2, 3, 4, 5, 6, 7, 8]}], "outputs": [{"name": "y"}]})";
    put("serve", "infer.txt", std::string("\x01/v2/models/mlp/infer\n") + infer);
    put("serve", "infer_version.txt", std::string("\x01/v2/models/mlp/versions/1/infer\n") + infer);
    put("serve", "infer_nested.txt", std::string("\x01/v2/models/mlp/infer\n") +
                                         R"({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [[1, 2, 3, 4]]}]})");
    put("serve", "metadata.txt", std::string(1, '\0') + ("/v2/models/mlp\n"));
    put("serve", "ready.txt", std::string(1, '\0') + ("/v2/models/mlp/ready\n"));
    put("serve", "health.txt", std::string(1, '\0') + ("/v2/health/live\n"));
    put("serve", "server.txt", std::string(1, '\0') + ("/v2\n"));
    put("serve", "metrics.txt", std::string(1, '\0') + ("/metrics\n"));
  }
  // Requests to the generation server (fuzz_text_serve), as fuzz_serve's
  {
    const std::string post(1, '\x01'), get(1, '\0');
    put("text_serve", "completion.txt", post + "/v1/completions\n" +
                                            R"({"model": "tiny", "prompt": "hello", "max_tokens": 4, "temperature": 0.7, "top_k": 5, "seed": 1, "stop": ["x"]})");
    put("text_serve", "completion_ids.txt", post + "/v1/completions\n" + R"({"prompt": [[1, 2, 300]], "max_tokens": 3, "echo": true})");
    put("text_serve", "stream.txt", post + "/v1/completions\n" +
                                        R"({"prompt": "aa", "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}})");
    put("text_serve", "chat.txt", post + "/v1/chat/completions\n" +
                                      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 3, "stream": true})");
    put("text_serve", "models.txt", get + "/v1/models\n");
    put("text_serve", "model.txt", get + "/v1/models/tiny\n");
    put("text_serve", "metrics.txt", get + "/metrics\n");
  }
  // Requests to the dashboard (fuzz_ui): the first byte (method, Host, token), then the path, the
  // query string and the body, one line each.
  {
    const std::string get(1, '\x00'), post(1, '\x11');
    put("ui", "runs.txt", get + "/api/runs\nsort=loss&order=desc&limit=10&filter=lr\n");
    put("ui", "curves.txt", get + "/api/runs/curves\nruns=1,2&metric=loss&x=time&smoothing=0.5&width=400&format=json\n");
    put("ui", "curves_svg.txt", get + "/api/runs/curves\nruns=1,2&x=step&height=300\n");
    put("ui", "compare.txt", get + "/api/runs/compare\nruns=1,2&differences=1\n");
    put("ui", "group.txt", get + "/api/runs/group\nby=batch&metric=accuracy&format=json\n");
    put("ui", "model.txt", get + "/api/models/mlp\n\n");
    put("ui", "architecture.txt", get + "/api/models/mlp/1/architecture\nformat=summary\n");
    put("ui", "samples.txt", get + "/api/datasets/digits/1/samples\nquery=label >= 1 order by label desc&limit=3\n");
    put("ui", "png.txt", get + "/api/datasets/digits/1/samples/2/image.png\n\n");
    put("ui", "tasks.txt", get + "/api/tasks\nstatus=pending&cursor=0\n");
    put("ui", "alias.txt", post + "/api/models/mlp/aliases/production\n\n{\"version\": 2}");
    put("ui", "cancel.txt", post + "/api/tasks/1/cancel\n\n");
    put("ui", "page.txt", get + "/\n\n");
  }
  std::cout << "seeds written to " << root.string() << "\n";
  return 0;
}
