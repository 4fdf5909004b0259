// WatchDecoder: turns the bytes of a watch response into WatchEvents, whatever the chunk or frame
// boundaries (docs/kubernetes-api.md §4.1).
//
// Bytes are accumulated and complete top-level JSON objects extracted (whitespace between them is
// skipped; the newline is not needed). An event is an object with `type` in ADDED, MODIFIED,
// DELETED, BOOKMARK, ERROR and an object `object`. Anything else (invalid JSON, an unknown type,
// a non-object `object`, a top-level value that is not an object) or an event larger than
// `max_event_bytes` (client-go: 16 MiB) is a decode error: Feed returns it and the decoder is
// spent. Memory stays bounded by the cap plus one feed. Single-threaded value type.
//
// A BOOKMARK event's `object` is cut to `metadata.resourceVersion` (when it has one, a string):
// the rest of a bookmark is no use to a reader, and building its document was most of the cost of
// an idle watch. An unusual bookmark (a repeated key, or a value of another type on that path) is
// parsed in full; errors are worded as the full parse words them.
#ifndef VOLUMEMANAGER_KUBECLIENT_WATCH_WATCH_DECODER_H_
#define VOLUMEMANAGER_KUBECLIENT_WATCH_WATCH_DECODER_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kubeclient {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

const char* WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type;
  // Null for a BOOKMARK, whose one field of use is in `resource_version`.
  nlohmann::json object;
  // A BOOKMARK's object.metadata.resourceVersion ("" when it has none, or one that is not a
  // string); empty for the other types.
  std::string resource_version;
};

class WatchDecoder {
 public:
  static constexpr size_t kDefaultMaxEventBytes = 16u << 20;
  explicit WatchDecoder(size_t max_event_bytes = kDefaultMaxEventBytes);

  // Appends `data` and moves every complete event into `out`, in order. Events completed before
  // an error in the same call are still delivered.
  base::Status Feed(std::string_view data, std::vector<WatchEvent>& out);
  // Bytes held for an incomplete event.
  size_t buffered_bytes() const { return buffer_.size(); }

 private:
  base::Status Decode(std::string_view text, std::vector<WatchEvent>& out);

  size_t max_event_bytes_;
  std::string buffer_;
  size_t scan_ = 0;        // next byte of buffer_ to scan
  bool in_value_ = false;  // a value starts at buffer_[0]
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  base::Status failed_;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_WATCH_WATCH_DECODER_H_
