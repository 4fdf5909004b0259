#include "kubeclient/auth/token_source.h"

#include <spdlog/spdlog.h>

#include "base/durable_file.h"
#include "kubeclient/auth/credentials.h"

namespace kubeclient {

TokenSource::TokenSource(std::string fixed_token, std::string token_file,
                         std::chrono::milliseconds refresh, Clock clock)
    : token_(std::move(fixed_token)),
      file_(std::move(token_file)),
      refresh_(refresh),
      clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }) {}

const std::string& TokenSource::Token() {
  if (file_.empty()) return token_;
  auto now = clock_();
  if (read_at_ && now - *read_at_ < refresh_) return token_;
  read_at_ = now;
  // A regular file of bounded size only: a FIFO planted as the token file must not block the loop.
  base::Result<std::string> read =
      base::ReadRegularFile(file_, kMaxCredentialFileBytes, /*follow_symlinks=*/true);
  const bool readable = read.ok();
  std::string text = readable ? std::move(read).value() : std::string();
  size_t begin = text.find_first_not_of(" \t\r\n");
  size_t end = text.find_last_not_of(" \t\r\n");
  std::string fresh = begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
  if (!readable || fresh.empty()) {
    if (!failing_) {
      spdlog::warn("token file {} is missing or empty; keeping the last good token", file_);
    }
    failing_ = true;
    return token_;
  }
  if (failing_) spdlog::info("token file {} readable again", file_);
  failing_ = false;
  token_ = std::move(fresh);
  return token_;
}

void TokenSource::Invalidate() { read_at_.reset(); }

}  // namespace kubeclient
