// VolumeKey: one volume of one pod (pod UID + the pod's volume name), the unit of desired state,
// actual state and operations. At most one operation runs per key at a time.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_

#include <compare>
#include <memory>
#include <string>
#include <utility>

namespace volumemanager {

// A pod UID held once and shared by the copies of a key. The desired state, its index by
// object, the actual state, the reconciler's records and the executor each keep a VolumeKey per
// volume; a UID (36 characters) is past std::string's inline capacity, so each of those copies
// was a heap block of its own. A copy of a PodUid shares the one string (immutable; its
// reference count is atomic, so a key may cross to the pool). Reads as a `const std::string&`.
class PodUid {
 public:
  PodUid() = default;
  // Implicit: a key is made from the pod's UID string.
  PodUid(std::string uid)  // NOLINT(google-explicit-constructor)
      : uid_(uid.empty() ? nullptr : std::make_shared<const std::string>(std::move(uid))) {}
  PodUid(const char* uid) : PodUid(std::string(uid)) {}  // NOLINT(google-explicit-constructor)

  const std::string& str() const { return uid_ != nullptr ? *uid_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  bool empty() const { return str().empty(); }

  bool operator==(const PodUid& other) const { return uid_ == other.uid_ || str() == other.str(); }
  std::strong_ordering operator<=>(const PodUid& other) const {
    if (uid_ == other.uid_) return std::strong_ordering::equal;
    return str().compare(other.str()) <=> 0;
  }
  bool operator==(const std::string& other) const { return str() == other; }
  std::strong_ordering operator<=>(const std::string& other) const {
    return str().compare(other) <=> 0;
  }

 private:
  static const std::string& Empty() {
    static const std::string empty;
    return empty;
  }
  std::shared_ptr<const std::string> uid_;  // null: ""
};

struct VolumeKey {
  PodUid pod_uid;
  std::string volume_name;

  auto operator<=>(const VolumeKey&) const = default;
};

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_KEY_H_
