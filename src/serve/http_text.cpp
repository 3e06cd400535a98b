// What the HTTP layer reads from a request and adds to an answer, text only (http_server.h):
// header names, percent-decoding, query strings, the Host check, the API's headers and the
// comparison of secrets. Apart from the event loop (http_server.cpp), so that it needs no Beast.
#include <algorithm>
#include <cctype>

#include <openssl/crypto.h>

#include "serve/http_server.h"

namespace loom::serve::detail {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]"; }

}  // namespace

bool same_header_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string HttpRequestData::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (same_header_name(k, name)) return v;
  return "";
}

std::string percent_decode(const std::string& segment) {
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    int hi = -1, lo = -1;
    if (segment[i] == '%' && i + 2 < segment.size()) {
      hi = hex_digit(segment[i + 1]);
      lo = hex_digit(segment[i + 2]);
    }
    if (hi >= 0 && lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += segment[i];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(const std::string& query) {
  std::vector<std::pair<std::string, std::string>> out;
  auto decode = [](std::string text) {
    std::replace(text.begin(), text.end(), '+', ' ');  // a form's space
    return percent_decode(text);
  };
  size_t i = 0;
  while (i <= query.size()) {
    const size_t end = std::min(query.find('&', i), query.size());
    const std::string item = query.substr(i, end - i);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      const std::string name = decode(item.substr(0, eq));
      const std::string value = eq == std::string::npos ? "" : decode(item.substr(eq + 1));
      auto same = std::find_if(out.begin(), out.end(), [&](const auto& kv) { return kv.first == name; });
      if (same != out.end()) same->second = value;
      else out.emplace_back(name, value);
    }
    i = end + 1;
  }
  return out;
}

bool host_allowed(const std::string& listen_host, const std::string& host_header) {
  if (!loopback(listen_host) || host_header.empty()) return true;
  const std::string name = host_header[0] == '[' ? host_header.substr(0, host_header.find(']') + 1)
                                                 : host_header.substr(0, host_header.find(':'));
  return loopback(name);
}

std::vector<std::pair<std::string, std::string>> api_headers() {
  return {{"X-Content-Type-Options", "nosniff"},
          {"Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"},
          {"Referrer-Policy", "no-referrer"},
          {"Cache-Control", "no-store"}};
}

bool same_secret(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size() || expected.empty()) return false;
  return CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

}  // namespace loom::serve::detail
