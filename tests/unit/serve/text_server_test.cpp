// The generation server (docs/serve.md, "Generation"): OpenAI's routes through TextServer::handle
// without sockets, each answer equal to train::generate on the same request alone, continuous
// batching of concurrent requests (no answer depends on the others in its passes), server-sent
// events over loopback HTTP, and a client leaving in the middle of its stream.
#include <gtest/gtest.h>
#include <loom/data/tokenizer.h>
#include <loom/ops/random.h>
#include <loom/serve/text_server.h>
#include <loom/train/decoder.h>
#include <loom/train/generation.h>
#include <loom/train/language_model.h>
#include <loom/zoo/architectures.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "unit/data/tiny_bpe.h"
#include "unit/serve/raw_http.h"

using namespace loom;
using nlohmann::json;

namespace {

// A random GPT-2 of the tiny tokenizer's 301 ids (300 is <|endoftext|>).
train::LanguageModel tiny_model(int64_t positions = 128) {
  manual_seed(7);
  train::LanguageModel m;
  m.network = zoo::gpt({.vocab_size = 301, .n_positions = positions, .n_embd = 32, .n_layer = 2, .n_head = 2});
  json tokenizer = test_tokenizers::tiny_json();
  for (int id = 262; id < 300; ++id)  // the ids between the merges' and <|endoftext|>: special, decoded as nothing
    tokenizer["added_tokens"].push_back({{"id", id}, {"content", "<|extra_" + std::to_string(id) + "|>"}, {"single_word", false},
                                         {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  const auto bpe = std::make_shared<data::BpeTokenizer>(data::BpeTokenizer::from_json(tokenizer.dump()));
  m.encode = [bpe](std::string_view text, bool special) {
    const auto ids = bpe->encode(text, special);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  m.decode = [bpe](const std::vector<int64_t>& ids) { return bpe->decode(std::vector<int32_t>(ids.begin(), ids.end()), true); };
  m.end_tokens = {300};
  return m;
}

serve::HttpResponse post(serve::TextServer& s, const std::string& path, const json& body) {
  return s.handle({"POST", path, body.dump()});
}

// `text` as a JSON answer carries it: a random model's bytes that are no UTF-8 become U+FFFD.
std::string as_sent(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

// What train::generate writes for `prompt` alone, with the same options the server derives.
train::Generation alone(const train::LanguageModel& m, const std::string& prompt, train::GenerationOptions o) {
  train::CachedDecoder decoder(m.network);
  o.stop_tokens = m.end_tokens;
  return train::generate(decoder, m.encode(prompt, true), o, m.decode);
}

// The data lines of a server-sent event stream, parsed (the last, [DONE], left out and checked).
std::vector<json> events(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  bool done = false;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    EXPECT_FALSE(done) << "an event after [DONE]";
    out.push_back(json::parse(data));
  }
  EXPECT_TRUE(done) << body;
  return out;
}

}  // namespace

TEST(TextServer, CompletionEqualsGenerateAlone) {
  train::LanguageModel m = tiny_model();
  serve::TextServer s(m, {.model_name = "tiny"});
  serve::HttpResponse r = post(s, "/v1/completions", {{"model", "tiny"}, {"prompt", "hello"}, {"max_tokens", 20}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = json::parse(r.body);
  const train::Generation g = alone(m, "hello", {.sampling = {.temperature = 0}, .max_new_tokens = 20});
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["model"], "tiny");
  EXPECT_EQ(a["choices"][0]["text"], as_sent(g.text));
  EXPECT_EQ(a["choices"][0]["finish_reason"], g.finish == train::Generation::Finish::Length ? "length" : "stop");
  EXPECT_EQ(a["usage"]["prompt_tokens"], m.encode("hello", true).size());
  EXPECT_EQ(a["usage"]["completion_tokens"], g.tokens.size());
  // sampling with a seed: the same draws as generate's
  r = post(s, "/v1/completions", {{"prompt", "aa"}, {"max_tokens", 15}, {"temperature", 0.8}, {"top_k", 30}, {"seed", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"],
            as_sent(alone(m, "aa", {.sampling = {.temperature = 0.8, .top_k = 30}, .max_new_tokens = 15, .seed = 5}).text));
  // echo, max_tokens 0, the default of 16
  r = post(s, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 0}, {"echo", true}});
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "hello");
  EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "length");
  r = post(s, "/v1/completions", {{"prompt", {1, 2, 3}}, {"temperature", 0}});
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 16) << r.body;
}

TEST(TextServer, StreamedEventsAddUpToTheAnswer) {
  train::LanguageModel m = tiny_model();
  serve::TextServer s(m, {.model_name = "tiny"});
  const json body = {{"prompt", "hello w"}, {"max_tokens", 30}, {"temperature", 0}, {"stop", " w"}};
  const json whole = json::parse(post(s, "/v1/completions", body).body);
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const serve::HttpResponse r = post(s, "/v1/completions", streamed);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  const std::vector<json> e = events(r.body);
  ASSERT_GE(e.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 2 < e.size(); ++i) {
    EXPECT_TRUE(e[i]["choices"][0]["finish_reason"].is_null());
    text += e[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  EXPECT_EQ(e[e.size() - 2]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
  EXPECT_EQ(e.back()["usage"], whole["usage"]);
  EXPECT_TRUE(e.back()["choices"].empty());
  EXPECT_EQ(e[0]["id"], e.back()["id"]);  // one answer
}

TEST(TextServer, ChatAppliesTheTemplate) {
  train::LanguageModel m = tiny_model();
  serve::TextServer plain(m, {.model_name = "tiny"});
  const json chat = {{"messages", {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hello"}}}},
                     {"max_tokens", 12}, {"temperature", 0}};
  serve::HttpResponse r = post(plain, "/v1/chat/completions", chat);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no chat template"), std::string::npos) << r.body;
  m.chat_template = train::ChatTemplate::parse(
      R"({"system": "S:{content}\n", "user": "U:{content}\n", "assistant": "A:{content}\n", "generation_prompt": "A:", "stop": ["\n"]})");
  serve::TextServer s(m, {.model_name = "tiny"});
  r = post(s, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  const json a = json::parse(r.body);
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["choices"][0]["message"]["role"], "assistant");
  train::CachedDecoder decoder(m.network);
  const train::Generation g = train::generate(
      decoder, m.encode("S:be brief\nU:hello\nA:", false),
      {.sampling = {.temperature = 0}, .max_new_tokens = 12, .stop_tokens = {300}, .stop_strings = {"\n"}}, m.decode);
  EXPECT_EQ(a["choices"][0]["message"]["content"], as_sent(g.text));
  // streamed: the role first, then the pieces, then the finish
  json streamed = chat;
  streamed["stream"] = true;
  const std::vector<json> e = events(post(s, "/v1/chat/completions", streamed).body);
  ASSERT_GE(e.size(), 2u);
  EXPECT_EQ(e[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(e[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const json& x : e)
    if (x["choices"][0]["delta"].contains("content")) text += x["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, as_sent(g.text));
  EXPECT_FALSE(e.back()["choices"][0]["finish_reason"].is_null());
  // a role the template lacks
  r = post(s, "/v1/chat/completions", {{"messages", {{{"role", "tool"}, {"content", "x"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no format for role"), std::string::npos) << r.body;
}

TEST(TextServer, RefusesWhatItCannotDo) {
  serve::TextServer s(tiny_model(32), {.model_name = "tiny", .api_key = "k3y"});
  const auto call = [&](const std::string& method, const std::string& path, const std::string& body, const std::string& auth = "Bearer k3y",
                        const std::string& host = "") {
    serve::HttpRequest r{method, path, body, host};
    r.authorization = auth;
    return s.handle(r);
  };
  const auto error_of = [](const serve::HttpResponse& r) { return json::parse(r.body)["error"]; };
  EXPECT_EQ(call("GET", "/v1/models", "", "").status, 401);
  EXPECT_EQ(call("GET", "/v1/models", "", "Bearer k3x").status, 401);
  serve::HttpResponse r = call("GET", "/v1/models", "");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "tiny");
  EXPECT_EQ(call("GET", "/v1/models/tiny", "").status, 200);
  EXPECT_EQ(call("GET", "/v1/models/other", "").status, 404);
  EXPECT_EQ(call("GET", "/health", "", "").status, 200);  // no key for health
  EXPECT_EQ(call("GET", "/v1/completions", "").status, 405);
  EXPECT_EQ(call("GET", "/v2/models", "").status, 404);
  EXPECT_EQ(call("GET", "/v1/models", "", "Bearer k3y", "evil.example:8000").status, 403);
  r = call("POST", "/v1/completions", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r)["type"], "invalid_request_error");
  r = call("POST", "/v1/completions", json{{"model", "gpt-4"}, {"prompt", "x"}}.dump());
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_of(r)["param"], "model");
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{{"n", 2},
                                                                             {"temperature", 3},
                                                                             {"top_p", 0},
                                                                             {"max_tokens", -1},
                                                                             {"logprobs", 2},
                                                                             {"presence_penalty", 0.5},
                                                                             {"stop", {"a", "b", "c", "d", "e"}},
                                                                             {"seed", "x"},
                                                                             {"stream", "yes"}}) {
    json body = {{"prompt", "hello"}};
    body[field] = value;
    r = call("POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 400) << field;
    EXPECT_EQ(error_of(r)["param"], field) << r.body;
  }
  // a prompt longer than the context, a token id outside the vocabulary, a deeply nested body
  r = call("POST", "/v1/completions", json{{"prompt", std::string(40, 'x')}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("context holds 32"), std::string::npos) << r.body;
  EXPECT_EQ(call("POST", "/v1/completions", json{{"prompt", {1, 301}}}.dump()).status, 400);
  EXPECT_EQ(call("POST", "/v1/completions", std::string(200, '[') + std::string(200, ']')).status, 400);
  // max_tokens past the context is cut to what is left: the answer ends by length
  r = call("POST", "/v1/completions", json{{"prompt", {1, 2, 3, 4}}, {"max_tokens", 1000}, {"temperature", 0}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_LE(json::parse(r.body)["usage"]["completion_tokens"].get<int64_t>(), 29);
  r = call("GET", "/metrics", "", "");
  EXPECT_NE(r.body.find("loom_requests_total{route=\"completions\",status=\"400\"}"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("loom_generated_tokens_total"), std::string::npos);
}

// Continuous batching: with 2 slots, 6 concurrent requests of different lengths join and leave
// between passes, and each answer is what the request gives alone.
TEST(TextServer, ConcurrentRequestsGetTheirAnswersAlone) {
  train::LanguageModel m = tiny_model();
  serve::TextServer s(m, {.model_name = "tiny", .slots = 2});
  struct Case {
    std::string prompt;
    int64_t tokens;
    double temperature;
  };
  const std::vector<Case> cases = {{"hello", 25, 0}, {"aa", 7, 0.9}, {"hello world", 18, 0}, {"w", 30, 1.1}, {"ha", 3, 0}, {"aaaa", 12, 0.7}};
  std::vector<std::future<std::string>> answers;
  for (size_t i = 0; i < cases.size(); ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      const Case& c = cases[i];
      const serve::HttpResponse r = post(s, "/v1/completions",
                                         {{"prompt", c.prompt}, {"max_tokens", c.tokens}, {"temperature", c.temperature}, {"seed", i}});
      return r.status == 200 ? json::parse(r.body)["choices"][0]["text"].get<std::string>() : "status " + std::to_string(r.status);
    }));
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(answers[i].get(),
              as_sent(alone(m, c.prompt, {.sampling = {.temperature = c.temperature}, .max_new_tokens = c.tokens, .seed = i}).text))
        << "request " << i;
  }
  // some passes fed both slots
  const std::string metrics = s.handle({"GET", "/metrics", ""}).body;
  const size_t at = metrics.find("loom_pass_sequences_bucket{le=\"1\"} ");
  const size_t all = metrics.find("loom_pass_sequences_count ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoll(metrics.substr(at + 35)), std::stoll(metrics.substr(all + 26))) << metrics;
}

// Over HTTP: the stream arrives as chunked server-sent events, and a client that closes its
// connection in the middle of a long stream frees its slot within a few tokens.
TEST(TextServer, StreamsOverHttpAndDropsAClientThatLeft) {
  train::LanguageModel m = tiny_model(512);
  m.end_tokens.clear();  // nothing ends the long stream but its client leaving
  serve::TextServer s(m, {.port = 0, .model_name = "tiny", .slots = 1});
  s.start();
  const auto request = [](const json& body) {
    const std::string b = body.dump();
    return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(b.size()) + "\r\nConnection: close\r\n\r\n" + b;
  };
  {
    loom_test::RawConnection c(s.port());
    ASSERT_TRUE(c.connected());
    c.send(request({{"prompt", "hello"}, {"max_tokens", 10}, {"temperature", 0}, {"stream", true}}));
    const std::string answer = c.read_all(std::chrono::milliseconds(20000));
    EXPECT_EQ(loom_test::status_of(answer), 200) << answer;
    EXPECT_TRUE(loom_test::has_header_line(answer, "Transfer-Encoding: chunked")) << answer;
    EXPECT_TRUE(loom_test::has_header_line(answer, "Content-Type: text/event-stream")) << answer;
    EXPECT_NE(answer.find("data: [DONE]\n\n"), std::string::npos);
    EXPECT_NE(answer.find("\r\n0\r\n\r\n"), std::string::npos);  // the last chunk
  }
  {
    loom_test::RawConnection c(s.port());
    c.send(request({{"prompt", "hello"}, {"max_tokens", 500}, {"temperature", 1}, {"stream", true}}));
    // wait for the first piece, then leave at once (a tiny model writes a token every fraction of
    // a millisecond: a client lingering 50 ms would let a hundred more through before it closes)
    std::string got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.find("data: ") == std::string::npos && std::chrono::steady_clock::now() < until)
      got += c.read_all(std::chrono::milliseconds(2));
    ASSERT_NE(got.find("data: "), std::string::npos) << got;
  }
  // the one slot is free again long before 500 tokens: the next request's answer comes, and the
  // left stream stopped within a few tokens of its close
  const serve::HttpResponse next = post(s, "/v1/completions", {{"prompt", "aa"}, {"max_tokens", 5}, {"temperature", 0}});
  EXPECT_EQ(next.status, 200);
  const std::string metrics = s.handle({"GET", "/metrics", ""}).body;
  const size_t at = metrics.find("\nloom_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos) << metrics;
  const int64_t tokens = std::stoll(metrics.substr(at + 29));
  EXPECT_LT(tokens, 10 + 5 + 100) << "the stream whose client left went on for " << tokens << " tokens";
  s.stop();
}
