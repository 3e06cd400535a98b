// Model files, graph JSON and safetensors against hostile and unlucky input (crafted here):
// no crash, no stack overflow, no allocation beyond what the file holds, a typed loom::Error
// naming what was wrong and what is valid. Also the JSON conventions (NaN/inf, exact int64)
// and the cleanup of temporaries that killed saves leave behind.
#include <gtest/gtest.h>
#include <loom/core/device.h>
#include <loom/core/dim_vector.h>
#include <loom/core/dtype.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/core/memory.h>
#include <loom/core/shape.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/graph/module.h>
#include <loom/graph/serialize.h>
#include <loom/io/model_file.h>
#include <loom/io/safetensors.h>
#include <loom/nn/conv.h>
#include <loom/nn/dropout.h>
#include <loom/nn/init.h>
#include <loom/nn/input.h>
#include <loom/nn/layer.h>
#include <loom/nn/linear.h>
#include <loom/nn/pooling.h>
#include <loom/ops/conv.h>
#include <loom/ops/creation.h>
#include <loom/ops/elementwise.h>
#include <loom/ops/pooling.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "unit/common/core_test_util.h"

using namespace loom;
using loom_test::contains_all;
using loom_test::error_message;
using loom_test::TempDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A model file holding `graph_json` as its architecture and the given tensors.
void write_model_file(const std::string& path, const std::string& graph_json, const io::TensorMap& tensors = {}) {
  io::save_safetensors(path, tensors, {{"loom.format", "model"}, {"loom.graph", graph_json}});
}

json pool_graph_json(const char* kind) {
  nn::Input x(Shape{-1, 1, 8, 8}, Float32, "x");
  nn::Layer p = std::string(kind) == "MaxPool2D" ? nn::Layer(nn::MaxPool2D(x, 2, {}, "p")) : nn::Layer(nn::AvgPool2D(x, 2, {}, "p"));
  return json::parse(graph_to_json(Graph::build({p}, {x})));
}

json conv_graph_json() {
  nn::Input x(Shape{-1, 1, 8, 8}, Float32, "x");
  nn::Conv2D c(x, 2, 3, {}, "c");
  return json::parse(graph_to_json(Graph::build({c}, {x})));
}

json& options_of(json& g, const std::string& name) {
  for (json& l : g["layers"])
    if (l["name"] == name) return l["options"];
  throw std::runtime_error("no layer " + name);
}

// `depth` levels of [[[...]]] as text.
std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

// ---------------------------------------------------------------- bad options

TEST(IoHostileFiles, StrideZeroAndOtherBadWindowsInAModelFileAreValueErrors) {
  TempDir dir;
  struct Case {
    const char* kind;
    const char* field;
    json value;
    std::vector<std::string> mention;
  };
  const std::vector<Case> cases = {
      {"MaxPool2D", "stride", {0, 0}, {"stride", "[1, "}},
      {"AvgPool2D", "stride", {0}, {"stride", "[1, "}},
      {"MaxPool2D", "kernel_size", json::array(), {"kernel_size"}},
      {"AvgPool2D", "kernel_size", {0, 2}, {"kernel_size"}},
      {"MaxPool2D", "padding", {-1}, {"padding", "[0, "}},
      {"Conv2D", "stride", {0}, {"stride"}},
      {"Conv2D", "dilation", {0, 1}, {"dilation"}},
      {"Conv2D", "kernel_size", json::array(), {"kernel_size"}},
      {"Conv2D", "kernel_size", {0}, {"kernel_size"}},
      {"Conv2D", "padding", {-2}, {"padding"}},
      {"Conv2D", "stride", {1e300}, {"stride", "1e+300"}},
      {"Conv2D", "filters", 1e300, {"filters", "integer"}},
      {"Conv2D", "filters", "4", {"filters", "integer"}},
      {"Conv2D", "bias", 1, {"bias", "true or false"}},
      {"MaxPool2D", "ceil_mode", nullptr, {"ceil_mode"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.kind) + " " + c.field + " " + c.value.dump());
    json g = std::string(c.kind) == "Conv2D" ? conv_graph_json() : pool_graph_json(c.kind);
    options_of(g, std::string(c.kind) == "Conv2D" ? "c" : "p")[c.field] = c.value;
    const std::string path = dir / "m.safetensors";
    Graph ok = std::string(c.kind) == "Conv2D" ? graph_from_json(conv_graph_json().dump()) : Graph();
    write_model_file(path, g.dump(), std::string(c.kind) == "Conv2D" ? io::graph_state(ok) : io::TensorMap{});
    EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_model(path); }), c.mention));
    EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(g.dump()); }), c.mention));
  }
}

TEST(IoHostileFiles, StrideZeroAndOtherBadWindowsFromTheLayerAndOpApisAreValueErrors) {
  nn::Input x(Shape{-1, 1, 8, 8}, Float32, "x");
  EXPECT_THROW(nn::MaxPool2D(x, 2, {.stride = 0}), ValueError);
  EXPECT_THROW(nn::AvgPool2D(x, 2, {.stride = 0}), ValueError);
  EXPECT_THROW(nn::MaxPool2D(x, IntList(std::vector<int64_t>{})), ValueError);
  EXPECT_THROW(nn::AvgPool2D(x, 0), ValueError);
  EXPECT_THROW(nn::MaxPool2D(x, 2, {.padding = -1}), ValueError);
  EXPECT_THROW(nn::Conv2D(x, 2, 3, {.stride = 0}), ValueError);
  EXPECT_THROW(nn::Conv2D(x, 2, 3, {.dilation = 0}), ValueError);
  EXPECT_THROW(nn::Conv2D(x, 2, 0), ValueError);
  EXPECT_THROW(nn::Conv2D(x, 2, IntList(std::vector<int64_t>{})), ValueError);
  EXPECT_THROW(nn::Conv2D(x, 2, 3, {.padding = -1}), ValueError);
  EXPECT_THROW(nn::Conv1D(nn::Input(Shape{-1, 1, 8}, Float32), 2, 3, {.stride = 0}), ValueError);
  EXPECT_THROW(nn::Conv2DTranspose(x, 2, 3, {.stride = 0}), ValueError);
  EXPECT_THROW(nn::Conv2DTranspose(x, 2, 3, {.dilation = 0}), ValueError);
  EXPECT_THROW(nn::Conv2DTranspose(x, 2, 0), ValueError);
  // huge extents are refused rather than overflowing the output-size arithmetic
  EXPECT_THROW(nn::Conv2D(x, 2, 3, {.dilation = int64_t{1} << 62}), ValueError);
  Tensor t = zeros({1, 1, 8, 8}), w = zeros({2, 1, 3, 3});
  EXPECT_THROW(conv2d(t, w, Tensor(), 0), ValueError);
  EXPECT_THROW(conv2d(t, w, Tensor(), 1, -1), ValueError);
  EXPECT_THROW(conv2d(t, w, Tensor(), 1, 0, 0), ValueError);
  EXPECT_THROW(conv2d(t, zeros({2, 1, 0, 3})), Error);
  EXPECT_THROW(max_pool2d(t, 2, 0), ValueError);
  EXPECT_THROW(max_pool2d(t, 0), ValueError);
  EXPECT_THROW(max_pool2d(t, 2, 2, -1), ValueError);
  EXPECT_THROW(max_pool2d(t, 2, 2, 0, 0), ValueError);
  EXPECT_THROW(avg_pool2d(t, 2, 0), ValueError);
  EXPECT_THROW(avg_pool2d(t, 0), ValueError);
}

TEST(IoHostileFiles, GraphJsonOfTheWrongShapeIsAValueError) {
  for (const std::string& text : {std::string("[]"), std::string("1e999"), std::string("{\"format\":1}"), std::string("null"),
                                  std::string("\"loom.graph\""), std::string("{\"format\":\"loom.graph\",\"version\":1.5}"),
                                  std::string("{\"format\":\"loom.graph\",\"version\":1,\"layers\":{}}"),
                                  std::string("{\"format\":\"loom.graph\",\"version\":1,\"layers\":[7]}"),
                                  std::string("{\"format\":\"loom.graph\",\"version\":1,\"layers\":[],\"inputs\":[1],\"outputs\":[]}")}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(error_message<ValueError>([&] { graph_from_json(text); }).empty());
  }
  // options of the wrong type, floats in integer fields, integers out of range
  nn::Input x(4, Float32, "x");
  nn::Linear l(x, 3, {}, "l");
  nn::Dropout d(l, 0.5, 7, "d");
  const json good = json::parse(graph_to_json(Graph::build({d}, {x})));
  struct Case {
    const char* layer;
    const char* field;
    json value;
  };
  for (const Case& c : std::vector<Case>{{"l", "n_units", 1e300},
                                         {"l", "n_units", 3.5},
                                         {"l", "n_units", -3},
                                         {"l", "n_units", "3"},
                                         {"l", "n_units", json::array()},
                                         {"l", "weight_init", 3},
                                         {"l", "bias", "yes"},
                                         {"d", "seed", -1},
                                         {"d", "seed", 1e19},
                                         {"d", "probability", "half"},
                                         {"d", "probability", nullptr}}) {
    SCOPED_TRACE(std::string(c.layer) + "." + c.field + " = " + c.value.dump());
    json g = good;
    options_of(g, c.layer)[c.field] = c.value;
    EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(g.dump()); }), {c.field, "valid"}));
  }
  json g = good;
  g["layers"][1]["state"] = "0";
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(g.dump()); }), {"state"}));
  g = good;
  g["layers"][1].erase("options");
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(g.dump()); }), {"lacks", "options"}));
}

// ---------------------------------------------------------------- nesting

TEST(IoHostileFiles, DeeplyNestedJsonIsRefusedBeforeItCanExhaustTheStack) {
  TempDir dir;
  // graph text
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(nested(100000)); }), {"128", "deep"}));
  // layer options nested 100k deep in a model file
  nn::Input x(4, Float32, "x");
  nn::Linear l(x, 3, {}, "l");
  Graph g = Graph::build({l}, {x});
  std::string text = graph_to_json(g);
  const size_t at = text.find("\"bias\": true");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"junk\": " + nested(100000) + ", ");
  write_model_file(dir / "deep_options.safetensors", text, io::graph_state(g));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_model(dir / "deep_options.safetensors"); }),
                           {"deep_options.safetensors", "128 levels deep"}));
  // safetensors metadata nested 100k deep (not a string: its error message used to dump it)
  std::string header = "{\"__metadata__\":{\"a\":" + nested(100000) + "}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::decode_safetensors(bytes, nullptr, "deep.safetensors"); }),
                           {"deep.safetensors", "128 levels deep"}));
}

namespace {

// `depth` Modules, each wrapping the previous one applied to a fresh input.
Graph nested_modules(int depth) {
  nn::Input x0(2, Float32, "x0");
  nn::Layer m = nn::Module({x0}, nn::Linear(x0, 2, {}, "l0"), "m0");
  for (int d = 1; d < depth; ++d) {
    nn::Input xd(2, Float32, "x" + std::to_string(d));
    m = nn::Module({xd}, m.reuse_with({xd}, "u" + std::to_string(d)), "m" + std::to_string(d));
  }
  nn::Input x(2, Float32, "x");
  return Graph::build({m.reuse_with({x}, "top")}, {x});
}

// `depth` Modules in JSON, each a graph holding the next (as an attacker writes them).
json nested_module_json(int depth) {
  json inner = json::parse(graph_to_json(nested_modules(1)));
  for (int d = 1; d < depth; ++d) {
    json g = json::parse(graph_to_json(nested_modules(1)));
    g["layers"][1]["options"]["graph"] = std::move(inner);
    inner = std::move(g);
  }
  return inner;
}

}  // namespace

TEST(IoHostileFiles, ModuleNestingIsBoundedAndLinear) {
  TempDir dir;
  // 24 levels: saved and loaded, bit for bit
  Graph g24 = nested_modules(24);
  io::save_model(dir / "m24.safetensors", g24);
  Graph back = io::load_model(dir / "m24.safetensors");
  Tensor in = from_vector<float>({0.5f, -1.0f}, {1, 2});
  EXPECT_TRUE(array_equal(g24.compile()(in), back.compile()(in)));
  // 25: refused when saving (before the file is touched) and when loading
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::save_model(dir / "m25.safetensors", nested_modules(25)); }),
                           {"Modules nest more than 24"}));
  EXPECT_FALSE(fs::exists(dir / "m25.safetensors"));
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(nested_module_json(26).dump()); }), {"nest more than 24"}));
  // 1000 levels (a 256 KB file that took 30 s and 4 GB): refused at once
  const std::string deep = nested_module_json(1000).dump();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(error_message<ValueError>([&] { graph_from_json(deep); }).empty());
  EXPECT_LT(seconds_since(t0), 1.0);
}

// ---------------------------------------------------------------- allocation bounded by the file

TEST(IoHostileFiles, AModelFileCannotAskForMoreParametersThanItHolds) {
  TempDir dir;
  nn::Input x(3, Float32, "x");
  nn::Linear l(x, 5, {}, "l");
  json g = json::parse(graph_to_json(Graph::build({l}, {x})));
  g["layers"][0]["shape"] = {-1, 20000};
  options_of(g, "x")["shape"] = {-1, 20000};  // an Input is rebuilt from its options
  options_of(g, "l")["n_units"] = 20000;
  write_model_file(dir / "big.safetensors", g.dump());  // no tensors at all: a few hundred bytes
  EXPECT_LT(fs::file_size(dir / "big.safetensors"), 2000u);
  reset_peak_memory(Device::cpu());
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { io::load_model(dir / "big.safetensors"); }),
                           {"big.safetensors", "(20000, 20000)", "1600000000 bytes", "0 bytes left"}));
  EXPECT_LT(seconds_since(t0), 1.0);
  EXPECT_LT(memory_stats(Device::cpu()).peak_bytes - before, 1 << 20);
  // the same architecture with its tensors loads (and nothing is initialised twice)
  nn::Input x2(3, Float32, "x");
  nn::Linear l2(x2, 5, {.bias_init = nn::Init::constant(0.25)}, "l");
  Graph small = Graph::build({l2}, {x2});
  io::save_model(dir / "small.safetensors", small);
  Graph back = io::load_model(dir / "small.safetensors");
  Tensor in = from_vector<float>({1, 2, 3}, {1, 3});
  EXPECT_TRUE(array_equal(small.compile()(in), back.compile()(in)));
  // a tensor table too small for the architecture by one parameter
  io::TensorMap partial = io::graph_state(small);
  partial.erase("l/bias");
  write_model_file(dir / "partial.safetensors", graph_to_json(small), partial);
  EXPECT_THROW(io::load_model(dir / "partial.safetensors"), ValueError);
}

// ---------------------------------------------------------------- JSON conventions

TEST(IoHostileFiles, NonFiniteConstantsAndOptionsRoundTrip) {
  TempDir dir;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  nn::Input x(3, Float32, "x");
  nn::Constant c(tensor<float>({nan, -inf, inf, 1.5f, -0.0f}), "c");
  nn::Linear l(x, 2, {.bias_init = nn::Init::constant(-std::numeric_limits<double>::infinity())}, "l");
  nn::Param p(std::numeric_limits<double>::quiet_NaN(), "p");
  Graph g = Graph::build({c, l, p}, {x});
  io::save_model(dir / "nf.safetensors", g);
  Graph back = io::load_model(dir / "nf.safetensors");
  const auto v = back.outputs()[0]().to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], -inf);
  EXPECT_EQ(v[2], inf);
  EXPECT_EQ(v[3], 1.5f);
  EXPECT_TRUE(std::signbit(v[4]));
  // the options survive too: the initializer and the Param of the rebuilt graph
  json j = json::parse(graph_to_json(back));
  EXPECT_EQ(options_of(j, "l")["bias_init"]["a"], "-Infinity");
  EXPECT_EQ(options_of(j, "p")["value"], "NaN");
  EXPECT_EQ(options_of(j, "c")["values"][0], "NaN");
}

TEST(IoHostileFiles, Int64ConstantsAreStoredExactly) {
  TempDir dir;
  const std::vector<int64_t> big = {(int64_t{1} << 53) + 1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), -3};
  nn::Input x(1, Float32, "x");
  nn::Constant c(from_vector(big, {4}), "c");
  nn::Constant u(tensor<int64_t>({0, 255, 7}).astype(UInt8), "u");
  nn::Linear l(x, 1, {}, "l");
  Graph g = Graph::build({c, u, l}, {x});
  io::save_model(dir / "i.safetensors", g);
  Graph back = io::load_model(dir / "i.safetensors");
  EXPECT_EQ(back.outputs()[0]().to_vector<int64_t>(), big);
  EXPECT_EQ(back.outputs()[0]().dtype(), Int64);
  EXPECT_EQ(back.outputs()[1]().to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 7}));
  // integers out of the dtype's range, or floats in an integer Constant, are refused
  json j = json::parse(graph_to_json(g));
  options_of(j, "u")["values"] = {0, 256, 7};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(j.dump()); }), {"256", "uint8", "[0, 255]"}));
  options_of(j, "u")["values"] = {0, 2.5, 7};
  EXPECT_THROW(graph_from_json(j.dump()), ValueError);
  options_of(j, "u")["values"] = {0, 2};
  EXPECT_TRUE(contains_all(error_message<ValueError>([&] { graph_from_json(j.dump()); }), {"2 values", "(3,)"}));
  // files written before the change stored integers as floats: still read while exact
  options_of(j, "u")["values"] = {0.0, 255.0, 7.0};
  EXPECT_EQ(graph_from_json(j.dump()).outputs()[1]().to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 7}));
}

// ---------------------------------------------------------------- files

TEST(IoHostileFiles, SafetensorsRefusesFifosAndDevicesWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir / "pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    SCOPED_TRACE(path);
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_safetensors(path); }), {"load_safetensors", "not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_safetensors_metadata(path); }), {"not a regular file"}));
    EXPECT_TRUE(contains_all(error_message<IOError>([&] { io::load_model(path); }), {"not a regular file"}));
  }
}

TEST(IoHostileFiles, SavesRemoveTemporariesOfKilledSavesOfTheSameTarget) {
  TempDir dir;
  // a process that is gone: its temporaries are stale
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string target = dir / "w.safetensors";
  auto touch = [](const std::string& p) { std::ofstream(p) << "partial"; };
  const std::string stale = target + ".tmp." + std::to_string(dead) + ".12345";
  const std::string stale2 = target + ".tmp." + std::to_string(dead) + ".9";
  const std::string live = target + ".tmp." + std::to_string(::getppid()) + ".777";  // a live writer
  const std::string mine = target + ".tmp." + std::to_string(::getpid()) + ".778";   // this process
  const std::string other = dir / "other.safetensors.tmp." + std::to_string(dead) + ".1";  // another target
  const std::string lookalike = target + ".tmp." + std::to_string(dead) + ".1.bak";          // not our pattern
  for (const auto& p : {stale, stale2, live, mine, other, lookalike}) touch(p);
  io::save_safetensors(target, {{"a", tensor<float>({1})}});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(lookalike));
  EXPECT_EQ(io::load_safetensors(target).at("a").item<float>(), 1.0f);
}

// torch.save's files (a zip archive since torch 1.6; a bare pickle, protocol 2 and up, before)
// given to the safetensors loader: named as PyTorch pickles with the fix, not read as a header
// size ("the header size ... is absurdly large", issue 46).
TEST(IoHostileFiles, TorchPickleNamedAsSuch) {
  TempDir dir;
  const std::string zip = dir / "model.pt", pickle = dir / "old.pt";
  {
    std::ofstream z(zip, std::ios::binary);
    const unsigned char zip_head[] = {'P', 'K', 3, 4, 0, 0, 8, 8, 0, 0};     // a local file header
    const unsigned char pickle_head[] = {0x80, 2, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20};  // PROTO 2, LONG1 (torch's magic number)
    z << std::string(reinterpret_cast<const char*>(zip_head), sizeof zip_head) << std::string(200, '\0');
    std::ofstream p(pickle, std::ios::binary);
    p << std::string(reinterpret_cast<const char*>(pickle_head), sizeof pickle_head) << std::string(200, '\0');
  }
  for (const std::string& path : {zip, pickle}) {
    SCOPED_TRACE(path);
    const std::string msg = error_message<IOError>([&] { io::load_safetensors(path); });
    EXPECT_TRUE(contains_all(msg, {"this is a PyTorch pickle", "save a state dict with safetensors", "docs/torch_weights.md"})) << msg;
    EXPECT_EQ(msg.find("absurdly large"), std::string::npos) << msg;
  }
  // a real safetensors file whose header is 128 bytes also starts with 0x80 (and one of
  // 0x4b50 with "PK"): read as the file it is (the first check had refused every such file, a
  // model version in the store among them)
  for (const size_t header : {size_t{128}, size_t{0x4b50}}) {
    SCOPED_TRACE(header);
    std::string json = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    json.resize(header, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header >> (8 * i)) & 0xff);
    const float one = 1.5f;
    bytes += json + std::string(reinterpret_cast<const char*>(&one), sizeof one);
    const std::string path = dir / "real.safetensors";
    std::ofstream(path, std::ios::binary) << bytes;
    const auto tensors = io::load_safetensors(path);
    ASSERT_EQ(tensors.count("a"), 1u);
    EXPECT_EQ(tensors.at("a").item<float>(), 1.5f);
  }
}
