#include "server/http_request.h"

#include <cstdint>
#include <optional>

#include "base/http_head.h"
#include "base/strings.h"

namespace server {
namespace {

HeadParse Bad(std::string* why, std::string text) {
  *why = std::move(text);
  return HeadParse::kBad;
}

// The server's own reading of a request line base::ParseHttpRequestHead took: HTTP/1.x only, an
// absolute path, percent-decoded.
HeadParse CheckRequestLine(const base::HttpRequestHead& head, HttpRequest* request,
                           std::string* why) {
  if (head.major != 1) {
    *why = "only HTTP/1.x";
    return HeadParse::kVersion;
  }
  request->minor_version = head.minor;
  const std::string_view target = head.target;
  if (target.empty() || target.front() != '/') {
    return Bad(why, "the target is not an absolute path");
  }
  const size_t question = target.find('?');
  const std::string_view raw_path = target.substr(0, question);
  request->query = question == std::string_view::npos ? "" : target.substr(question + 1);
  request->method.assign(head.method);
  request->path.clear();
  for (size_t i = 0; i < raw_path.size(); ++i) {
    const char c = raw_path[i];
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Bad(why, "the target holds a control character");
    }
    if (c != '%') {
      request->path += c;
      continue;
    }
    const int hi = i + 2 < raw_path.size() ? base::HexDigitValue(raw_path[i + 1]) : -1;
    const int lo = hi >= 0 ? base::HexDigitValue(raw_path[i + 2]) : -1;
    if (lo < 0) return Bad(why, "the target has a bad percent-encoding");
    if (hi == 0 && lo == 0) return Bad(why, "the target encodes a NUL");
    request->path += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  for (char c : request->query) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Bad(why, "the target holds a control character");
    }
  }
  return HeadParse::kComplete;
}

}  // namespace

HeadParse ParseRequestHead(std::string_view in, HttpRequest* request, size_t* head_size,
                           std::string* why) {
  base::HttpRequestHead head;
  std::string field_why;
  const base::HttpHeadParse parsed = base::ParseHttpRequestHead(in, &head, &field_why);
  if (parsed == base::HttpHeadParse::kIncomplete) return HeadParse::kIncomplete;
  *head_size = head.size;
  if (parsed == base::HttpHeadParse::kBad && !head.bad_field) return Bad(why, field_why);
  // Errors in the order of the lines: the request line's, then the fields' (Content-Length's
  // among those before a bad field line).
  if (HeadParse r = CheckRequestLine(head, request, why); r != HeadParse::kComplete) return r;
  std::optional<uint64_t> length;
  if (!base::HttpContentLength(head.fields, &length, why)) return HeadParse::kBad;
  if (parsed == base::HttpHeadParse::kBad) return Bad(why, field_why);
  request->has_body = head.fields.Find("transfer-encoding").has_value() || length.value_or(0) > 0;
  request->keep_alive =
      !head.fields.HasToken("connection", "close") && !request->has_body &&
      (request->minor_version >= 1 || head.fields.HasToken("connection", "keep-alive"));
  return HeadParse::kComplete;
}

bool QueryHas(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (param.substr(0, param.find('=')) == key) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

std::string_view ReasonPhrase(unsigned status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace server
