// libFuzzer target for the watch stream decoder. The first bytes of the input choose an event
// size cap and where the stream is cut into chunks; the rest is the stream. Whatever the bytes:
//  * decoding never crashes, and an error says why;
//  * the chunking changes nothing: the events (types and objects) and the final error are those
//    of the same stream fed in one piece, as TCP and HTTP chunking must not matter;
//  * memory stays bounded: after a successful feed the decoder holds at most the cap (the part of
//    an incomplete event);
//  * a failed decoder stays failed, with the same error.
// Built only with -DVM_FUZZ=ON (clang).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kubeclient/watch/watch_decoder.h"

namespace {

bool SameEvents(const std::vector<kubeclient::WatchEvent>& a,
                const std::vector<kubeclient::WatchEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].type != b[i].type || a[i].object != b[i].object ||
        a[i].resource_version != b[i].resource_version) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t cap = in.ConsumeIntegralInRange<size_t>(16, 4096);
  std::vector<size_t> cuts;
  const size_t n_cuts = in.ConsumeIntegralInRange<size_t>(0, 16);
  for (size_t i = 0; i < n_cuts; ++i) cuts.push_back(in.ConsumeIntegralInRange<size_t>(0, 256));
  const std::string stream = in.ConsumeRemainingBytesAsString();

  kubeclient::WatchDecoder whole(cap);
  std::vector<kubeclient::WatchEvent> whole_events;
  const base::Status whole_status = whole.Feed(stream, whole_events);
  if (!whole_status.ok() && whole_status.message().empty()) __builtin_trap();

  kubeclient::WatchDecoder chunked(cap);
  std::vector<kubeclient::WatchEvent> chunked_events;
  base::Status chunked_status;
  size_t pos = 0;
  for (size_t k = 0; pos < stream.size(); ++k) {
    // Cut lengths cycle through the chosen ones; a zero-length feed is allowed too.
    const size_t len =
        cuts.empty() ? stream.size() : std::min(cuts[k % cuts.size()], stream.size() - pos);
    chunked_status = chunked.Feed(std::string_view(stream).substr(pos, len), chunked_events);
    if (!chunked_status.ok()) break;
    if (chunked.buffered_bytes() > cap) __builtin_trap();
    pos += len;
    if (k > stream.size() + 1024) break;  // only zero-length cuts: nothing more to learn
  }
  if (pos < stream.size() && chunked_status.ok()) {
    // Zero-length cuts only: feed the rest at once.
    chunked_status = chunked.Feed(std::string_view(stream).substr(pos), chunked_events);
  }
  if (chunked_status.ok() != whole_status.ok()) __builtin_trap();
  if (chunked_status.message() != whole_status.message()) __builtin_trap();
  if (!SameEvents(whole_events, chunked_events)) __builtin_trap();

  if (!whole_status.ok()) {
    std::vector<kubeclient::WatchEvent> more;
    base::Status again = whole.Feed("{\"type\":\"ADDED\",\"object\":{}}", more);
    if (again.ok() || again.message() != whole_status.message() || !more.empty()) __builtin_trap();
  }
  return 0;
}
