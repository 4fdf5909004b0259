// RedactedUrl: a URL as it may appear in logs and error messages. A URL (a manifest URL, an API
// server) can carry credentials (`https://user:password@host/...`, a token as user name, or a
// signed query string), which must not reach a log: the user info becomes "xxxxx@" and a query
// string "?xxxxx". Scheme, host, port, path and fragment stay, so the message still says which URL
// failed.
#ifndef VOLUMEMANAGER_BASE_REDACTED_URL_H_
#define VOLUMEMANAGER_BASE_REDACTED_URL_H_

#include <string>
#include <string_view>

namespace base {

std::string RedactedUrl(std::string_view url);

}  // namespace base

#endif  // VOLUMEMANAGER_BASE_REDACTED_URL_H_
