// VolumeKey: one volume of one pod (pod UID + the pod's volume name), the unit of desired state,
// actual state and operations. At most one operation runs per key at a time.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_

#include <atomic>
#include <compare>
#include <cstdint>
#include <string>
#include <utility>

namespace volumemanager {

// A pod UID held once and shared by the copies of a key. The desired state, its index by
// object, the actual state, the reconciler's records and the executor each keep a VolumeKey per
// volume; a UID (36 characters) is past std::string's inline capacity, so each of those copies
// was a heap block of its own. A copy of a PodUid shares the one string (immutable; its
// reference count is atomic, so a key may cross to the pool). Reads as a `const std::string&`.
//
// Beside the shared string, a key keeps the UID's first 8 bytes inline, ordered as the string's
// first 8 bytes are: two UIDs that differ there (random UUIDs nearly always do) compare without
// reading either string. A lookup in a map of keys then touches the tree's nodes only, not two
// more cold blocks a step; at idle, when the maps are out of the cache, that is most of a
// lookup's cost. Same size as a shared_ptr (two words).
class PodUid {
 public:
  PodUid() = default;
  // Implicit: a key is made from the pod's UID string.
  PodUid(std::string uid)  // NOLINT(google-explicit-constructor)
      : rep_(uid.empty() ? nullptr : new Rep{std::move(uid)}),
        prefix_(rep_ != nullptr ? PrefixOf(rep_->uid) : 0) {}
  PodUid(const char* uid) : PodUid(std::string(uid)) {}  // NOLINT(google-explicit-constructor)
  PodUid(const PodUid& other) noexcept : rep_(other.rep_), prefix_(other.prefix_) {
    if (rep_ != nullptr) rep_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  PodUid(PodUid&& other) noexcept
      : rep_(std::exchange(other.rep_, nullptr)), prefix_(std::exchange(other.prefix_, 0)) {}
  PodUid& operator=(const PodUid& other) noexcept {
    PodUid copy(other);
    Swap(copy);
    return *this;
  }
  PodUid& operator=(PodUid&& other) noexcept {
    PodUid moved(std::move(other));
    Swap(moved);
    return *this;
  }
  ~PodUid() {
    if (rep_ != nullptr && rep_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete rep_;
  }

  const std::string& str() const { return rep_ != nullptr ? rep_->uid : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  bool empty() const { return rep_ == nullptr; }

  bool operator==(const PodUid& other) const {
    return rep_ == other.rep_ || (prefix_ == other.prefix_ && str() == other.str());
  }
  std::strong_ordering operator<=>(const PodUid& other) const {
    if (rep_ == other.rep_) return std::strong_ordering::equal;
    if (prefix_ != other.prefix_) return prefix_ <=> other.prefix_;
    return str().compare(other.str()) <=> 0;
  }
  bool operator==(const std::string& other) const { return str() == other; }
  std::strong_ordering operator<=>(const std::string& other) const {
    return str().compare(other) <=> 0;
  }

 private:
  struct Rep {
    explicit Rep(std::string s) : uid(std::move(s)) {}
    std::string uid;
    std::atomic<uint32_t> refs{1};
  };
  static const std::string& Empty() {
    static const std::string empty;
    return empty;
  }
  // The first 8 bytes, big-endian, zero-padded: ordered as the strings' first 8 bytes are (a
  // string's bytes compare as unsigned char); equal prefixes leave the order to the strings.
  static uint64_t PrefixOf(const std::string& s) {
    uint64_t p = 0;
    for (size_t i = 0; i < 8; ++i) {
      p = (p << 8) | (i < s.size() ? static_cast<unsigned char>(s[i]) : 0U);
    }
    return p;
  }
  void Swap(PodUid& other) noexcept {
    std::swap(rep_, other.rep_);
    std::swap(prefix_, other.prefix_);
  }

  Rep* rep_ = nullptr;  // null: ""
  uint64_t prefix_ = 0;
};

struct VolumeKey {
  PodUid pod_uid;
  std::string volume_name;

  auto operator<=>(const VolumeKey&) const = default;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
