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
  std::map<std::string, PodPtr> pods;  // by file name; null: never decoded to a valid pod
  // By file name: the read error last logged, so that a file that stays unreadable is reported
  // once, not at every relist.
  std::map<std::string, std::string> read_errors;

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

  bool changed = !delivered;  // the pods to deliver differ from what the sink has
  for (const std::string& name : scan.removed) {
    read_errors.erase(name);
    changed |= pods.erase(name) > 0;
  }
  for (Scanner::File& read : scan.files) {
    const std::string& file = read.path;
    PodPtr& entry = pods[read.name];
    // A file that is there but cannot be read or decoded is most likely being edited (an editor's
    // half-saved or truncated file) or broken by mistake: its pod keeps its last good version, so
    // that the volumes already published stay (docs/design.md, "Keep what works"). Only a file
    // that goes away, or that decodes to a valid pod, changes what this file contributes.
    if (!read.status.ok()) {
      std::string& logged = read_errors[read.name];
      if (logged != read.status.message()) {
        logged = read.status.message();
        if (entry) {
          logging::Error(
              "Cannot read pod manifest; keeping its last good pod until the file is "
              "readable again or removed",
              {{"file", file},
               {"pod", logging::KObj(entry->metadata)},
               {"podUID", entry->metadata.uid},
               {"err", read.status}});
        } else {
          logging::Error("Cannot read pod manifest; skipping it",
                         {{"file", file}, {"err", read.status}});
        }
      }
      continue;
    }
    read_errors.erase(read.name);
    if (!read.decoded) continue;  // the same bytes: the same pod
    base::Result<kube::Pod>& pod = *read.decoded;
    if (pod.ok()) {
      // Annotated as PodConfig would, so that it passes this object on and keeps it rather than
      // a copy: the pod is held once, here and downstream.
      pod->metadata.annotations[kConfigSourceAnnotation] = kFileSource;
      entry = std::make_shared<const kube::Pod>(std::move(pod).value());
      changed = true;
      logging::Debug("Pod manifest read", {{"file", file},
                                           {"pod", logging::KObj(entry->metadata)},
                                           {"podUID", entry->metadata.uid}});
    } else if (entry) {
      // Decoded once per content: logged once per content.
      logging::Error(
          "Invalid pod manifest; keeping its last good pod until the file is fixed or removed",
          {{"file", file},
           {"pod", logging::KObj(entry->metadata)},
           {"podUID", entry->metadata.uid},
           {"err", pod.status()}});
    } else {
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
