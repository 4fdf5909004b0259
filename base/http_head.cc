#include "base/http_head.h"

#include <charconv>

#include "base/strings.h"

namespace base {
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

// A control character other than HTAB (field values, reason phrases).
bool IsControl(char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
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

bool Fail(std::string* why, const char* text) {
  *why = text;
  return false;
}

// "HTTP/x.y"; with `unversioned_major`, also "HTTP/2" and "HTTP/3" (minor 0).
bool ParseVersion(std::string_view v, bool unversioned_major, int* major, int* minor) {
  if (v.substr(0, 5) != "HTTP/") return false;
  if (v.size() == 8 && IsDigit(v[5]) && v[6] == '.' && IsDigit(v[7])) {
    *major = v[5] - '0';
    *minor = v[7] - '0';
    return true;
  }
  if (unversioned_major && v.size() == 6 && (v[5] == '2' || v[5] == '3')) {
    *major = v[5] - '0';
    *minor = 0;
    return true;
  }
  return false;
}

bool ParseRequestLine(std::string_view line, HttpRequestHead* head, std::string* why) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(why, "the request line is not METHOD TARGET VERSION");
  }
  const std::string_view method = line.substr(0, sp1);
  if (!IsToken(method)) return Fail(why, "the method is not a token");
  if (!ParseVersion(line.substr(sp2 + 1), false, &head->major, &head->minor)) {
    return Fail(why, "the version is not HTTP/x.y");
  }
  head->method = method;
  head->target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  return true;
}

}  // namespace

bool ParseHttpField(std::string_view line, HttpField* field, std::string* why) {
  if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
    return Fail(why, "a header line is folded (obsolete line folding)");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Fail(why, "a header line has no colon");
  const std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) return Fail(why, "a header name is not a token");
  const std::string_view value = TrimOws(line.substr(colon + 1));
  for (char c : value) {
    if (IsControl(c)) return Fail(why, "a header value holds a control character");
  }
  field->name = name;
  field->value = value;
  return true;
}

HttpFields::Iterator::Iterator(std::string_view rest) {
  if (rest.empty()) return;
  rest_ = rest;
  size_t pos = 0;
  std::string_view line;
  std::string why;
  // The lines were parsed when the head was: each has its end and parses.
  if (NextLine(rest_, &pos, &line)) ParseHttpField(line, &field_, &why);
}

HttpFields::Iterator& HttpFields::Iterator::operator++() {
  const size_t lf = rest_.find('\n');
  *this = Iterator(lf == std::string_view::npos ? std::string_view() : rest_.substr(lf + 1));
  return *this;
}

std::optional<std::string_view> HttpFields::Find(std::string_view name) const {
  for (const HttpField& f : *this) {
    if (EqualsIgnoreAsciiCase(f.name, name)) return f.value;
  }
  return std::nullopt;
}

bool HttpFields::HasToken(std::string_view name, std::string_view token) const {
  for (const HttpField& f : *this) {
    if (!EqualsIgnoreAsciiCase(f.name, name)) continue;
    std::string_view list = f.value;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (EqualsIgnoreAsciiCase(TrimOws(list.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

// The part both heads share: the start line, then field lines up to the empty one.
struct HttpHeadParser {
  // Finds the head in `in` from `start` (the start line's first byte). On kComplete, *size and
  // *start_line are set, and *fields_begin is where the field lines start.
  static HttpHeadParse Find(std::string_view in, size_t start, std::string_view* start_line,
                            size_t* fields_begin, size_t* size) {
    size_t pos = start;
    if (!NextLine(in, &pos, start_line)) return HttpHeadParse::kIncomplete;
    *fields_begin = pos;
    std::string_view line;
    do {
      if (!NextLine(in, &pos, &line)) return HttpHeadParse::kIncomplete;
    } while (!line.empty());
    *size = pos;
    return HttpHeadParse::kComplete;
  }

  // Checks the field lines from `begin` to the empty line; *fields gets those that parse, up to
  // the first that does not.
  static bool Fields(std::string_view in, size_t begin, HttpFields* fields, std::string* why) {
    size_t pos = begin;
    size_t good_end = begin;
    std::string_view line;
    bool ok = true;
    while (NextLine(in, &pos, &line) && !line.empty()) {
      HttpField field;
      if (!ParseHttpField(line, &field, why)) {
        ok = false;
        break;
      }
      good_end = pos;
    }
    *fields = HttpFields(in.substr(begin, good_end - begin));
    return ok;
  }
};

HttpHeadParse ParseHttpRequestHead(std::string_view in, HttpRequestHead* head, std::string* why) {
  *head = HttpRequestHead();
  size_t start = 0;
  std::string_view line;
  // Empty lines before the request line.
  for (size_t pos = 0;;) {
    if (!NextLine(in, &pos, &line)) return HttpHeadParse::kIncomplete;
    if (!line.empty()) break;
    start = pos;
  }
  size_t fields_begin = 0;
  size_t size = 0;
  if (HttpHeadParser::Find(in, start, &line, &fields_begin, &size) != HttpHeadParse::kComplete) {
    return HttpHeadParse::kIncomplete;
  }
  head->size = size;
  if (!ParseRequestLine(line, head, why)) return HttpHeadParse::kBad;
  if (!HttpHeadParser::Fields(in, fields_begin, &head->fields, why)) {
    head->bad_field = true;
    return HttpHeadParse::kBad;
  }
  return HttpHeadParse::kComplete;
}

HttpHeadParse ParseHttpResponseHead(std::string_view in, HttpResponseHead* head, std::string* why) {
  *head = HttpResponseHead();
  std::string_view line;
  size_t fields_begin = 0;
  size_t size = 0;
  if (HttpHeadParser::Find(in, 0, &line, &fields_begin, &size) != HttpHeadParse::kComplete) {
    return HttpHeadParse::kIncomplete;
  }
  head->size = size;
  if (!ParseHttpStatusLine(line, &head->status_line, why)) return HttpHeadParse::kBad;
  if (!HttpHeadParser::Fields(in, fields_begin, &head->fields, why)) {
    head->bad_field = true;
    return HttpHeadParse::kBad;
  }
  return HttpHeadParse::kComplete;
}

bool ParseHttpStatusLine(std::string_view line, HttpStatusLine* status_line, std::string* why) {
  const size_t sp = line.find(' ');
  HttpStatusLine s;
  if (sp == std::string_view::npos || !ParseVersion(line.substr(0, sp), true, &s.major, &s.minor)) {
    return Fail(why, "the status line does not start with HTTP/x.y");
  }
  const std::string_view rest = line.substr(sp + 1);
  if (rest.size() < 3 || !IsDigit(rest[0]) || rest[0] == '0' || !IsDigit(rest[1]) ||
      !IsDigit(rest[2]) || (rest.size() > 3 && rest[3] != ' ')) {
    return Fail(why, "the status code is not 3 digits from 100");
  }
  s.status = (rest[0] - '0') * 100 + (rest[1] - '0') * 10 + (rest[2] - '0');
  s.reason = rest.size() > 3 ? rest.substr(4) : std::string_view();
  for (char c : s.reason) {
    if (IsControl(c)) return Fail(why, "the reason phrase holds a control character");
  }
  *status_line = s;
  return true;
}

std::string_view HttpFirstLine(std::string_view in) {
  size_t pos = 0;
  std::string_view line;
  if (NextLine(in, &pos, &line)) return line;
  if (!in.empty() && in.back() == '\r') in.remove_suffix(1);
  return in;
}

bool HttpContentLength(const HttpFields& fields, std::optional<uint64_t>* length,
                       std::string* why) {
  length->reset();
  for (const HttpField& f : fields) {
    if (!EqualsIgnoreAsciiCase(f.name, "content-length")) continue;
    uint64_t n = 0;
    const std::string_view v = f.value;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
      return Fail(why, "Content-Length is not a number");
    }
    if (*length && **length != n) return Fail(why, "Content-Length is given twice, unequal");
    *length = n;
  }
  return true;
}

}  // namespace base
