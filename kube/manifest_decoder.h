// ManifestDecoder: turns one manifest file (JSON, or a YAML stream of one or more documents) into
// Pods, ConfigMaps and Secrets, doing on read what the API server would do on write: the
// defaulting of defaults.h and the validation of validation.h. This is standalone mode's stand-in
// for the API server; objects that came from an API server go through object_decoder.h only.
//
// Accepted documents: kind Pod, ConfigMap, Secret, their List kinds, and v1 "List" whose items
// carry their own kind. Anything else fails the file: a manifest directory holds what it should.
// A file whose first non-blank character is '{' is one JSON value (use a List for several, as the
// kubelet's static-pod reader expects); anything else is a YAML stream, one object per document.
//
// Errors name the source, the document (in a multi-document stream), the object and the field:
//   /etc/vm/pods/web.yaml: document 2: pods/web-0: spec.volumes[2].configMap.items[0].mode:
//   expected integer
// and never quote a value from the input (the input may be a Secret).
//
// Thread-safe: pure function of its input.
#ifndef VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_
#define VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "kube/config_map.h"
#include "kube/pod.h"
#include "kube/secret.h"
#include "kube/yaml_to_json.h"

namespace kube {

using ManifestObject = std::variant<Pod, ConfigMap, Secret>;

// "Pod", "ConfigMap" or "Secret".
const char* KindOf(const ManifestObject& object);
const ObjectMeta& MetadataOf(const ManifestObject& object);

// `source` names the input in errors (a file path, "stdin", ...). `cost`, when given, receives
// what a YAML stream cost against yaml_to_json.h's limits (nothing for JSON), on success.
base::Result<std::vector<ManifestObject>> DecodeManifest(std::string_view bytes,
                                                         std::string_view source,
                                                         YamlCost* cost = nullptr);

// A YAML manifest cut into its documents, so that a reader can decode again only the documents
// an edit changed. The cuts are where YAML itself starts a document whatever comes before: before
// each line (but the first) that starts with "---" followed by a space, a tab, a line break or the
// end of the input (a scalar cannot run past such a line: a quoted one fails there, any other
// ends). The pieces cover the input in order, every one after the first starts with "---" (so
// none reads as JSON), and a piece may hold no document (comments only) or several (after a
// "..." line). When every piece decodes with DecodeManifestPiece, the objects are the whole's, in
// order, and the costs add up to the whole's; when a piece fails, only the whole's decode says
// what is wrong (and where, in the file's lines). Empty (not cut) for JSON and for a stream with a
// directive (a line starting with '%', which belongs to the document after it).
std::vector<std::string_view> SplitManifestDocuments(std::string_view bytes);

// Decodes one piece of SplitManifestDocuments as the whole stream reads it: a piece that another
// `followed` is read up to that one's marker line, so that what the marker ends in the stream
// ends there too (a quoted scalar left open fails, where alone the end of the input would close
// it). `cost` as DecodeManifest's, the piece's share of the stream's.
base::Result<std::vector<ManifestObject>> DecodeManifestPiece(std::string_view piece, bool followed,
                                                              std::string_view source,
                                                              YamlCost* cost);

// A piece of SplitManifestDocuments without its marker line when that line is a bare "---" and
// the document's content starts on the next line (not a blank line, a comment, "..." or '{',
// which alone would read as JSON): the piece then decodes as what is left does, objects and cost,
// so a document that became the first of the stream (or stopped being it) is still the same text
// to a reader that compares documents by their text.
std::string_view WithoutBareMarker(std::string_view piece);

}  // namespace kube

#endif  // VOLUMEMANAGER_KUBE_MANIFEST_DECODER_H_
