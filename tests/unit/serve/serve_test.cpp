// The model server (docs/serve.md): every route through Server::handle without sockets, results
// equal to running the graph directly, dynamic batching of concurrent requests, hot reload
// when the alias moves (on both store backends), and the same over loopback HTTP.
#include <gtest/gtest.h>
#include <httplib.h>
#include <loom/core/grad_mode.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/ops/creation.h>
#include <loom/ops/random.h>
#include <loom/serve/server.h>
#include <loom/store/models.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <future>
#include <thread>
#include <vector>

#include "unit/store/store_test_util.h"

using namespace loom;
using nlohmann::json;

namespace {

serve::HttpResponse call(serve::Server& s, const std::string& method, const std::string& path, const std::string& body = "") {
  return s.handle({method, path, body});
}

json infer_body(const std::vector<float>& values, int64_t rows, const std::string& datatype = "FP32") {
  return {{"id", "r1"}, {"inputs", {{{"name", "x"}, {"shape", {rows, 4}}, {"datatype", datatype}, {"data", values}}}}};
}

std::vector<float> random_rows(int64_t rows, uint64_t seed) {
  Generator g(seed);
  return normal({rows, 4}, 0, 1, Float32, default_device(), &g).to_vector<float>();
}

// The graph's own inference outputs for `values` (no gradients, as the server and predict run
// it), the reference every answer must equal.
std::vector<float> direct(const Graph& g, const std::vector<float>& values, int64_t rows) {
  NoGrad inference;
  return g.as_function()({from_vector<float>(values, {rows, 4})})[0].to_vector<float>();
}

std::vector<float> data_of(const json& response) { return response["outputs"][0]["data"].get<std::vector<float>>(); }

}  // namespace

TEST(Serve, RoutesAnswerAsTheProtocolSays) {
  const Graph g = loom_test::small_mlp(1);
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.reload_poll_ms = 0});
  EXPECT_EQ(call(s, "GET", "/v2/health/live").status, 200);
  EXPECT_EQ(json::parse(call(s, "GET", "/v2/health/ready").body)["ready"], true);
  EXPECT_EQ(json::parse(call(s, "GET", "/v2").body)["name"], "loom");
  const json meta = json::parse(call(s, "GET", "/v2/models/mlp").body);
  EXPECT_EQ(meta["versions"], json::array({"1"}));
  EXPECT_EQ(meta["inputs"][0], (json{{"name", "x"}, {"datatype", "FP32"}, {"shape", {-1, 4}}}));
  EXPECT_EQ(meta["outputs"][0], (json{{"name", "l2"}, {"datatype", "FP32"}, {"shape", {-1, 3}}}));
  EXPECT_EQ(call(s, "GET", "/v2/models/mlp/versions/1").status, 200);
  EXPECT_EQ(json::parse(call(s, "GET", "/v2/models/mlp/ready").body)["ready"], true);

  const auto x = random_rows(5, 7);
  const auto r = call(s, "POST", "/v2/models/mlp/infer", infer_body(x, 5).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body);
  EXPECT_EQ(out["model_name"], "mlp");
  EXPECT_EQ(out["model_version"], "1");
  EXPECT_EQ(out["id"], "r1");
  EXPECT_EQ(out["outputs"][0]["name"], "l2");
  EXPECT_EQ(out["outputs"][0]["shape"], json::array({5, 3}));
  EXPECT_EQ(data_of(out), direct(g, x, 5));  // exactly: float32 written with every digit

  // nested data (row-major) is the same request
  json nested = infer_body({}, 5);
  nested["inputs"][0]["data"] = json::array();
  for (int i = 0; i < 5; ++i) nested["inputs"][0]["data"].push_back(std::vector<float>(x.begin() + 4 * i, x.begin() + 4 * i + 4));
  EXPECT_EQ(data_of(json::parse(call(s, "POST", "/v2/models/mlp/versions/1/infer", nested.dump()).body)), direct(g, x, 5));

  // outputs asked for by name
  json ask = infer_body(x, 5);
  ask["outputs"] = {{{"name", "l2"}}};
  EXPECT_EQ(call(s, "POST", "/v2/models/mlp/infer", ask.dump()).status, 200);

  const std::string metrics = call(s, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("loom_requests_total{route=\"infer\",code=\"200\"} 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("loom_model_version 1"), std::string::npos);
  EXPECT_NE(metrics.find("loom_infer_duration_seconds_count 3"), std::string::npos);
}

TEST(Serve, BadRequestsAreTypedJsonErrors) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(1)), {.reload_poll_ms = 0});
  auto expect = [&](const std::string& method, const std::string& path, const std::string& body, int status,
                    const std::string& says) {
    const auto r = call(s, method, path, body);
    EXPECT_EQ(r.status, status) << path << " " << body << " -> " << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_NE(j["error"].get<std::string>().find(says), std::string::npos) << j["error"];
  };
  const std::string infer = "/v2/models/mlp/infer";
  const auto x = random_rows(2, 1);
  expect("POST", infer, "{not json", 400, "not JSON");
  // invalid UTF-8 (found by fuzz_serve): the parser's message quotes the byte; the answer is
  // still a JSON error, the byte replaced, not an internal error
  expect("POST", infer, "{\"\x92\x9b\": 1}", 400, "not JSON");
  expect("GET", "/v2/models/\xff\xfe", "", 404, "no model");
  expect("POST", infer, std::string(1000, '[') + std::string(1000, ']'), 400, "levels deep");
  expect("POST", infer, "[]", 400, "JSON object");
  expect("POST", infer, "{}", 400, "no \"inputs\"");
  expect("POST", infer, infer_body(x, 2, "FP64").dump(), 400, "the model takes FP32");
  expect("POST", infer, infer_body(x, 2, "NOPE").dump(), 400, "the model takes FP32");
  json wrong_shape = infer_body(x, 2);
  wrong_shape["inputs"][0]["shape"] = {4, 2};
  expect("POST", infer, wrong_shape.dump(), 400, "the model takes [-1, 4]");
  json too_few = infer_body(x, 3);
  expect("POST", infer, too_few.dump(), 400, "holds 12");
  json too_many = infer_body(x, 1);
  expect("POST", infer, too_many.dump(), 400, "more values");
  json huge = infer_body(x, 2);
  huge["inputs"][0]["shape"] = {2147483647, 2147483647, 4};
  expect("POST", infer, huge.dump(), 400, "too many elements");
  huge["inputs"][0]["shape"] = {2147483647, 4};  // a shape claiming more than the data hold
  expect("POST", infer, huge.dump(), 400, "holds 8589934588");
  json negative = infer_body(x, 2);
  negative["inputs"][0]["shape"] = {-2, 4};
  expect("POST", infer, negative.dump(), 400, "not an integer from 0");
  json text_value = infer_body(x, 2);
  text_value["inputs"][0]["data"][3] = "seven";
  expect("POST", infer, text_value.dump(), 400, "value 3 is not a number");
  json unknown = infer_body(x, 2);
  unknown["inputs"][0]["name"] = "y";
  expect("POST", infer, unknown.dump(), 400, "unknown input 'y' (the model's inputs: 'x')");
  json twice = infer_body(x, 2);
  twice["inputs"].push_back(twice["inputs"][0]);
  expect("POST", infer, twice.dump(), 400, "given twice");
  json out = infer_body(x, 2);
  out["outputs"] = {{{"name", "nope"}}};
  expect("POST", infer, out.dump(), 400, "unknown output 'nope' (the model's outputs: 'l2')");
  expect("GET", infer, "", 405, "use POST");
  expect("POST", "/v2/health/ready", "", 405, "use GET");
  expect("POST", "/v2/models/other/infer", infer_body(x, 2).dump(), 404, "no model 'other'");
  expect("GET", "/v2/models/mlp/versions/2", "", 404, "serving version 1");
  expect("GET", "/v2/nothing", "", 404, "no route");
  expect("GET", "/", "", 404, "under /v2");
  // a NaN goes in as the string every Loom JSON uses, and comes out the same way
  json nan = infer_body(x, 2);
  nan["inputs"][0]["data"][0] = "NaN";
  const auto r = call(s, "POST", infer, nan.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"NaN\""), std::string::npos);
  // bad options
  EXPECT_THROW(serve::Server(serve::ModelSource::fixed("mlp", loom_test::small_mlp(1)), {.max_batch = 0}), ValueError);
}

TEST(Serve, ConcurrentRequestsRunAsBatchesAndGetTheirOwnRows) {
  const Graph g = loom_test::small_mlp(3);
  // a long wait so that the requests sent together meet in one batch
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.max_batch = 64, .max_wait_us = 200000, .reload_poll_ms = 0});
  constexpr int kClients = 12;
  std::vector<std::future<std::pair<int, std::vector<float>>>> answers;
  std::vector<std::vector<float>> inputs;
  for (int c = 0; c < kClients; ++c) inputs.push_back(random_rows(1 + c % 3, 100 + c));
  for (int c = 0; c < kClients; ++c)
    answers.push_back(std::async(std::launch::async, [&, c] {
      const int64_t rows = 1 + c % 3;
      const auto r = call(s, "POST", "/v2/models/mlp/infer", infer_body(inputs[c], rows).dump());
      return std::make_pair(r.status, r.status == 200 ? data_of(json::parse(r.body)) : std::vector<float>{});
    }));
  for (int c = 0; c < kClients; ++c) {
    const auto [status, values] = answers[c].get();
    ASSERT_EQ(status, 200);
    // each request's own rows, bit for bit: inference products are batch-invariant, so a row's
    // answer does not depend on the requests that shared its batch
    EXPECT_EQ(values, direct(g, inputs[c], 1 + c % 3)) << c;
  }
  const std::string metrics = call(s, "GET", "/metrics").body;
  // fewer batches than requests: some ran together
  const size_t at = metrics.find("loom_batch_requests_count ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoi(metrics.substr(at + 26)), kClients) << metrics;
}

class ServeReload : public loom_test::StoreBackendTest {};
INSTANTIATE_STORE_BACKENDS(ServeReload);

TEST_P(ServeReload, FollowsTheAliasToANewVersion) {
  store::Store st = store::Store::open(url());
  const Graph v1 = loom_test::small_mlp(1), v2 = loom_test::small_mlp(2);
  st.models().save("mlp", v1);
  st.models().save("mlp", v2);
  st.models().set_alias("mlp", "production", 1);
  serve::Server s(serve::ModelSource::from_store(st, "mlp", "production"), {.reload_poll_ms = 0});
  const auto x = random_rows(3, 5);
  auto ask = [&] { return json::parse(call(s, "POST", "/v2/models/mlp/infer", infer_body(x, 3).dump()).body); };
  EXPECT_EQ(ask()["model_version"], "1");
  EXPECT_EQ(data_of(ask()), direct(v1, x, 3));
  EXPECT_FALSE(s.reload());  // nothing moved
  st.models().set_alias("mlp", "production", 2, /*replace=*/true);
  EXPECT_TRUE(s.reload());
  EXPECT_EQ(s.version(), 2);
  EXPECT_EQ(ask()["model_version"], "2");
  EXPECT_EQ(data_of(ask()), direct(v2, x, 3));
  EXPECT_EQ(call(s, "GET", "/v2/models/mlp/versions/1").status, 404);
  // an alias that goes away leaves the version in force serving
  st.models().remove_alias("mlp", "production");
  EXPECT_ANY_THROW(s.reload());
  EXPECT_EQ(ask()["model_version"], "2");
  EXPECT_NE(call(s, "GET", "/metrics").body.find("loom_reloads_total{outcome=\"failed\"} 1"), std::string::npos);
}

TEST(Serve, OverLoopbackHttp) {
  const Graph g = loom_test::small_mlp(4);
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.port = 0, .max_request_bytes = 4096, .reload_poll_ms = 0});
  s.start();
  ASSERT_GT(s.port(), 0);
  httplib::Client c("127.0.0.1", s.port());
  auto ready = c.Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  const auto x = random_rows(2, 9);
  auto r = c.Post("/v2/models/mlp/infer", infer_body(x, 2).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(data_of(json::parse(r->body)), direct(g, x, 2));
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  // a body past the limit: refused before it is read whole, as a JSON error
  auto big = c.Post("/v2/models/mlp/infer", std::string(10000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("larger than 4096 bytes"), std::string::npos) << big->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  // the address in use: an IOError naming it, the first server unharmed
  serve::Server other(serve::ModelSource::fixed("mlp", g), {.port = s.port(), .reload_poll_ms = 0});
  try {
    other.start();
    ADD_FAILURE() << "a second server bound a port in use";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("Server: cannot bind 127.0.0.1:" + std::to_string(s.port())), std::string::npos) << e.what();
  }
  EXPECT_EQ(other.port(), 0);
  other.wait();  // never started: returns at once
  ASSERT_TRUE(c.Get("/v2/health/live"));
  // wait() returns once another thread stops the server
  std::thread waiter([&] { s.wait(); });
  s.stop();
  waiter.join();
  const int old_port = s.port();
  EXPECT_FALSE(httplib::Client("127.0.0.1", old_port).Get("/v2/health/live"));  // no longer listening
  s.stop();  // again: nothing
  s.start();  // and again, on a fresh free port
  auto again = httplib::Client("127.0.0.1", s.port()).Get("/v2/health/live");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}
