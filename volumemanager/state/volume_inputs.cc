#include "volumemanager/state/volume_inputs.h"

#include "base/sha256.h"

namespace volumemanager {

InputsDigest ObjectsDigest(const ObjectSnapshot& snapshot) {
  base::Sha256 h;
  h.AddNumber(snapshot.size());
  for (const auto& [ref, revision] : snapshot) {
    if (!revision.ok()) return {};
    h.AddNumber(static_cast<uint64_t>(ref.kind)).AddField(ref.namespace_).AddField(ref.name);
    h.AddNumber(revision->exists() ? 1 : 0).AddField(revision->digest.bytes());
  }
  return InputsDigest(h.Finish());
}

InputsDigest WithTokens(const InputsDigest& objects_digest, const TokenSnapshot& tokens) {
  if (tokens.empty() || objects_digest.empty()) return objects_digest;
  base::Sha256 h;
  h.AddField(objects_digest.bytes()).AddNumber(tokens.size());
  for (const auto& [ref, revision] : tokens) {
    if (!revision.ok()) return {};
    h.AddField(ref.namespace_).AddField(ref.service_account).AddField(ref.audience);
    h.AddNumber(static_cast<uint64_t>(ref.expiration_seconds)).AddField(ref.pod_uid);
    h.AddNumber(revision->serial);
  }
  return InputsDigest(h.Finish());
}

InputsDigest ObjectsDigestMemo::Digest(const ObjectSnapshot& snapshot) {
  if (valid_ && Matches(snapshot)) return last_digest_;
  last_digest_ = ObjectsDigest(snapshot);
  // A snapshot with a failed get has no digest to remember.
  valid_ = !last_digest_.empty();
  last_.clear();
  if (valid_) {
    for (const auto& [ref, revision] : snapshot) {
      last_.push_back({ref, revision->exists(), revision->digest});
    }
  }
  return last_digest_;
}

bool ObjectsDigestMemo::Matches(const ObjectSnapshot& snapshot) const {
  if (snapshot.size() != last_.size()) return false;
  for (size_t i = 0; i < snapshot.size(); ++i) {
    const auto& [ref, revision] = snapshot[i];
    if (!revision.ok() || !(ref == last_[i].ref) || revision->exists() != last_[i].exists ||
        revision->digest != last_[i].digest) {
      return false;
    }
  }
  return true;
}

bool SameInputs(const VolumeInputs& a, const VolumeInputs& b, const std::string& volume_name,
                bool depends_on_pod) {
  if (a.objects_digest.empty() || a.objects_digest != b.objects_digest) return false;
  if (a.pod == nullptr || b.pod == nullptr) return false;
  if (a.pod == b.pod) return true;
  const kube::Pod& x = *a.pod;
  const kube::Pod& y = *b.pod;
  const kube::Volume* vx = x.FindVolume(volume_name);
  const kube::Volume* vy = y.FindVolume(volume_name);
  if (vx == nullptr || vy == nullptr || !(*vx == *vy)) return false;
  if (x.spec.security_context != y.spec.security_context) return false;
  if (!depends_on_pod) return true;
  // The fields a downwardAPI item can name (metadata.*, and the containers' resources); not
  // resourceVersion, which every status update changes.
  const kube::ObjectMeta& mx = x.metadata;
  const kube::ObjectMeta& my = y.metadata;
  return mx.name == my.name && mx.namespace_ == my.namespace_ && mx.uid == my.uid &&
         mx.labels == my.labels && mx.annotations == my.annotations &&
         x.spec.containers == y.spec.containers && x.spec.init_containers == y.spec.init_containers;
}

std::string ObjectVersion(const kube::ObjectRef& ref,
                          const base::Result<cache::ObjectRevision>& revision) {
  std::string text =
      std::string(kube::ObjectKindName(ref.kind)) + '/' + ref.namespace_ + '/' + ref.name;
  if (!revision.ok() || !revision->exists()) return text + "@absent";
  const std::string& rv = revision->config_map ? revision->config_map->metadata.resource_version
                                               : revision->secret->metadata.resource_version;
  return rv.empty() ? text : text + '@' + rv;
}

}  // namespace volumemanager
