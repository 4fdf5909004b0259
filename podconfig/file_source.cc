#include "podconfig/file_source.h"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "logging/structured_log.h"
#include "manifestdir/manifest_dir_scanner.h"
#include "manifestdir/manifest_dir_watcher.h"
#include "podconfig/static_pod.h"

namespace podconfig {

struct FileSource::Impl {
  // Decoding runs on a pool thread: only the path, the bytes and the node name.
  using Scanner = kube::ManifestDirScanner<base::Result<kube::Pod>>;

  explicit Impl(FileSourceOptions o)
      : options(std::move(o)),
        scanner({options.path, /*allow_single_file=*/true},
                [node = options.node_name](const std::string& path, const std::string& bytes) {
                  return DecodeStaticPodFile(bytes, path, node);
                }) {}

  FileSourceOptions options;
  Sink sink;
  Scanner scanner;
  kube::ManifestDirWatcher watcher;
  bool missing_logged = false;
  bool delivered = false;              // the sink has the state of `pods`
  std::map<std::string, PodPtr> pods;  // by file name; null: failed to decode

  void Apply(Scanner::Outcome scan);
};

void FileSource::Impl::Apply(Scanner::Outcome scan) {
  using Listing = kube::ManifestDirScan::Listing;
  const std::string& path = options.path;
  if (scan.listing == Listing::kFailed) {
    logging::Error("Cannot list the pod manifest path; keeping its last pods",
                   {{"dir", path}, {"err", scan.error}});
    return;
  }
  if (scan.listing == Listing::kMissing) {
    if (!missing_logged) {
      logging::Warn("Pod manifest path does not exist; no static pods", {{"dir", path}});
    }
    missing_logged = true;
    pods.clear();
    delivered = false;  // delivered below, and again at each relist until the path appears
    sink({});
    return;
  }
  if (scan.listing == Listing::kListed) missing_logged = false;

  bool changed = !delivered;  // some file decoded anew or went away
  for (const std::string& name : scan.removed) changed |= pods.erase(name) > 0;
  for (Scanner::File& read : scan.files) {
    const std::string& file = read.path;
    if (!read.status.ok()) {
      logging::Error("Cannot read pod manifest; skipping it",
                     {{"file", file}, {"err", read.status}});
      changed |= pods.erase(read.name) > 0;
      continue;
    }
    if (!read.decoded) continue;  // the same bytes: the same pod
    changed = true;
    base::Result<kube::Pod>& pod = *read.decoded;
    PodPtr& entry = pods[read.name];
    if (pod.ok()) {
      // Annotated as PodConfig would, so that it passes this object on and keeps it rather than
      // a copy: the pod is held once, here and downstream.
      pod->metadata.annotations[kConfigSourceAnnotation] = kFileSource;
      entry = std::make_shared<const kube::Pod>(std::move(pod).value());
      logging::Debug("Pod manifest read", {{"file", file},
                                           {"pod", logging::KObj(entry->metadata)},
                                           {"podUID", entry->metadata.uid}});
    } else {
      entry.reset();
      logging::Error("Invalid pod manifest, skipping it", {{"file", file}, {"err", pod.status()}});
    }
  }
  // The relist usually finds nothing new: then the sink, which holds this state, is spared.
  if (!changed) return;
  std::vector<PodPtr> out;
  for (const auto& [name, pod] : pods) {
    if (pod) out.push_back(pod);
  }
  delivered = true;
  sink(std::move(out));
}

FileSource::~FileSource() { Stop(); }

base::Status FileSource::Start(uv_loop_t* loop, FileSourceOptions options, Sink sink) {
  if (impl_ != nullptr) return base::Status::Error("file source: already started");
  if (options.path.empty()) return base::Status::Error("file source: empty pod manifest path");
  if (options.node_name.empty()) return base::Status::Error("file source: empty node name");
  impl_ = std::make_shared<Impl>(std::move(options));
  Impl* impl = impl_.get();
  impl->sink = std::move(sink);
  impl->Apply(impl->scanner.ScanNow(kube::ManifestScanScope::kReadAll));
  impl->scanner.Start(loop, [weak = std::weak_ptr<Impl>(impl_)](Impl::Scanner::Outcome outcome) {
    if (std::shared_ptr<Impl> self = weak.lock()) self->Apply(std::move(outcome));
  });
  kube::ManifestDirWatcherOptions watch;
  watch.path = impl->options.path;
  watch.allow_single_file = true;
  watch.what = "pod manifest path";
  watch.relist_interval = impl->options.relist_interval;
  // One read `debounce` after the first event of a burst.
  watch.debounce = watch.max_debounce = impl->options.debounce;
  base::Status s =
      impl->watcher.Start(loop, std::move(watch),
                          [weak = std::weak_ptr<Impl>(impl_)](kube::ManifestScanScope scope,
                                                              const std::set<std::string>& named) {
                            if (std::shared_ptr<Impl> self = weak.lock()) {
                              self->scanner.Request(scope, named);
                            }
                          });
  if (!s.ok()) {
    impl_.reset();
    return s;
  }
  spdlog::info("file pod source watching {} (relist every {} ms)", impl->options.path,
               impl->options.relist_interval.count());
  return base::Status::OK();
}

void FileSource::Stop() { impl_.reset(); }

}  // namespace podconfig
