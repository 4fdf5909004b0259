#include "server/http_request.h"

#include <charconv>

#include "base/strings.h"

namespace server {
namespace {

// RFC 9110 5.6.2: token characters.
bool IsTchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated list (a Connection header) holds `option`.
bool ListHas(std::string_view list, std::string_view option) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (base::EqualsIgnoreAsciiCase(TrimOws(list.substr(0, comma)), option)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// The next line of `in` from *pos, without its end (CRLF or LF); false when no line end yet.
bool NextLine(std::string_view in, size_t* pos, std::string_view* line) {
  const size_t lf = in.find('\n', *pos);
  if (lf == std::string_view::npos) return false;
  size_t end = lf;
  if (end > *pos && in[end - 1] == '\r') --end;
  *line = in.substr(*pos, end - *pos);
  *pos = lf + 1;
  return true;
}

HeadParse Bad(std::string* why, std::string text) {
  *why = std::move(text);
  return HeadParse::kBad;
}

HeadParse ParseRequestLine(std::string_view line, HttpRequest* request, std::string* why) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Bad(why, "the request line is not METHOD TARGET VERSION");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Bad(why, "the method is not a token");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return Bad(why, "the version is not HTTP/x.y");
  }
  if (version[5] != '1') {
    *why = "only HTTP/1.x";
    return HeadParse::kVersion;
  }
  request->minor_version = version[7] - '0';
  if (target.empty() || target.front() != '/') {
    return Bad(why, "the target is not an absolute path");
  }
  const size_t question = target.find('?');
  const std::string_view raw_path = target.substr(0, question);
  request->query = question == std::string_view::npos ? "" : target.substr(question + 1);
  request->method.assign(method);
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
  size_t pos = 0;
  std::string_view line;
  do {
    if (!NextLine(in, &pos, &line)) return HeadParse::kIncomplete;
  } while (line.empty());
  // The whole head first: a partial one is not judged (nor copied) until it is all there.
  const size_t line_start = pos;
  std::string_view header;
  for (;;) {
    if (!NextLine(in, &pos, &header)) return HeadParse::kIncomplete;
    if (header.empty()) break;
  }
  *head_size = pos;

  if (HeadParse r = ParseRequestLine(line, request, why); r != HeadParse::kComplete) return r;
  bool close = false;
  bool keep_alive_asked = false;
  bool has_length = false;
  unsigned long long length = 0;
  request->has_body = false;
  size_t at = line_start;
  while (NextLine(in, &at, &header) && !header.empty()) {
    if (header.front() == ' ' || header.front() == '\t') {
      return Bad(why, "a header line is folded (obsolete line folding)");
    }
    const size_t colon = header.find(':');
    if (colon == std::string_view::npos) return Bad(why, "a header line has no colon");
    const std::string_view name = header.substr(0, colon);
    if (!IsToken(name)) return Bad(why, "a header name is not a token");
    const std::string_view value = TrimOws(header.substr(colon + 1));
    for (char c : value) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
        return Bad(why, "a header value holds a control character");
      }
    }
    if (base::EqualsIgnoreAsciiCase(name, "connection")) {
      close = close || ListHas(value, "close");
      keep_alive_asked = keep_alive_asked || ListHas(value, "keep-alive");
    } else if (base::EqualsIgnoreAsciiCase(name, "content-length")) {
      unsigned long long n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
        return Bad(why, "Content-Length is not a number");
      }
      if (has_length && n != length) return Bad(why, "Content-Length is given twice, unequal");
      has_length = true;
      length = n;
    } else if (base::EqualsIgnoreAsciiCase(name, "transfer-encoding")) {
      request->has_body = true;
    }
  }
  request->has_body = request->has_body || length > 0;
  request->keep_alive =
      !close && !request->has_body && (request->minor_version >= 1 || keep_alive_asked);
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
