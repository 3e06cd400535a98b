// `loom models export NAME@ALIAS --onnx FILE` run as a user would (tools/cli/models.cpp): a model
// saved in a store, exported by the command line, read back and checked by libonnx; the bytes are
// those io::encode_onnx gives for the same graph. A binary of its own: it links loom::store.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <loom/store/store.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace loom;
namespace fs = std::filesystem;

namespace {

std::string out_dir() {
  const char* d = std::getenv("LOOM_ONNX_DIR");
  const std::string dir = d && *d ? d : "onnx_cases";
  fs::create_directories(dir);
  return dir;
}

TEST(OnnxExport, CommandLineExportsAStoredVersion) {
  const std::string dir = out_dir() + "/cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string url = dir + "/store.db";
  const zoo::Network net = zoo::lenet(4);
  {
    store::Store s = store::Store::open(url);
    s.models().save("lenet", net.graph, {{"accuracy", 0.5}});
    s.models().save("lenet", net.graph, {{"accuracy", 0.6}});
    s.models().set_alias("lenet", "production", 1);
  }
  const std::string file = dir + "/lenet.onnx";
  const std::string cmd = std::string("'") + LOOM_CLI_PATH + "' models export lenet@production --onnx '" + file + "' --store '" + url +
                          "' > '" + dir + "/out.txt' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream out(dir + "/out.txt");
  std::string line;
  std::getline(out, line);
  EXPECT_NE(line.find("lenet version 1 -> "), std::string::npos) << line;
  std::ifstream f(file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(ss.str()));
  EXPECT_NO_THROW(onnx::checker::check_model(model));
  EXPECT_EQ(model.doc_string(), "lenet version 1");
  EXPECT_EQ(model.graph().initializer_size(), 11);  // the 5 layers' weights and biases, the Flatten's target shape
  // the same bytes as exporting the graph here
  EXPECT_EQ(ss.str(), io::encode_onnx(net.graph, {.dynamic_batch = true, .batch_size = 1, .producer_name = "loom", .doc_string = "lenet version 1"}));
  // no --onnx: a usage error, nothing written
  const std::string bad = std::string("'") + LOOM_CLI_PATH + "' models export lenet --store '" + url + "' > /dev/null 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

}  // namespace
