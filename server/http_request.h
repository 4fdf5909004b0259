// The HTTP/1.x request head as the admin server reads it: a request line and header fields
// (RFC 9112), parsed strictly and without allocation beyond the values kept. Plain functions on
// bytes, so that they can be fuzzed (server/http_request_fuzzer.cc).
//
// The admin endpoints take no body: a request that announces one (Content-Length above 0 or any
// Transfer-Encoding) is answered and the connection closed, the body never read.
#ifndef VOLUMEMANAGER_SERVER_HTTP_REQUEST_H_
#define VOLUMEMANAGER_SERVER_HTTP_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace server {

struct HttpRequest {
  std::string method;     // as sent (methods are case-sensitive)
  std::string path;       // the target's path, percent-decoded; starts with '/'
  std::string query;      // the target after '?', as sent ("" when none)
  int minor_version = 1;  // HTTP/1.<minor_version>
  // The connection stays open after the answer: HTTP/1.1 unless "Connection: close", HTTP/1.0
  // only with "Connection: keep-alive"; never after a request with a body.
  bool keep_alive = true;
  bool has_body = false;
};

enum class HeadParse {
  kIncomplete,  // no end of head yet: read more
  kComplete,    // *request and *head_size are set
  kBad,         // 400; *why says what
  kVersion,     // 505: not HTTP/1.x
};

// Parses the request head at the start of `in`. Empty lines before the request line are skipped
// (RFC 9112 2.2); line ends are CRLF or a bare LF. On kComplete, *head_size is the number of bytes
// the head took, empty lines before it included; the next request (pipelined) starts there.
// The caller bounds the head's size: kIncomplete says nothing about how long it may grow.
HeadParse ParseRequestHead(std::string_view in, HttpRequest* request, size_t* head_size,
                           std::string* why);

// Whether the query ("a=1&verbose&b") names `key`, with or without a value.
bool QueryHas(std::string_view query, std::string_view key);

// The reason phrase of a status code the server sends ("Not Found"); "Unknown" otherwise.
std::string_view ReasonPhrase(unsigned status);

}  // namespace server

#endif  // VOLUMEMANAGER_SERVER_HTTP_REQUEST_H_
