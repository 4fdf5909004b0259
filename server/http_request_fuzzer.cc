// libFuzzer target for the admin server's request head parser (http_request.h) and the shared
// HTTP/1.x head parser under it (base/http_head.h, its request side). Whatever the bytes:
//  * parsing never crashes, and a bad head says why;
//  * the server's parser and base::ParseHttpRequestHead agree on where the head ends, and on its
//    method and version when the server takes it; the fields iterated have token names;
//  * a complete head is within the input, its path starts with '/' and holds no NUL, and a
//    connection that carries a body is never kept open;
//  * the head alone parses the same, to the same size (what follows it, the next pipelined
//    request, changes nothing), and every shorter prefix of it is incomplete or the same
//    verdict (the server parses again after each read);
//  * QueryHas finds every key of the query it was given.
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/http_head.h"
#include "server/http_request.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool Same(const server::HttpRequest& a, const server::HttpRequest& b) {
  return a.method == b.method && a.path == b.path && a.query == b.query &&
         a.minor_version == b.minor_version && a.keep_alive == b.keep_alive &&
         a.has_body == b.has_body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  server::HttpRequest request;
  size_t head_size = 0;
  std::string why;
  const server::HeadParse result = server::ParseRequestHead(in, &request, &head_size, &why);
  if (result == server::HeadParse::kBad || result == server::HeadParse::kVersion) {
    Check(!why.empty());
  }
  base::HttpRequestHead shared;
  std::string shared_why;
  const base::HttpHeadParse shared_result = base::ParseHttpRequestHead(in, &shared, &shared_why);
  Check((shared_result == base::HttpHeadParse::kIncomplete) ==
        (result == server::HeadParse::kIncomplete));
  if (shared_result == base::HttpHeadParse::kBad) Check(!shared_why.empty());
  if (shared_result != base::HttpHeadParse::kIncomplete) Check(shared.size == head_size);
  for (const base::HttpField& f : shared.fields) {
    Check(!f.name.empty() && f.name.find_first_of(" \t:\r\n") == std::string_view::npos);
    Check(shared.fields.Find(f.name).has_value());
  }
  if (result != server::HeadParse::kComplete) return 0;
  Check(shared_result == base::HttpHeadParse::kComplete);
  Check(shared.method == request.method && shared.major == 1 &&
        shared.minor == request.minor_version);
  Check(head_size > 0 && head_size <= in.size());
  Check(!request.path.empty() && request.path.front() == '/');
  Check(request.path.find('\0') == std::string::npos);
  Check(!(request.keep_alive && request.has_body));

  server::HttpRequest alone;
  size_t alone_size = 0;
  std::string alone_why;
  Check(server::ParseRequestHead(in.substr(0, head_size), &alone, &alone_size, &alone_why) ==
        server::HeadParse::kComplete);
  Check(alone_size == head_size && Same(alone, request));
  // A prefix that ends before the head's last line end is incomplete.
  server::HttpRequest part;
  size_t part_size = 0;
  std::string part_why;
  Check(server::ParseRequestHead(in.substr(0, head_size - 1), &part, &part_size, &part_why) ==
        server::HeadParse::kIncomplete);

  std::string_view query = request.query;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    Check(server::QueryHas(request.query, param.substr(0, param.find('='))));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return 0;
}
