// RedactedUrl: a URL as it may appear in logs and error messages. A manifest URL can carry
// credentials (`https://user:password@host/...`, a token as user name, or a signed query string),
// which must not reach a log: the user info becomes "xxxxx@" and a query string "?xxxxx". Scheme,
// host, port, path and fragment stay, so the message still says which URL failed.
#ifndef VOLUMEMANAGER_PODCONFIG_REDACTED_URL_H_
#define VOLUMEMANAGER_PODCONFIG_REDACTED_URL_H_

#include <string>
#include <string_view>

namespace podconfig {

std::string RedactedUrl(std::string_view url);

}  // namespace podconfig

#endif  // VOLUMEMANAGER_PODCONFIG_REDACTED_URL_H_
