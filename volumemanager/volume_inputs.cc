#include "volumemanager/volume_inputs.h"

#include "base/sha256.h"

namespace volumemanager {

std::string ObjectsDigest(const ObjectSnapshot& snapshot) {
  base::Sha256 h;
  h.AddNumber(snapshot.size());
  for (const auto& [ref, revision] : snapshot) {
    if (!revision.ok()) return "";
    h.AddNumber(static_cast<uint64_t>(ref.kind)).AddField(ref.namespace_).AddField(ref.name);
    h.AddNumber(revision->exists() ? 1 : 0).AddField(revision->digest);
  }
  return h.Finish();
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

}  // namespace volumemanager
