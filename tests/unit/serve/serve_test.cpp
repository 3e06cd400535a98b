// The model server (docs/serve.md): every route through Server::handle without sockets, results
// equal to running the graph directly, dynamic batching of concurrent requests, hot reload
// when the alias moves (on both store backends), and the same over loopback HTTP.
#include <gtest/gtest.h>
#include <httplib.h>
#include <loom/core/grad_mode.h>
#include <loom/core/tensor.h>
#include <loom/graph/graph.h>
#include <loom/nn/layers.h>
#include <loom/ops/creation.h>
#include <loom/ops/random.h>
#include <loom/serve/server.h>
#include <loom/store/model_registry.h>
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "unit/serve/raw_http.h"
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

namespace {

// An input of an infer request: {"name", "shape", "datatype", "data"}.
json input_json(const std::string& name, const Tensor& t) {
  json shape = json::array();
  for (int64_t d : t.shape()) shape.push_back(d);
  json data = json::array();
  if (t.dtype() == Int64) {
    for (int64_t v : t.to_vector<int64_t>()) data.push_back(v);
    return {{"name", name}, {"shape", shape}, {"datatype", "INT64"}, {"data", data}};
  }
  for (float v : t.to_vector<float>()) data.push_back(v);
  return {{"name", name}, {"shape", shape}, {"datatype", "FP32"}, {"data", data}};
}

// A graph's outputs as the answer's "outputs" hold them: (shape, values as doubles) each.
using Outputs = std::vector<std::pair<std::vector<int64_t>, std::vector<double>>>;
Outputs outputs_of(const std::vector<Tensor>& ts) {
  Outputs out;
  for (const Tensor& t : ts) out.push_back({t.shape(), t.astype(Float64).to_vector<double>()});
  return out;
}
Outputs outputs_of(const json& answer) {
  Outputs out;
  for (const auto& o : answer["outputs"]) out.push_back({o["shape"].get<std::vector<int64_t>>(), o["data"].get<std::vector<double>>()});
  return out;
}

// Sends `clients` threads' requests (`per_client` each, inputs from make(client, request)) at
// once and checks each answer is the graph's outputs on that request's inputs alone. The graphs
// here only copy, add and gather values, so any mix-up shows, whatever the CPU's arithmetic.
void expect_own_answers(serve::Server& s, const Graph& g, const std::function<std::vector<Tensor>(int, int)>& make,
                        int clients = 16, int per_client = 4) {
  const auto reference = g.as_function();
  const std::vector<std::string> names = [&] {
    std::vector<std::string> v;
    for (const auto& l : g.inputs()) v.push_back(l.name());
    return v;
  }();
  std::vector<std::thread> threads;
  std::vector<std::string> failures(clients);
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (int i = 0; i < per_client; ++i) {
        const std::vector<Tensor> in = make(c, i);
        json body = {{"id", "c" + std::to_string(c)}, {"inputs", json::array()}};
        for (size_t k = 0; k < in.size(); ++k) body["inputs"].push_back(input_json(names[k], in[k]));
        const auto r = s.handle({"POST", "/v2/models/m/infer", body.dump()});
        if (r.status != 200) {
          failures[c] += "request " + std::to_string(i) + ": " + r.body + "\n";
          continue;
        }
        if (outputs_of(json::parse(r.body)) != outputs_of(reference(in)))
          failures[c] += "request " + std::to_string(i) + " got another answer: " + r.body + "\n";
      }
    });
  for (auto& t : threads) t.join();
  for (int c = 0; c < clients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
}

int64_t metric(serve::Server& s, const std::string& name) {
  const std::string text = s.handle({"GET", "/metrics", ""}).body;
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

}  // namespace

// A request's rows of a batch's outputs were cut by the row count of its first input, so models
// whose outputs do not have one row per input row gave clients each other's answers. Only graphs
// whose shape rules give every output the batch's rows are batched; the rest run alone.
TEST(Serve, OnlyModelsMappingRowsToRowsAreBatched) {
  const serve::ServeOptions batching{.max_batch = 64, .max_wait_us = 3000, .reload_poll_ms = 0};
  auto rows = [](int64_t n, int64_t cols, float base) {
    std::vector<float> v;
    for (int64_t i = 0; i < n * cols; ++i) v.push_back(base + static_cast<float>(i));
    return from_vector<float>(v, {n, cols});
  };
  {  // a concatenation along the batch axis: 2n rows for n
    nn::Input x(4, Float32, "x");
    nn::Concat c({x, x}, 0, "c");
    const Graph g = Graph::build({c}, {x});
    serve::Server s(serve::ModelSource::fixed("m", g), batching);
    expect_own_answers(s, g, [&](int c, int i) { return std::vector<Tensor>{rows(1 + (c + i) % 3, 4, 100.0f * c + 10.0f * i)}; });
    EXPECT_EQ(metric(s, "loom_batch_requests_count"), 16 * 4);  // every request ran alone
    EXPECT_EQ(metric(s, "loom_batch_requests_sum"), 16 * 4);
  }
  {  // two inputs of different row counts, concatenated
    nn::Input x(4, Float32, "x"), y(4, Float32, "y");
    nn::Concat xy({x, y}, 0, "xy");
    const Graph g = Graph::build({xy}, {x, y});
    serve::Server s(serve::ModelSource::fixed("m", g), batching);
    expect_own_answers(s, g, [&](int c, int i) {
      return std::vector<Tensor>{rows(1 + c % 2, 4, 1000.0f * c + 10.0f * i), rows(1 + (c + i) % 3, 4, -1000.0f * c - 10.0f * i)};
    });
  }
  {  // an embedding of ids next to another input: the rules allow batches, but a request whose
     // inputs have different row counts has no share to cut, so it runs alone
    nn::Input x(2, Float32, "x"), ids(Shape{-1}, Int64, "ids");
    nn::Add twice(x, x, "twice");
    nn::Lookup emb(ids, 64, 3, {}, "emb");
    const Graph g = Graph::build({twice, emb}, {x, ids});
    serve::Server s(serve::ModelSource::fixed("m", g), batching);
    expect_own_answers(s, g, [&](int c, int i) {
      std::vector<int64_t> v;
      for (int k = 0; k < 1 + (c + i) % 4; ++k) v.push_back((c * 4 + i + k) % 64);
      return std::vector<Tensor>{rows(1, 2, 10.0f * c + i), from_vector<int64_t>(v, {static_cast<int64_t>(v.size())})};
    });
    // with equal row counts, the same model's requests still share batches
    expect_own_answers(s, g, [&](int c, int i) {
      return std::vector<Tensor>{rows(2, 2, 10.0f * c + i), from_vector<int64_t>({(c + i) % 64, (c + 2 * i) % 64}, {2})};
    });
    EXPECT_LT(metric(s, "loom_batch_requests_count"), 2 * 16 * 4);
  }
}

// A versioned route is answered by that version, even when the alias moved while it waited.
TEST(Serve, VersionedRouteIsAnsweredByThatVersion) {
  nn::Input x(4, Float32, "x");
  nn::Add twice(x, x, "twice");
  nn::Add thrice(twice, x, "thrice");
  const Graph v1 = Graph::build({twice}, {x}), v2 = Graph::build({thrice}, {x});
  std::atomic<int64_t> version{1};
  serve::ModelSource source{"m", [&] { return version.load(); }, [&](int64_t v) { return v == 1 ? v1 : v2; }};
  // a request waits up to 1 s in the queue for company: the alias moves meanwhile
  serve::Server s(source, {.max_batch = 64, .max_wait_us = 1000000, .reload_poll_ms = 0});
  const auto in = random_rows(2, 3);
  auto versioned = std::async(std::launch::async, [&] { return s.handle({"POST", "/v2/models/m/versions/1/infer", infer_body(in, 2).dump()}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  version = 2;
  ASSERT_TRUE(s.reload());
  const auto r = versioned.get();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["model_version"], "1");
  EXPECT_EQ(data_of(json::parse(r.body)), direct(v1, in, 2));
  // the version in force now answers the route without a version; version 1's route is gone
  const auto now = s.handle({"POST", "/v2/models/m/infer", infer_body(in, 2).dump()});
  EXPECT_EQ(json::parse(now.body)["model_version"], "2");
  EXPECT_EQ(data_of(json::parse(now.body)), direct(v2, in, 2));
  EXPECT_EQ(s.handle({"POST", "/v2/models/m/versions/1/infer", infer_body(in, 2).dump()}).status, 404);
}

// The body limit holds while a body is read, whatever its transfer encoding: a chunked body past
// it is refused after at most the limit is read (it was read whole, 256 MiB, before a 400), and
// a Content-Length past it is refused at once (it waited for the 100 GB, 5 s, before its 413).
TEST(Serve, BodyLimitHoldsWhileReadingWhateverTheEncoding) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(4)), {.port = 0, .max_request_bytes = 4096, .reload_poll_ms = 0});
  s.start();
  {
    loom_test::RawConnection c(s.port());
    ASSERT_TRUE(c.connected());
    std::string answer;
    std::thread reader([&] { answer = c.read_all(std::chrono::seconds(20)); });
    size_t sent = c.send("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "100000\r\n" + std::string(1 << 20, ' ') + "\r\n";  // 1 MiB chunks
    for (int i = 0; i < 256; ++i) {
      const size_t n = c.send(chunk);
      sent += n;
      if (n < chunk.size()) break;  // the server stopped reading
    }
    if (sent >= 256u << 20) c.send("0\r\n\r\n");
    reader.join();
    EXPECT_EQ(loom_test::status_of(answer), 413) << answer.substr(0, 300);
    EXPECT_NE(answer.find("larger than 4096 bytes"), std::string::npos) << answer.substr(0, 300);
    // what the server read is bounded by the limit; what the client could send, by the sockets' buffers
    EXPECT_LT(sent, 64u << 20);
  }
  {
    loom_test::RawConnection c(s.port());
    ASSERT_TRUE(c.connected());
    const auto t0 = std::chrono::steady_clock::now();
    c.send("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: 100000000000\r\n\r\n{");
    const std::string answer = c.read_all(std::chrono::seconds(10));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_EQ(loom_test::status_of(answer), 413) << answer.substr(0, 300);
    EXPECT_TRUE(loom_test::has_header_line(answer, "X-Content-Type-Options: nosniff")) << answer;
    EXPECT_TRUE(loom_test::has_header_line(answer, "Cache-Control: no-store")) << answer;
  }
  {  // a malformed request: a JSON error with the same headers as every answer
    loom_test::RawConnection c(s.port());
    c.send("NOT AN HTTP REQUEST\r\n\r\n");
    const std::string answer = c.read_all(std::chrono::seconds(5));
    EXPECT_EQ(loom_test::status_of(answer), 400) << answer;
    EXPECT_NE(answer.find("{\"error\":"), std::string::npos) << answer;
    EXPECT_TRUE(loom_test::has_header_line(answer, "X-Content-Type-Options: nosniff")) << answer;
    EXPECT_TRUE(loom_test::has_header_line(answer, "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'")) << answer;
  }
  // the server still answers
  auto live = httplib::Client("127.0.0.1", s.port()).Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
}

// `curl -d @body.json` sends application/x-www-form-urlencoded (so do urllib and others):
// cpp-httplib parsed such a body as a form and refused it past 8 KiB with 413.
TEST(Serve, JsonIsTakenWhateverTheContentTypeSays) {
  const Graph g = loom_test::small_mlp(4);
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.port = 0, .reload_poll_ms = 0});
  s.start();
  const auto x = random_rows(300, 5);  // about 12 kB of JSON
  const std::string body = infer_body(x, 300).dump();
  ASSERT_GT(body.size(), 8192u);
  httplib::Client c("127.0.0.1", s.port());
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    auto r = c.Post("/v2/models/mlp/infer", body, type);
    ASSERT_TRUE(r) << type;
    ASSERT_EQ(r->status, 200) << type << ": " << r->body.substr(0, 300);
    EXPECT_EQ(data_of(json::parse(r->body)).size(), 300u * 3) << type;
  }
}

// A store accepts "team/mlp": the server's routes reach it with the slash encoded (%2F) or as it
// is (tritonclient quotes names keeping '/').
TEST(Serve, NamesWithASlashAreReachable) {
  const Graph g = loom_test::small_mlp(4);
  serve::Server s(serve::ModelSource::fixed("team/mlp", g), {.port = 0, .reload_poll_ms = 0});
  const auto x = random_rows(2, 9);
  for (const std::string prefix : {"/v2/models/team%2Fmlp", "/v2/models/team%2fmlp", "/v2/models/team/mlp"}) {
    EXPECT_EQ(call(s, "GET", prefix).status, 200) << prefix;
    EXPECT_EQ(call(s, "GET", prefix + "/versions/1/ready").status, 200) << prefix;
    const auto r = call(s, "POST", prefix + "/versions/1/infer", infer_body(x, 2).dump());
    ASSERT_EQ(r.status, 200) << prefix << ": " << r.body;
    EXPECT_EQ(json::parse(r.body)["model_name"], "team/mlp");
    EXPECT_EQ(data_of(json::parse(r.body)), direct(g, x, 2));
  }
  EXPECT_EQ(call(s, "GET", "/v2/models/team").status, 404);
  EXPECT_EQ(call(s, "GET", "/v2/models/team%2Fother").status, 404);
  // over HTTP, where cpp-httplib decodes the path before routing (the raw one is routed)
  s.start();
  httplib::Client c("127.0.0.1", s.port());
  c.set_url_encode(false);
  auto r = c.Post("/v2/models/team%2Fmlp/infer", infer_body(x, 2).dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(data_of(json::parse(r->body)), direct(g, x, 2));
}

// A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) must not run inference:
// on loopback only requests for this machine's names are answered, as the dashboard does.
TEST(Serve, HostCheckOnLoopback) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(1)), {.reload_poll_ms = 0});
  const auto body = infer_body(random_rows(1, 1), 1).dump();
  for (const std::string host : {"", "127.0.0.1", "127.0.0.1:8000", "localhost:8000", "[::1]:8000"})
    EXPECT_EQ(s.handle({"POST", "/v2/models/mlp/infer", body, host}).status, 200) << host;
  for (const std::string host : {"evil.example", "evil.example:8000", "127.0.0.1.evil.example:8000", "[::2]:8000"}) {
    const auto r = s.handle({"POST", "/v2/models/mlp/infer", body, host});
    EXPECT_EQ(r.status, 403) << host;
    EXPECT_NE(r.body.find("127.0.0.1 or localhost only"), std::string::npos) << r.body;
  }
  // served on another address on purpose, any name reaches it
  serve::Server open(serve::ModelSource::fixed("mlp", loom_test::small_mlp(1)), {.host = "0.0.0.0", .reload_poll_ms = 0});
  EXPECT_EQ(open.handle({"POST", "/v2/models/mlp/infer", body, "models.example:8000"}).status, 200);
}

// The protocol's id is a string: a number was dropped from the answer without a word.
TEST(Serve, NumericIdIsRefusedClearly) {
  serve::Server s(serve::ModelSource::fixed("mlp", loom_test::small_mlp(1)), {.reload_poll_ms = 0});
  json body = infer_body(random_rows(1, 1), 1);
  body["id"] = 42;
  const auto r = call(s, "POST", "/v2/models/mlp/infer", body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("\\\"id\\\" must be a string"), std::string::npos) << r.body;
  body["id"] = "42";
  EXPECT_EQ(json::parse(call(s, "POST", "/v2/models/mlp/infer", body.dump()).body)["id"], "42");
}

// The binary tensor extension (tritonclient's default): the JSON, then each input's raw bytes;
// outputs asked for in binary come after the answer's JSON, whose length a header gives.
TEST(Serve, BinaryTensorExtension) {
  const Graph g = loom_test::small_mlp(2);
  serve::Server s(serve::ModelSource::fixed("mlp", g), {.reload_poll_ms = 0});
  const auto x = random_rows(3, 11);
  const std::string raw(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  json head = {{"id", "b1"},
               {"inputs", {{{"name", "x"}, {"shape", {3, 4}}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", raw.size()}}}}}},
               {"outputs", {{{"name", "l2"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string text = head.dump();
  auto r = s.handle({"POST", "/v2/models/mlp/infer", text + raw, "", std::to_string(text.size())});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.headers.count("Inference-Header-Content-Length"), 1u);
  const size_t n = std::stoul(r.headers["Inference-Header-Content-Length"]);
  const json out = json::parse(r.body.substr(0, n));
  EXPECT_EQ(out["id"], "b1");
  EXPECT_EQ(out["outputs"][0]["parameters"]["binary_data_size"], 3 * 3 * 4);
  ASSERT_EQ(r.body.size(), n + 3 * 3 * 4);
  std::vector<float> got(9);
  std::memcpy(got.data(), r.body.data() + n, 36);
  EXPECT_EQ(got, direct(g, x, 3));
  // binary input, JSON output: no header, the body is JSON
  head.erase("outputs");
  const std::string text2 = head.dump();
  r = s.handle({"POST", "/v2/models/mlp/infer", text2 + raw, "", std::to_string(text2.size())});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.count("Inference-Header-Content-Length"), 0u);
  EXPECT_EQ(data_of(json::parse(r.body)), direct(g, x, 3));
  // "binary_data_output" asks for every output in binary
  head["parameters"] = {{"binary_data_output", true}};
  const std::string text3 = head.dump();
  r = s.handle({"POST", "/v2/models/mlp/infer", text3 + raw, "", std::to_string(text3.size())});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.size(), std::stoul(r.headers["Inference-Header-Content-Length"]) + 36);
  // sizes that do not add up are refused, naming the input
  auto bad = [&](const std::string& body, const std::string& length, const std::string& says) {
    const auto b = s.handle({"POST", "/v2/models/mlp/infer", body, "", length});
    EXPECT_EQ(b.status, 400) << b.body;
    EXPECT_NE(b.body.find(says), std::string::npos) << b.body;
  };
  bad(text2 + raw.substr(0, 20), std::to_string(text2.size()), "needs 48 bytes of binary data, the body has 20");
  bad(text2 + raw + "xx", std::to_string(text2.size()), "2 bytes of binary data after the JSON");
  bad(text2 + raw, "99999", "Inference-Header-Content-Length");
  bad(text2 + raw, "-1", "Inference-Header-Content-Length");
  json wrong = head;
  wrong["inputs"][0]["parameters"]["binary_data_size"] = 47;
  bad(wrong.dump() + raw, std::to_string(wrong.dump().size()), "takes 48 bytes");
}
