// The event-driven HTTP server (http_server.h). Boost.Asio and Boost.Beast are included here
// only: they are header-only and slow to compile, and no other file, public header or not, sees
// them. Every socket, timer and connection is touched on the one event-loop thread; a worker
// runs the handler and posts the answer back to that thread.
#include "serve/http_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "loom/core/error.h"
#include "serve/http_stream.h"

namespace loom::serve::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// A header's total size is bounded by this (request line included): 16 KiB, twice Beast's
// default, as long URLs with query strings of filters (the dashboard's) stay well within it.
constexpr uint32_t kHeaderLimit = 16 << 10;
// After a refusal whose request was not read whole, what the client still sends is read and
// dropped for a moment before closing: closing with unread bytes sends a reset, which can
// destroy the refusal in the client's buffer before it reads it.
constexpr size_t kLingerBytes = 1 << 20;
constexpr std::chrono::milliseconds kLinger{1000};
// When draining, a connection between requests gets this long for a request already on its way,
// and one in the middle of a header this long to finish it (rather than its header_timeout: slow
// clients cannot hold a stop for long); a body being read keeps its own deadline.
constexpr std::chrono::milliseconds kDrainGrace{200};
constexpr std::chrono::milliseconds kDrainHeaderGrace{1000};

std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

}  // namespace

struct Connection;

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  HttpErrorWriter error;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::optional<asio::thread_pool> workers;
  std::thread loop;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> busy;  // the loop runs until stop()
  int port = 0;
  // event-loop thread only
  std::list<Connection*> open;
  bool draining = false;
  // any thread
  std::atomic<int64_t> count{0};
  mutable std::mutex mutex;
  std::condition_variable changed;  // running turned false, or a connection closed
  bool running = true;

  HttpAnswer refusal(int status, const std::string& message) {
    try {
      return error(status, message);
    } catch (const std::exception&) {
      return {status, {{"Content-Type", "text/plain"}}, message};
    }
  }
  void accept();
  void start_connection(tcp::socket socket);
  void drain();
  void closed() {
    count.fetch_sub(1);
    std::lock_guard lock(mutex);
    changed.notify_all();
  }
};

// One client connection: waiting for a request, reading it, handled by a worker, writing the
// answer, and again while it is kept alive. Each phase has one deadline, armed on entering it.
struct Connection : std::enable_shared_from_this<Connection> {
  enum class State { waiting, reading, handling, writing, streaming, lingering, closed };

  Connection(HttpServer::Impl& s, tcp::socket sock) : server(s), socket(std::move(sock)), timer(s.io) {}

  HttpServer::Impl& server;
  tcp::socket socket;
  asio::steady_timer timer;
  beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
  State state = State::waiting;
  uint64_t deadline_id = 0;
  bool timed_out = false;
  bool cut_by_drain = false;  // the header's deadline is the drain's
  bool close_after = false;  // the answer being written ends the connection
  bool http10_keep_alive = false;
  bool head = false;
  std::string out;
  size_t lingered = 0;
  std::shared_ptr<StreamChannel> channel;  // while streaming
  bool stream_writing = false;             // a write of the stream is in flight (`out` is its buffer)
  bool stream_terminated = false;          // the last chunk is in `out`
  std::list<Connection*>::iterator at;

  void start(bool refuse_as_full) {
    at = server.open.insert(server.open.end(), this);
    beast::error_code ignored;
    // an answer's last segment leaves at once: with Nagle's algorithm a body written after its
    // headers waited for the client's delayed ACK, 40 ms per request on a kept-alive connection
    socket.set_option(tcp::no_delay(true), ignored);
    if (refuse_as_full)
      return refuse(503, "the server holds its limit of " + std::to_string(server.options.max_connections) +
                             " connections; try again later");
    wait_request();
  }

  // Arms the phase's deadline; an earlier one no longer counts.
  void deadline(std::chrono::milliseconds after) {
    const uint64_t id = ++deadline_id;
    timed_out = false;
    timer.expires_after(after);
    timer.async_wait([self = shared_from_this(), id](beast::error_code ec) {
      if (ec || id != self->deadline_id || self->state == State::closed) return;
      self->timed_out = true;
      if (self->state == State::reading) {
        beast::error_code ignored;
        self->socket.cancel(ignored);  // the read ends with operation_aborted: answered 408 there
      } else {
        self->close();
      }
    });
  }
  void no_deadline() {
    ++deadline_id;
    timer.cancel();
  }

  void wait_request() {
    state = State::waiting;
    if (buffer.size() > 0) return read_header();  // the next request came with the last one
    deadline(server.draining ? kDrainGrace : server.options.idle_timeout);
    socket.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->state != State::waiting) return;
      if (ec) return self->close();
      self->read_header();
    });
  }

  void read_header() {
    state = State::reading;
    parser.emplace();
    parser->header_limit(kHeaderLimit);
    parser->body_limit(static_cast<uint64_t>(server.options.max_body_bytes));
    deadline(server.options.header_timeout);
    http::async_read_header(socket, buffer, *parser, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state != State::reading) return;
      if (ec) return self->read_failed(ec, true);
      self->after_header();
    });
  }

  void after_header() {
    if (parser->is_done()) return dispatch();
    deadline(server.options.body_timeout);
    if (same_header_name(view(parser->get()[http::field::expect]), "100-continue")) {
      // curl asks before sending a body over 1 KiB and waits a second for this otherwise
      static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket, asio::buffer(go_on), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (self->state != State::reading) return;
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(socket, buffer, *parser, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state != State::reading) return;
      if (ec) return self->read_failed(ec, false);
      self->dispatch();
    });
  }

  void read_failed(beast::error_code ec, bool in_header) {
    no_deadline();
    const auto& o = server.options;
    if (timed_out && in_header && cut_by_drain)
      return refuse(408, "the server is stopping, and the request's header did not arrive within " + ms_text(kDrainHeaderGrace) +
                             " of it");
    if (timed_out)
      return refuse(408, in_header ? "the request's header did not arrive within " + ms_text(o.header_timeout)
                                   : "the request's body did not arrive within " + ms_text(o.body_timeout));
    if (ec == http::error::body_limit)
      return refuse(413, "the request body is larger than " + std::to_string(o.max_body_bytes) + " bytes");
    if (ec == http::error::header_limit)
      return refuse(431, "the request's header is larger than " + std::to_string(kHeaderLimit) + " bytes");
    if (ec == http::error::bad_content_length)
      return refuse(400, "the Content-Length header is not a number of bytes");
    if (ec.category() != http::make_error_code(http::error::bad_method).category()) return close();  // reset, closed
    // closed between requests, or in the middle of a header: no one to answer
    if (ec == http::error::end_of_stream || (in_header && ec == http::error::partial_message)) return close();
    if (!in_header) return refuse(400, "the request body could not be read (cut short, or a malformed chunk)");
    refuse(400, "the request could not be read (a malformed request line or header)");
  }

  void dispatch() {
    state = State::handling;
    no_deadline();  // a handler takes what it takes; the drain's limit bounds it on stop()
    auto& req = parser->get();
    HttpRequestData data;
    data.method = std::string(view(req.method_string()));
    const std::string_view target = view(req.target());
    const size_t q = target.find('?');
    data.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) data.query = std::string(target.substr(q + 1));
    for (const auto& field : req) data.headers.emplace_back(std::string(view(field.name_string())), std::string(view(field.value())));
    data.body = std::move(req.body());
    head = req.method() == http::verb::head;
    close_after = !parser->keep_alive() || server.draining;
    http10_keep_alive = req.version() < 11 && !close_after;
    parser.reset();
    // the handler may block (inference, a store query): it runs on a worker, never on this thread
    asio::post(*server.workers, [self = shared_from_this(), data = std::move(data)]() mutable {
      HttpAnswer answer;
      try {
        answer = self->server.handler(data);
      } catch (const std::exception& e) {
        answer = self->server.refusal(500, std::string("internal error: ") + e.what());
      }
      auto& io = self->server.io;
      if (answer.stream && !self->head) return self->produce(std::move(answer));
      asio::post(io, [self = std::move(self), answer = std::move(answer)]() mutable { self->write(std::move(answer)); });
    });
  }

  void refuse(int status, const std::string& message) {
    close_after = true;
    head = false;
    parser.reset();
    write(server.refusal(status, message));
  }

  // The status line and headers of `answer`, the server's defaults among them, and `length`
  // (Content-Length or Transfer-Encoding).
  std::string head_of(const HttpAnswer& answer, const std::string& length) const {
    const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(answer.status));
    std::string text = "HTTP/1.1 " + std::to_string(answer.status) + " " + std::string(reason.empty() ? "Unknown" : reason) + "\r\n";
    auto has = [&](const std::string& name) {
      return std::any_of(answer.headers.begin(), answer.headers.end(), [&](const auto& h) { return same_header_name(h.first, name); });
    };
    for (const auto& [k, v] : answer.headers) text += k + ": " + v + "\r\n";
    for (const auto& [k, v] : server.options.default_headers)
      if (!has(k)) text += k + ": " + v + "\r\n";
    text += length + "\r\n";
    if (close_after) text += "Connection: close\r\n";
    else if (http10_keep_alive) text += "Connection: keep-alive\r\n";
    return text + "\r\n";
  }

  // On the worker: runs a streamed answer's producer, its pieces going to the loop through a
  // channel (pump() sends them).
  void produce(HttpAnswer answer) {
    auto pipe = std::make_shared<StreamChannel>();
    auto producer = std::move(answer.stream);
    auto self = shared_from_this();
    asio::post(server.io, [self, pipe, answer = std::move(answer)]() mutable { self->start_stream(std::move(answer), pipe); });
    const StreamWriter writer = [&](std::string_view piece) {
      if (!pipe->write(piece)) return false;
      asio::post(server.io, [self] { self->pump(); });
      return true;
    };
    bool broken = false;
    try {
      producer(writer);
    } catch (const std::exception&) {
      broken = true;  // the status is sent already: the answer can only be cut
    }
    {
      std::lock_guard lock(pipe->mutex);
      pipe->ended = true;
      pipe->broken = broken;
    }
    asio::post(server.io, [self] { self->pump(); });
  }

  void start_stream(HttpAnswer answer, std::shared_ptr<StreamChannel> pipe) {
    if (state == State::closed) return pipe->fail();  // closed while the handler ran (drain timeout)
    if (server.draining) close_after = true;
    state = State::streaming;
    channel = std::move(pipe);
    stream_terminated = false;
    out = head_of(answer, "Transfer-Encoding: chunked");
    watch_close();
    pump();
  }

  // Sends what the producer queued, then (once it has returned) the last chunk.
  void pump() {
    if (state != State::streaming || stream_writing) return;
    bool ended = false, broken = false;
    {
      std::lock_guard lock(channel->mutex);
      out += channel->queued;
      channel->queued.clear();
      ended = channel->ended;
      broken = channel->broken;
      channel->room.notify_all();
    }
    if (ended && broken && out.empty()) return close();
    if (ended && !broken && !stream_terminated) {
      out += "0\r\n\r\n";
      stream_terminated = true;
    }
    if (out.empty()) return;
    stream_writing = true;
    deadline(server.options.write_timeout);
    asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state != State::streaming) return;
      self->stream_writing = false;
      self->no_deadline();
      self->out.clear();
      if (ec) return self->close();
      if (!self->stream_terminated) return self->pump();
      self->channel.reset();
      if (self->close_after) return self->linger();
      self->wait_request();
    });
  }

  // While streaming: a client that closes its connection is seen at once, so that its producer's
  // next write answers false rather than filling a dead socket. A pipelined request's bytes
  // (readable, not a close) stay unread until the answer ends.
  void watch_close() {
    socket.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->state != State::streaming) return;
      if (ec) return self->close();
      char byte = 0;
      beast::error_code error;
      const size_t n = self->socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, error);
      if (error || n == 0) self->close();
    });
  }

  void write(HttpAnswer answer) {
    if (state == State::closed) return;  // closed while the handler ran (drain timeout)
    if (server.draining) close_after = true;
    state = State::writing;
    out = head_of(answer, "Content-Length: " + std::to_string(answer.body.size()));
    if (!head) out += answer.body;
    deadline(server.options.write_timeout);
    asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state != State::writing) return;
      self->no_deadline();
      self->out.clear();
      if (ec) return self->close();
      if (self->close_after) return self->linger();
      self->wait_request();
    });
  }

  // After the last answer: our side is shut, what the client still sends is dropped until it
  // closes too, kLingerBytes or kLinger, whichever comes first.
  void linger() {
    state = State::lingering;
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    buffer.clear();
    deadline(kLinger);
    read_dropped();
  }
  void read_dropped() {
    socket.async_read_some(buffer.prepare(64 << 10), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (self->state != State::lingering) return;
      self->lingered += n;
      if (ec || self->lingered >= kLingerBytes) return self->close();
      self->read_dropped();
    });
  }

  void close() {
    if (state == State::closed) return;
    state = State::closed;
    if (channel) channel->fail();
    no_deadline();
    beast::error_code ignored;
    socket.close(ignored);
    server.open.erase(at);
    server.closed();
  }
};

void HttpServer::Impl::start_connection(tcp::socket socket) {
  const bool full = count.fetch_add(1) >= options.max_connections;
  std::make_shared<Connection>(*this, std::move(socket))->start(full);
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(io, [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (!acceptor.is_open() || draining) return;
      // out of file descriptors (or memory): the connection stays in the listen queue; try again
      // shortly rather than spinning on the error
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    start_connection(std::move(socket));  // also when the drain began meanwhile: it was accepted
    if (!draining) accept();
  });
}

void HttpServer::Impl::drain() {
  draining = true;
  accept_retry.cancel();
  // what waits in the listen queue was accepted by the kernel for us: it is taken in and answered
  beast::error_code ec;
  acceptor.non_blocking(true, ec);
  for (;;) {
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (ec) break;
    start_connection(std::move(socket));
  }
  acceptor.close(ec);
  // connections between requests get a moment for a request already sent, then close; the rest
  // close after their answer (write() adds Connection: close)
  std::vector<std::shared_ptr<Connection>> waiting, in_header;
  for (Connection* c : open) {
    if (c->state == Connection::State::waiting) waiting.push_back(c->shared_from_this());
    if (c->state == Connection::State::reading && c->parser && !c->parser->is_header_done()) in_header.push_back(c->shared_from_this());
  }
  for (auto& c : waiting) c->deadline(kDrainGrace);
  for (auto& c : in_header) {
    c->deadline(kDrainHeaderGrace);
    c->cut_by_drain = true;
  }
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorWriter error, const std::string& who)
    : impl_(std::make_shared<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.handler = std::move(handler);
  s.error = std::move(error);
  const std::string& host = s.options.host;
  const int port = s.options.port;
  auto fail = [&] {
    if (port == 0) throw IOError(who + ": cannot bind a port on " + host);
    throw IOError(who + ": cannot bind " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
  };
  beast::error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = {address, static_cast<uint16_t>(port)};
  } else {  // a name: its first address
    tcp::resolver resolver(s.io);
    const auto found = resolver.resolve(host, std::to_string(port), ec);
    if (ec || found.empty()) fail();
    endpoint = found.begin()->endpoint();
  }
  s.acceptor.open(endpoint.protocol(), ec);
  if (ec) fail();
  // SO_REUSEADDR alone: a restart binds at once past TIME_WAIT, but a port another server
  // listens on is refused (SO_REUSEPORT would let a second server silently share the port and
  // take part of its requests)
  s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  s.acceptor.bind(endpoint, ec);
  if (ec) fail();
  // the kernel's largest listen queue (net.core.somaxconn): a burst of connects waits there
  // for the loop instead of being dropped or reset
  s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail();
  s.port = s.acceptor.local_endpoint().port();
  s.workers.emplace(static_cast<size_t>(std::max(1, s.options.workers)));
  s.accept();
  s.busy.emplace(s.io.get_executor());
  s.loop = std::thread([&s] { s.io.run(); });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }

int64_t HttpServer::connections() const { return impl_->count.load(); }

bool HttpServer::running() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->running;
}

void HttpServer::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->changed.wait(lock, [&] { return !impl_->running; });
}

bool HttpServer::sleep_while_running(std::chrono::milliseconds period) {
  std::unique_lock lock(impl_->mutex);
  impl_->changed.wait_for(lock, period, [&] { return !impl_->running; });
  return impl_->running;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (!s.running) return;
    s.running = false;
  }
  s.changed.notify_all();
  asio::post(s.io, [&s] { s.drain(); });
  {
    std::unique_lock lock(s.mutex);
    const bool drained = s.changed.wait_for(lock, s.options.drain_timeout, [&] { return s.count.load() == 0; });
    if (!drained) {
      lock.unlock();
      // past the drain's limit: what is left is closed (a handler still running finds its
      // connection closed and its answer goes nowhere)
      asio::post(s.io, [&s] {
        std::vector<std::shared_ptr<Connection>> left;
        for (Connection* c : s.open) left.push_back(c->shared_from_this());
        for (auto& c : left) c->close();
      });
      lock.lock();
      s.changed.wait(lock, [&] { return s.count.load() == 0; });
    }
  }
  s.workers->join();  // handlers still running (after a drain timeout) end first
  // every connection is closed: the loop ends once their cancelled operations have completed
  s.busy.reset();
  s.loop.join();
}

int HttpServerHolder::port() const {
  std::lock_guard lock(mutex_);
  return server_ ? server_->port() : 0;
}

void HttpServerHolder::wait() {
  std::shared_ptr<HttpServer> server;
  {
    std::lock_guard lock(mutex_);
    server = server_;
  }
  if (server) server->wait();
}

void HttpServerHolder::stop(const std::function<void()>& after) {
  std::lock_guard lock(mutex_);
  if (server_) server_->stop();
  if (after) after();
}

}  // namespace loom::serve::detail
