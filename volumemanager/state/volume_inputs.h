// VolumeInputs: what a volume's content was built from, so that the loop thread can tell that a
// remount would write the same content without building or hashing its payload: a digest over
// the revisions of the objects it reads (their refs and ContentDigests, or "absent") and the
// serials of the service account tokens it includes (a new token is a new serial: the token
// itself is never hashed), and the pod object (compared field by field on what the content and
// its ownership depend on).
//
// Plain values; the pod is an immutable snapshot shared with the desired state.
#ifndef VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_INPUTS_H_
#define VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_INPUTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "cache/object_manager.h"
#include "cache/token_manager.h"
#include "kube/object_ref.h"
#include "kube/pod.h"

namespace volumemanager {

// The objects a volume reads, each as a get returned it (a revision or an error).
using ObjectSnapshot = std::vector<std::pair<kube::ObjectRef, base::Result<cache::ObjectRevision>>>;

// The service account tokens a volume includes, each as a get returned it.
using TokenSnapshot = std::vector<std::pair<kube::TokenRef, base::Result<cache::TokenRevision>>>;

// A digest of a volume's inputs (ObjectsDigest, WithTokens): the 32 bytes of a SHA-256 held
// inline (no allocation: the actual state keeps one or two per volume), or none (unknown). Only
// compared, never shown.
using InputsDigest = base::Digest;

struct VolumeInputs {
  InputsDigest objects_digest;  // ObjectsDigest, WithTokens; empty: unknown (some get failed)
  std::shared_ptr<const kube::Pod> pod;
  // ObjectsDigest alone, before the tokens: a write whose inputs differ in their tokens only (a
  // renewal) is told apart, so that it is no change for reload actions. Empty when the volume
  // has no tokens (it equals objects_digest then; one copy per volume instead of two): read it
  // through digest_before_tokens().
  InputsDigest objects_digest_before_tokens = {};

  const InputsDigest& digest_before_tokens() const {
    return objects_digest_before_tokens.empty() ? objects_digest : objects_digest_before_tokens;
  }
};

// An object as logs and Events name the version a volume read: "configmap/ns/name@resourceVersion",
// "@absent" when it does not exist or could not be read, no version for a manifest file's object
// (which has none). Metadata only: never a digest (a Secret's would let a guess of its value be
// checked) or data.
std::string ObjectVersion(const kube::ObjectRef& ref,
                          const base::Result<cache::ObjectRevision>& revision);

// 32 bytes over the snapshot's refs and content digests, in order; empty when a get failed (an
// error is not an input the content can be compared on).
InputsDigest ObjectsDigest(const ObjectSnapshot& snapshot);

// `objects_digest` extended by the tokens' refs and serials (unchanged without tokens); empty when
// it is empty or a token get failed.
InputsDigest WithTokens(const InputsDigest& objects_digest, const TokenSnapshot& tokens);

// ObjectsDigest with the last snapshot remembered: a fan-out (1,000 volumes reading one object)
// hashes once per object revision, and every other volume only compares refs and content
// digests. Not thread-safe (the reconciler's, on the loop thread).
class ObjectsDigestMemo {
 public:
  InputsDigest Digest(const ObjectSnapshot& snapshot);

 private:
  bool Matches(const ObjectSnapshot& snapshot) const;

  struct Seen {
    kube::ObjectRef ref;
    bool exists;
    base::Digest digest;
  };
  bool valid_ = false;
  std::vector<Seen> last_;
  InputsDigest last_digest_;
};

// True when content built from `a` equals content built from `b` for the volume `volume_name`:
// equal object digests (both known) and the same volume spec and pod security context, plus, when
// the content `depends_on_pod` (downward API), the same pod metadata and containers.
bool SameInputs(const VolumeInputs& a, const VolumeInputs& b, const std::string& volume_name,
                bool depends_on_pod);

}  // namespace volumemanager

#endif  // VOLUMEMANAGER_VOLUMEMANAGER_STATE_VOLUME_INPUTS_H_
