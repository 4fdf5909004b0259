// Structured log lines, as klog's InfoS/ErrorS: a constant message plus key/value pairs that name
// what the line is about, so log pipelines select lines by key instead of parsing prose:
//
//   logging::Warn("MountVolume.SetUp failed", {{"pod", logging::KObj(pod.metadata)},
//                                              {"podUID", pod.metadata.uid},
//                                              {"volume", volume_name},
//                                              {"err", status}});
//
// goes to spdlog's default logger as one line whose payload is klog's text form
//
//   "MountVolume.SetUp failed" pod="default/web" podUID="1234" volume="cfg" err="..."
//
// (message and string values quoted as Go's strconv.Quote does, `GoQuote` in go_quote.h, so a
// value can hold quotes, newlines or invalid UTF-8 and the line stays one line; integers and
// booleans bare).
// While spdlog writes that line, `CurrentRecord` gives its formatters the record itself (message
// and fields), which is how the JSON formatter (cmd/volumemanager/json_log_formatter.h) makes each
// key a JSON field without reading the text back.
//
// The keys every module uses (docs/operations.md, "Logs"): `pod` (namespace/name, `KObj`),
// `podUID`, `volume`, `object` (kind/namespace/name, `KRef`), `err`; others are lowerCamel names
// of what the value is (`file`, `dir`, `node`, ...).
//
// Cost: a field holds views of its key and value (no copy, no allocation); nothing is formatted
// when the level is off, so the fields' arguments should be existing strings (`KObj` instead of
// `NamespacedName()`). Keys are compile-time constants checked when compiled (lowerCamel, not one
// of the formatter's own `ts`, `level`, `msg`). Values are names, paths, counts and errors: there
// is no value type for an object, a byte container or a map, so the content of a Secret or
// ConfigMap cannot be passed as a whole; a string value must be a name, never data (the same rule
// as every error message of this project).
//
// Thread-safe as spdlog's default logger is; a written line is built in a stack buffer. The
// record is handed to the formatters through a thread_local pointer set around the (synchronous)
// spdlog call, so it needs no lock and allocates nothing.
#ifndef VOLUMEMANAGER_LOGGING_STRUCTURED_LOG_H_
#define VOLUMEMANAGER_LOGGING_STRUCTURED_LOG_H_

#include <spdlog/spdlog.h>

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace logging {

// A key: a string literal checked at compile time ([a-z][A-Za-z0-9]*, not a reserved name). An
// invalid key fails to compile ("call to non-constexpr function KeyIsInvalid").
class Key {
 public:
  template <size_t N>
  consteval Key(const char (&name)[N]) : name_(name, N - 1) {  // NOLINT: implicit on purpose
    if (!Valid(name_)) KeyIsInvalid();
  }
  std::string_view name() const { return name_; }

  static constexpr bool Valid(std::string_view name) {
    if (name.empty() || name[0] < 'a' || name[0] > 'z') return false;
    for (char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (!ok) return false;
    }
    return name != "ts" && name != "level" && name != "msg";
  }

 private:
  static void KeyIsInvalid() {}  // not constexpr: calling it during constant evaluation fails
  std::string_view name_;
};

// A value: a view of a string, a "namespace/name" or "kind/namespace/name" built only when the
// line is written, an integer or a boolean. Views: the arguments must outlive the call (they do
// when passed in the call's own expression).
class Value {
 public:
  enum class Type { kString, kPath, kInt, kUint, kBool, kAbsent };

  Value(std::string_view s) : type_(Type::kString), a_(s) {}    // NOLINT: implicit on purpose
  Value(const std::string& s) : type_(Type::kString), a_(s) {}  // NOLINT
  Value(const char* s) : type_(Type::kString), a_(s) {}         // NOLINT
  Value(const base::Status& s) : type_(Type::kString), a_(s.message()) {}  // NOLINT
  template <std::same_as<bool> B>                    // only a bool, not a pointer converted to one
  Value(B b) : type_(Type::kBool), u_(b ? 1 : 0) {}  // NOLINT
  template <std::signed_integral T>
  Value(T i) : type_(Type::kInt), i_(i) {}  // NOLINT
  template <std::unsigned_integral T>
  requires(!std::same_as<T, bool>) Value(T u) : type_(Type::kUint), u_(u) {}  // NOLINT
  // No byte containers, maps or objects: see the header comment.
  Value(const std::vector<uint8_t>&) = delete;
  Value(std::nullptr_t) = delete;

  // "a/b/c" with the empty parts left out (a cluster-scoped object has no namespace).
  static Value Path(std::string_view a, std::string_view b, std::string_view c = {}) {
    Value v(a);
    v.type_ = Type::kPath;
    v.b_ = b;
    v.c_ = c;
    return v;
  }

  // No value: the field is left out of the line (a name that is not known).
  static Value Absent() {
    Value v("");
    v.type_ = Type::kAbsent;
    return v;
  }
  // The string, or Absent() when it is empty.
  static Value IfSet(std::string_view s) { return s.empty() ? Absent() : Value(s); }

  // Path(kind, namespace, name) with the kind written in lower case ("ConfigMap" -> "configmap").
  static Value KindPath(std::string_view kind, std::string_view b, std::string_view c) {
    Value v = Path(kind, b, c);
    v.lower_a_ = true;
    return v;
  }

  Type type() const { return type_; }
  bool lower_a() const { return lower_a_; }
  // The parts, for the writer: a string or path's parts, an integer's value.
  std::string_view a() const { return a_; }
  std::string_view b() const { return b_; }
  std::string_view c() const { return c_; }
  int64_t int_value() const { return i_; }
  uint64_t uint_value() const { return u_; }

 private:
  Type type_;
  std::string_view a_, b_, c_;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  bool lower_a_ = false;
};

struct Field {
  Key key;
  Value value;
};

// `pod`-style names: "namespace/name" from anything with `namespace_` and `name` (kube's
// ObjectMeta). Nothing is copied.
template <typename Meta>
Value KObj(const Meta& meta) {
  return Value::Path(meta.namespace_, meta.name);
}
// The same for an object that may be missing (a pointer, shared or plain): absent for none.
template <typename Object>
requires requires(const Object& o) { KObj(o->metadata); }
Value KObjOf(const Object& object) {
  return object != nullptr ? KObj(object->metadata) : Value::Absent();
}
inline Value KObj(std::string_view namespace_, std::string_view name) {
  return Value::Path(namespace_, name);
}
// `object`-style names: "kind/namespace/name", the kind in lower case as kubectl writes it
// ("configmap", "secret", "pod", "lease"; an API Kind such as "ConfigMap" is lowered when the line
// is written). The overload for a reference (kube::ObjectRef) finds the kind's name with
// `ObjectKindName(ref.kind)` in the kind's namespace, so this header does not depend on kube/.
inline Value KRef(std::string_view kind, std::string_view namespace_, std::string_view name) {
  return Value::KindPath(kind, namespace_, name);
}
template <typename Ref>
Value KRef(const Ref& ref) {
  return Value::KindPath(ObjectKindName(ref.kind), ref.namespace_, ref.name);
}

// Writes the line (nothing at all when the default logger is not at `level`).
void Emit(spdlog::level::level_enum level, std::string_view msg,
          std::initializer_list<Field> fields);

inline bool Enabled(spdlog::level::level_enum level) {
  return spdlog::default_logger_raw()->should_log(level);
}

inline void Log(spdlog::level::level_enum level, std::string_view msg,
                std::initializer_list<Field> fields = {}) {
  if (Enabled(level)) Emit(level, msg, fields);
}
inline void Debug(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Log(spdlog::level::debug, msg, fields);
}
inline void Info(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Log(spdlog::level::info, msg, fields);
}
inline void Warn(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Log(spdlog::level::warn, msg, fields);
}
inline void Error(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Log(spdlog::level::err, msg, fields);
}

// The text form of a line, as Emit writes it (for tests and the formatter's tests).
std::string FormatStructuredLine(std::string_view msg, std::initializer_list<Field> fields);

// A structured line as Emit hands it to spdlog: its message, its fields (views, valid only while
// the line is written) and the text form that is spdlog's payload.
struct Record {
  std::string_view msg;
  std::initializer_list<Field> fields;
  std::string_view payload;
};

// For a formatter or sink: the record of the line being written when `payload` is the very
// payload this thread's Emit passed to spdlog (same buffer, not merely the same text); nullptr
// otherwise: a line written with spdlog's format functions, or a payload copied by an async
// logger or a backtrace (the project uses neither), which then stays text.
const Record* CurrentRecord(std::string_view payload);

// The string a string or path value stands for, unquoted ("namespace/name", the kind lowered);
// "" for any other type.
std::string StringValue(const Value& value);

}  // namespace logging

#endif  // VOLUMEMANAGER_LOGGING_STRUCTURED_LOG_H_
