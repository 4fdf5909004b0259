// TokenSource: the bearer token to send, following a rotating token file the way client-go does
// (docs/kubernetes-api.md §5.1).
//
// A token file is re-read once the copy in hand is older than the refresh period (50 s: client-go's
// 60 s minus 10 s of leeway) or after Invalidate() (a 401 means the server no longer accepts it).
// Whitespace is trimmed. A failed or empty read keeps the last good token and is logged once per
// failure streak, naming the file, never the token. With no file the fixed token is returned.
// Single-threaded: use it from the loop thread.
#ifndef VOLUMEMANAGER_KUBECLIENT_AUTH_TOKEN_SOURCE_H_
#define VOLUMEMANAGER_KUBECLIENT_AUTH_TOKEN_SOURCE_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace kubeclient {

class TokenSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  TokenSource(std::string fixed_token, std::string token_file,
              std::chrono::milliseconds refresh = std::chrono::seconds(50), Clock clock = nullptr);

  // The token to send now; empty when there is none.
  const std::string& Token();
  // Forget the cached copy's age: the next Token() re-reads the file.
  void Invalidate();
  bool HasFile() const { return !file_.empty(); }
  // Replaces the fixed token (an exec plugin's, which the HTTP client sets as it changes).
  void SetToken(std::string token) { token_ = std::move(token); }

 private:
  std::string token_;
  std::string file_;
  std::chrono::milliseconds refresh_;
  Clock clock_;
  std::optional<std::chrono::steady_clock::time_point> read_at_;
  bool failing_ = false;
};

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_AUTH_TOKEN_SOURCE_H_
