// libFuzzer target for the response side of the HTTP/1.x head parser (http_head.h). Whatever the
// bytes:
//  * parsing never crashes, and a bad head says why;
//  * a complete or bad head lies within the input; a complete head's status is 100 to 999, and
//    its status line is what ParseHttpStatusLine reads from HttpFirstLine of the input;
//  * every field iterated has a token name and a value without surrounding whitespace, Find of
//    its name finds a field, and HttpContentLength never crashes;
//  * the head alone parses the same, to the same size (a body after it changes nothing), and one
//    byte short is incomplete (the reload caller parses again after each read).
// Built only with -DVM_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/http_head.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool Same(const base::HttpStatusLine& a, const base::HttpStatusLine& b) {
  return a.major == b.major && a.minor == b.minor && a.status == b.status && a.reason == b.reason;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  base::HttpResponseHead head;
  std::string why;
  const base::HttpHeadParse result = base::ParseHttpResponseHead(in, &head, &why);
  if (result == base::HttpHeadParse::kIncomplete) {
    // HttpFirstLine and the status line parser take any bytes.
    base::HttpStatusLine line;
    std::string line_why;
    if (!base::ParseHttpStatusLine(base::HttpFirstLine(in), &line, &line_why)) {
      Check(!line_why.empty());
    }
    return 0;
  }
  Check(head.size > 0 && head.size <= in.size());
  if (result == base::HttpHeadParse::kBad) Check(!why.empty());
  if (result == base::HttpHeadParse::kBad && !head.bad_field) return 0;

  base::HttpStatusLine line;
  std::string line_why;
  Check(base::ParseHttpStatusLine(base::HttpFirstLine(in), &line, &line_why));
  Check(Same(line, head.status_line));
  Check(line.status >= 100 && line.status <= 999);
  for (const base::HttpField& f : head.fields) {
    Check(!f.name.empty() && f.name.find_first_of(" \t:\r\n") == std::string_view::npos);
    Check(f.value.empty() || (f.value.front() != ' ' && f.value.front() != '\t' &&
                              f.value.back() != ' ' && f.value.back() != '\t'));
    Check(f.value.find_first_of("\r\n") == std::string_view::npos);
    Check(head.fields.Find(f.name).has_value());
  }
  std::optional<uint64_t> length;
  std::string length_why;
  if (!base::HttpContentLength(head.fields, &length, &length_why)) Check(!length_why.empty());
  if (result != base::HttpHeadParse::kComplete) return 0;

  base::HttpResponseHead alone;
  std::string alone_why;
  Check(base::ParseHttpResponseHead(in.substr(0, head.size), &alone, &alone_why) ==
        base::HttpHeadParse::kComplete);
  Check(alone.size == head.size && Same(alone.status_line, head.status_line));
  base::HttpResponseHead part;
  Check(base::ParseHttpResponseHead(in.substr(0, head.size - 1), &part, &alone_why) ==
        base::HttpHeadParse::kIncomplete);
  return 0;
}
