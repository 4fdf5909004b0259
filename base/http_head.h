// The one HTTP/1.x head parser of the process (RFC 9112): a request head (request line and header
// fields) or a response head (status line and header fields), parsed from bytes without copying:
// every view points into the bytes parsed, which must outlive it. Plain functions, fuzzed
// (server/http_request_fuzzer.cc for requests, base/http_response_head_fuzzer.cc for responses).
//
// Lines end with CRLF or a bare LF (RFC 9112 2.2). A field line is `name ":" OWS value OWS`: the
// name a token, nothing between it and the colon (5.1), no obsolete line folding (5.2), no control
// character but HTAB in the value. Names compare ASCII case-insensitively.
//
// Bounded by the caller: kIncomplete says nothing about how long a head may grow, and each caller
// keeps its own limit on the bytes it reads. What a head means (keep-alive, a body, the target's
// form) is the caller's; HttpContentLength and HttpFields::HasToken help.
#ifndef VOLUMEMANAGER_BASE_HTTP_HEAD_H_
#define VOLUMEMANAGER_BASE_HTTP_HEAD_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

namespace base {

enum class HttpHeadParse {
  kIncomplete,  // no end of head yet: read more
  kComplete,    // the head is parsed; its size is set
  kBad,         // the head is all there and is not HTTP/1.x; *why says what
};

// One header field: its name as sent, its value without the whitespace around it.
struct HttpField {
  std::string_view name;
  std::string_view value;
};

// Splits one field line (without its line end). False, with *why, for obsolete line folding (a
// leading SP or HTAB), no colon, a name that is not a token (whitespace before the colon
// included) or a control character in the value.
bool ParseHttpField(std::string_view line, HttpField* field, std::string* why);

// The field lines of a parsed head, in order: iterate them, or look one up by name.
class HttpFields {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = HttpField;
    using difference_type = std::ptrdiff_t;
    using pointer = const HttpField*;
    using reference = const HttpField&;

    Iterator() = default;
    const HttpField& operator*() const { return field_; }
    const HttpField* operator->() const { return &field_; }
    Iterator& operator++();
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return rest_.data() == other.rest_.data(); }

   private:
    friend class HttpFields;
    explicit Iterator(std::string_view rest);
    std::string_view rest_;  // this field's line and those after it; empty (null data) at the end
    HttpField field_;
  };

  HttpFields() = default;
  Iterator begin() const { return Iterator(lines_); }
  Iterator end() const { return Iterator(); }
  bool empty() const { return lines_.empty(); }

  // The value of the first field named `name` (case-insensitive); nullopt when there is none.
  std::optional<std::string_view> Find(std::string_view name) const;
  // Whether a field named `name` lists `token` (case-insensitive) among its comma-separated
  // elements ("Connection: upgrade, close" has "close").
  bool HasToken(std::string_view name, std::string_view token) const;

 private:
  friend struct HttpHeadParser;
  explicit HttpFields(std::string_view lines) : lines_(lines) {}
  std::string_view lines_;  // field lines that parse, each with its line end
};

struct HttpRequestHead {
  std::string_view method;  // a token, as sent (methods are case-sensitive)
  std::string_view target;  // as sent: no SP, otherwise unchecked (its form is the caller's)
  int major = 0;            // HTTP/<major>.<minor>, one digit each: the caller decides which it
  int minor = 0;            // serves
  HttpFields fields;
  // kComplete and kBad: the bytes the head took, empty lines before the request line included;
  // the next request (pipelined) starts there.
  size_t size = 0;
  // kBad only: the request line is good (method, target, major and minor are set) and a field
  // line is not; `fields` holds those before it. A caller with checks of its own on the request
  // line or the fields can report its errors in the order of the lines.
  bool bad_field = false;
};

// The status line: HTTP-version SP 3DIGIT [SP reason-phrase]. The version is HTTP/x.y, or
// HTTP/2 and HTTP/3 as libcurl writes the status of those versions. The status is 100 to 999
// (RFC 9110 15 calls codes above 599 invalid: the caller decides); the reason phrase holds no
// control character but HTAB. A missing SP after the code is taken (as libcurl and most clients
// do).
struct HttpStatusLine {
  int major = 0;
  int minor = 0;  // 0 for HTTP/2 and HTTP/3
  int status = 0;
  std::string_view reason;
};

struct HttpResponseHead {
  HttpStatusLine status_line;
  HttpFields fields;
  size_t size = 0;         // kComplete and kBad: the bytes the head took; the body starts there
  bool bad_field = false;  // kBad only: as in HttpRequestHead, for the status line
};

// Parses the request head at the start of `in`. Empty lines before the request line are skipped
// (RFC 9112 2.2). The whole head must be there before any of it is judged. The request line is
// METHOD SP TARGET SP HTTP/x.y with one SP each.
HttpHeadParse ParseHttpRequestHead(std::string_view in, HttpRequestHead* head, std::string* why);

// Parses the response head at the start of `in` (no empty line may precede the status line).
HttpHeadParse ParseHttpResponseHead(std::string_view in, HttpResponseHead* head, std::string* why);

// Parses one status line (without its line end); false, with *why, when it is not one.
bool ParseHttpStatusLine(std::string_view line, HttpStatusLine* status_line, std::string* why);

// The first line of `in` without its line end (CRLF or LF); all of `in` when it has none, less a
// CR at its end (bytes cut off after the CR of a CRLF). For a status line read before its head
// is complete (a connection closed early, a size limit), or a line libcurl hands over.
std::string_view HttpFirstLine(std::string_view in);

// The message body's length from the Content-Length fields (RFC 9112 6.3): nullopt without one.
// False, with *why, when one is not a decimal number or two differ.
bool HttpContentLength(const HttpFields& fields, std::optional<uint64_t>* length, std::string* why);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_HTTP_HEAD_H_
