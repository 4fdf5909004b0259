#include "base/redacted_url.h"

namespace base {

std::string RedactedUrl(std::string_view url) {
  std::string out;
  const size_t scheme_end = url.find("://");
  size_t authority = 0;
  if (scheme_end != std::string_view::npos) {
    authority = scheme_end + 3;
    out.append(url.substr(0, authority));
  }
  // The authority ends at the first '/', '?' or '#'.
  size_t authority_end = url.find_first_of("/?#", authority);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  std::string_view host = url.substr(authority, authority_end - authority);
  const size_t at = host.rfind('@');
  if (at != std::string_view::npos) {
    // A user name alone can be a token (https://<token>@host): hide all of it.
    out.append("xxxxx@");
    host = host.substr(at + 1);
  }
  out.append(host);
  std::string_view rest = url.substr(authority_end);
  const size_t query = rest.find('?');
  const size_t fragment = rest.find('#');
  if (query != std::string_view::npos && (fragment == std::string_view::npos || query < fragment)) {
    out.append(rest.substr(0, query));
    out.append("?xxxxx");
    if (fragment != std::string_view::npos) out.append(rest.substr(fragment));
  } else {
    out.append(rest);
  }
  return out;
}

}  // namespace base
