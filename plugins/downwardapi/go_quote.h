// GoQuote for the downward API's label and annotation files: Go's strconv.Quote, which lives in
// logging/go_quote.h because klog's text format quotes log values the same way. This name is
// the downward API's view of it.
#ifndef VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_GO_QUOTE_H_
#define VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_GO_QUOTE_H_

#include "logging/go_quote.h"

namespace plugins {

using logging::GoQuote;

}  // namespace plugins

#endif  // VOLUMEMANAGER_PLUGINS_DOWNWARDAPI_GO_QUOTE_H_
