#include "kubeclient/watch/watch_decoder.h"

namespace kubeclient {

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
  decoded.object = std::move(*object);
  out.push_back(std::move(decoded));
  return base::Status::OK();
}

}  // namespace kubeclient
