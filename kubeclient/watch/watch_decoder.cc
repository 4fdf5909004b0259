#include "kubeclient/watch/watch_decoder.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace kubeclient {
namespace {

// Whether `text` opens as a BOOKMARK event does: `{"type":"BOOKMARK"` (whitespace allowed
// between the tokens). Both the API server (Go's encoder writes `type` first) and the test
// server write it so.
bool OpensAsBookmark(std::string_view text) {
  size_t i = 0;
  const auto skip_space = [&] {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) {
      ++i;
    }
  };
  const auto token = [&](std::string_view t) {
    skip_space();
    if (text.substr(i, t.size()) != t) return false;
    i += t.size();
    return true;
  };
  return token("{") && token("\"type\"") && token(":") && token("\"BOOKMARK\"");
}

// A SAX pass over a BOOKMARK event that keeps only what a bookmark gives its reader,
// object.metadata.resourceVersion, building no document (a bookmark a minute per watch is most
// of an idle daemon's traffic). Anything the full parse would judge differently (a repeated key
// on the way, a value of another type there) sets `unusual`, and the event is parsed in full.
class BookmarkSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool string(string_t& val) override {
    if (AtType()) {
      type = val;
    } else if (AtResourceVersion()) {
      resource_version = val;
    } else if (AtObject() || AtMetadata()) {
      unusual = true;
    }
    return true;
  }
  bool start_object(std::size_t) override {
    if (AtType() || AtResourceVersion()) unusual = true;
    if (AtObject()) {
      object_open_ = true;
    } else if (AtMetadata()) {
      metadata_open_ = true;
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1) object_open_ = false;
    if (depth_ == 2) metadata_open_ = false;
    return true;
  }
  bool start_array(std::size_t) override {
    Scalar();
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& val) override {
    if (depth_ == 1) {
      key1_ = val;
      if (val == "type" && ++types_ > 1) unusual = true;
      if (val == "object" && ++objects > 1) unusual = true;
    } else if (depth_ == 2 && object_open_) {
      key2_ = val;
      if (val == "metadata" && ++metadatas_ > 1) unusual = true;
    } else if (depth_ == 3 && metadata_open_) {
      key3_ = val;
      if (val == "resourceVersion" && ++versions_ > 1) unusual = true;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  std::string type;
  std::string resource_version;
  int objects = 0;  // `object` keys; 1 with an object value, unless unusual
  bool unusual = false;

 private:
  // Where the value being read goes.
  bool AtType() const { return depth_ == 1 && key1_ == "type"; }
  bool AtObject() const { return depth_ == 1 && key1_ == "object"; }
  bool AtMetadata() const { return depth_ == 2 && object_open_ && key2_ == "metadata"; }
  bool AtResourceVersion() const {
    return depth_ == 3 && metadata_open_ && key3_ == "resourceVersion";
  }
  // A value that is not a string nor an object (an array opening, too).
  bool Scalar() {
    if (AtType() || AtResourceVersion() || AtObject() || AtMetadata()) unusual = true;
    return true;
  }

  int depth_ = 0;
  std::string key1_, key2_, key3_;
  bool object_open_ = false;
  bool metadata_open_ = false;
  int types_ = 0, metadatas_ = 0, versions_ = 0;
};

}  // namespace

const char* WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "?";
}

WatchDecoder::WatchDecoder(size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

base::Status WatchDecoder::Feed(std::string_view data, std::vector<WatchEvent>& out) {
  if (!failed_.ok()) return failed_;
  buffer_.append(data);
  size_t consumed = 0;  // bytes of buffer_ fully handled
  for (size_t i = scan_; i < buffer_.size(); ++i) {
    char c = buffer_[i];
    if (!in_value_) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        consumed = i + 1;
        continue;
      }
      if (c != '{') {
        failed_ = base::Status::Error("watch stream: expected a JSON object, got byte 0x" +
                                      std::to_string(static_cast<unsigned char>(c)));
        return failed_;
      }
      in_value_ = true;
      consumed = i;
      depth_ = 1;
      continue;
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        in_value_ = false;
        base::Status s = Decode(std::string_view(buffer_).substr(consumed, i + 1 - consumed), out);
        consumed = i + 1;
        if (!s.ok()) {
          failed_ = s;
          return failed_;
        }
      }
    }
  }
  buffer_.erase(0, consumed);
  scan_ = buffer_.size();
  if (in_value_ && buffer_.size() > max_event_bytes_) {
    failed_ = base::Status::Error("watch stream: event larger than " +
                                  std::to_string(max_event_bytes_) + " bytes");
    buffer_.clear();
    buffer_.shrink_to_fit();
    return failed_;
  }
  return base::Status::OK();
}

base::Status WatchDecoder::Decode(std::string_view text, std::vector<WatchEvent>& out) {
  if (text.size() > max_event_bytes_) {
    return base::Status::Error("watch stream: event larger than " +
                               std::to_string(max_event_bytes_) + " bytes");
  }
  if (OpensAsBookmark(text)) {
    BookmarkSax sax;
    const bool parsed = nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json,
                                                  /*strict=*/true);
    if (!parsed) return base::Status::Error("watch stream: invalid JSON");
    if (!sax.unusual && sax.objects == 1 && sax.type == "BOOKMARK") {
      out.push_back(
          WatchEvent{WatchEventType::kBookmark, nullptr, std::move(sax.resource_version)});
      return base::Status::OK();
    }
    // Otherwise the full parse below judges it (and words any error as it would).
  }
  nlohmann::json event = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) return base::Status::Error("watch stream: invalid JSON");
  auto type = event.find("type");
  if (type == event.end() || !type->is_string()) {
    return base::Status::Error("watch stream: event without a type");
  }
  WatchEvent decoded;
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "ADDED") {
    decoded.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    decoded.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    decoded.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    decoded.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    decoded.type = WatchEventType::kError;
  } else {
    return base::Status::Error("watch stream: unknown event type \"" + name.substr(0, 40) + "\"");
  }
  auto object = event.find("object");
  if (object == event.end() || !object->is_object()) {
    return base::Status::Error(std::string("watch stream: ") + WatchEventTypeName(decoded.type) +
                               " event whose object is not an object");
  }
  if (decoded.type == WatchEventType::kBookmark) {
    // As the SAX pass above reads it.
    const auto meta = object->find("metadata");
    if (meta != object->end() && meta->is_object()) {
      const auto rv = meta->find("resourceVersion");
      if (rv != meta->end() && rv->is_string()) {
        decoded.resource_version = rv->get_ref<const std::string&>();
      }
    }
  } else {
    decoded.object = std::move(*object);
  }
  out.push_back(std::move(decoded));
  return base::Status::OK();
}

}  // namespace kubeclient
