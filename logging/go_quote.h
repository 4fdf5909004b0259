// GoQuote: a string as Go's strconv.Quote (fmt's %q) writes it, which is how the downward API
// renders label and annotation values (`key="value"`) and how klog's text format writes a log
// line's message and string values (structured_log.h): \a \b \f \n \r \t \v \\ \" escapes,
// other control bytes and invalid UTF-8 as \xNN, non-printable runes as \uNNNN / \UNNNNNNNN,
// printable runes verbatim.
//
// Printability follows Go's unicode.IsPrint for the non-printable runes that occur in practice
// (C0/C1 controls, DEL, spaces other than U+0020, line/paragraph separators, format characters,
// private use, surrogates, noncharacters); unassigned code points are treated as printable.
#ifndef VOLUMEMANAGER_LOGGING_GO_QUOTE_H_
#define VOLUMEMANAGER_LOGGING_GO_QUOTE_H_

#include <string>
#include <string_view>

namespace logging {

std::string GoQuote(std::string_view s);

}  // namespace logging

#endif  // VOLUMEMANAGER_LOGGING_GO_QUOTE_H_
