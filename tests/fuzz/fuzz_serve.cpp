// The model server's request handling (serve::Server::handle, the socket left out): a method
// (the first byte), a path (up to the first newline) and a body (the rest), as any client could
// send them. Every request gets an answer: a success with JSON, or a JSON error of 4xx (503 when
// the queue is full). A 500, which handle() gives only for an exception that escaped the
// protocol's checks, a body that is not JSON, a crash or a leak is a finding.
#include <loom/nn/input.h>
#include <loom/nn/linear.h>
#include <loom/serve/server.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "fuzz/fuzz_common.h"

namespace {

loom::serve::Server& server() {
  static const std::unique_ptr<loom::serve::Server> s = [] {
    loom_fuzz::init();
    loom::nn::Input x(4, loom::Float32, "x");
    loom::Graph g = loom::Graph::build({loom::nn::Linear(x, 3, {}, "y")}, {x});
    return std::make_unique<loom::serve::Server>(loom::serve::ModelSource::fixed("mlp", g),
                                                 loom::serve::ServeOptions{.max_batch = 4, .max_request_bytes = 1 << 16,
                                                                           .reload_poll_ms = 0});
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  loom_fuzz::Request in = loom_fuzz::split_request(data, size);
  const loom::serve::HttpRequest request{std::move(in.method), std::move(in.path), std::move(in.body)};
  const loom::serve::HttpResponse response = server().handle(request);
  if (response.status >= 500 && response.status != 503) {
    std::fprintf(stderr, "fuzz_serve: status %d for %s %s: %s\n", response.status, request.method.c_str(), request.path.c_str(),
                 response.body.c_str());
    std::abort();
  }
  if (response.content_type == "application/json" && !nlohmann::json::accept(response.body)) {
    std::fprintf(stderr, "fuzz_serve: a JSON answer that is not JSON (status %d): %s\n", response.status, response.body.c_str());
    std::abort();
  }
  return 0;
}
