#include "cmd/volumemanager/api_identity.h"

#include <cstdint>
#include <string_view>

#include "kube/base64.h"

namespace volumemanager {
namespace {

constexpr std::string_view kNodeUserPrefix = "system:node:";
constexpr std::string_view kNodesGroup = "system:nodes";

// One DER element: its tag and contents. A reader over a span of DER bytes; every read checks
// its bounds, so a truncated or hostile certificate is an error, never a read past the end.
struct Der {
  uint8_t tag = 0;
  std::string_view contents;
};

class DerReader {
 public:
  explicit DerReader(std::string_view bytes) : rest_(bytes) {}
  bool empty() const { return rest_.empty(); }

  base::Result<Der> Next() {
    if (rest_.size() < 2) return base::Status::Error("truncated DER element");
    Der der;
    der.tag = static_cast<uint8_t>(rest_[0]);
    if ((der.tag & 0x1f) == 0x1f) return base::Status::Error("unexpected high-number DER tag");
    size_t length = static_cast<uint8_t>(rest_[1]);
    size_t header = 2;
    if (length & 0x80) {
      const size_t n = length & 0x7f;
      if (n == 0 || n > 4 || rest_.size() < 2 + n) {
        return base::Status::Error("bad DER length");
      }
      length = 0;
      for (size_t i = 0; i < n; ++i) length = (length << 8) | static_cast<uint8_t>(rest_[2 + i]);
      header += n;
    }
    if (rest_.size() - header < length) return base::Status::Error("truncated DER element");
    der.contents = rest_.substr(header, length);
    rest_.remove_prefix(header + length);
    return der;
  }

 private:
  std::string_view rest_;
};

constexpr uint8_t kSequence = 0x30;
constexpr uint8_t kSet = 0x31;
constexpr uint8_t kOid = 0x06;
constexpr uint8_t kVersionTag = 0xa0;  // [0] EXPLICIT, tbsCertificate's optional version
// id-at-commonName (2.5.4.3) and id-at-organizationName (2.5.4.10), DER-encoded.
constexpr std::string_view kCommonName = "\x55\x04\x03";
constexpr std::string_view kOrganization = "\x55\x04\x0a";

base::Result<Der> Expect(DerReader& reader, uint8_t tag, const char* what) {
  auto der = reader.Next();
  if (!der.ok()) return base::Status::Error(std::string(what) + ": " + der.status().message());
  if (der->tag != tag) return base::Status::Error(std::string(what) + ": unexpected DER tag");
  return der;
}

base::Result<ApiIdentity> SubjectOf(std::string_view der_bytes) {
  DerReader outer(der_bytes);
  auto cert = Expect(outer, kSequence, "certificate");
  if (!cert.ok()) return cert.status();
  DerReader cert_reader(cert->contents);
  auto tbs = Expect(cert_reader, kSequence, "tbsCertificate");
  if (!tbs.ok()) return tbs.status();
  DerReader fields(tbs->contents);
  // version (optional), serialNumber, signature, issuer, validity, then subject.
  auto first = fields.Next();
  if (!first.ok()) return base::Status::Error("tbsCertificate: " + first.status().message());
  const int skip = first->tag == kVersionTag ? 4 : 3;
  for (int i = 0; i < skip; ++i) {
    if (auto f = fields.Next(); !f.ok()) {
      return base::Status::Error("tbsCertificate: " + f.status().message());
    }
  }
  auto subject = Expect(fields, kSequence, "subject");
  if (!subject.ok()) return subject.status();
  ApiIdentity identity;
  identity.source = "client certificate";
  DerReader rdns(subject->contents);
  while (!rdns.empty()) {
    auto rdn = Expect(rdns, kSet, "subject");
    if (!rdn.ok()) return rdn.status();
    DerReader attributes(rdn->contents);
    while (!attributes.empty()) {
      auto attribute = Expect(attributes, kSequence, "subject attribute");
      if (!attribute.ok()) return attribute.status();
      DerReader parts(attribute->contents);
      auto oid = Expect(parts, kOid, "subject attribute");
      if (!oid.ok()) return oid.status();
      auto value = parts.Next();
      if (!value.ok()) return base::Status::Error("subject attribute: " + value.status().message());
      if (oid->contents == kCommonName) {
        identity.username = std::string(value->contents);
      } else if (oid->contents == kOrganization) {
        identity.groups.emplace_back(value->contents);
      }
    }
  }
  if (identity.username.empty()) return base::Status::Error("the subject has no CN");
  return identity;
}

}  // namespace

std::optional<std::string> ApiIdentity::NodeName() const {
  if (username.rfind(kNodeUserPrefix, 0) != 0) return std::nullopt;
  for (const std::string& g : groups) {
    if (g == kNodesGroup) return username.substr(kNodeUserPrefix.size());
  }
  return std::nullopt;
}

std::string ApiIdentity::ModeName() const {
  if (auto node = NodeName()) return "node \"" + *node + "\"";
  return "service account or other user";
}

std::string ApiIdentity::Describe() const {
  std::string text = username + " (groups ";
  if (groups.empty()) text += "none";
  for (size_t i = 0; i < groups.size(); ++i) text += (i ? ", " : "") + groups[i];
  return text + "; from " + source + ")";
}

base::Result<ApiIdentity> IdentityOfClientCertificate(const std::string& pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  const size_t begin = pem.find(kBegin);
  const size_t end = begin == std::string::npos ? begin : pem.find(kEnd, begin);
  if (end == std::string::npos) {
    return base::Status::Error("client certificate: no PEM CERTIFICATE block");
  }
  std::string base64;
  for (size_t i = begin + kBegin.size(); i < end; ++i) {
    const char c = pem[i];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') base64 += c;
  }
  auto der = kube::DecodeBase64(base64);
  if (!der.ok()) return base::Status::Error("client certificate: " + der.status().message());
  auto identity = SubjectOf(*der);
  if (!identity.ok()) {
    return base::Status::Error("client certificate: " + identity.status().message());
  }
  return identity;
}

namespace {
constexpr std::string_view kReviewNotServed = "the server does not serve SelfSubjectReview";
constexpr std::string_view kNoCertificate = "; the credentials hold no client certificate to read";
}  // namespace

bool IsReviewNotServed(const base::Status& lookup_error) {
  return lookup_error.code() == base::StatusCode::kUnimplemented;
}

base::Result<ApiIdentity> LookUpIdentity(BlockingApiClient& client,
                                         const kubeclient::Credentials& credentials,
                                         std::optional<kubeclient::ApiError>* review_failure) {
  std::string why;
  bool not_served = false;
  if (!client.error().empty()) {
    why = client.error();
    if (review_failure != nullptr) *review_failure = kubeclient::TransportError(why);
  } else {
    const nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"},
                                   {"kind", "SelfSubjectReview"}};
    kubeclient::ApiResult answer =
        client.Call([&](kubeclient::ApiClient& api, kubeclient::ApiCallback cb) {
          api.Create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review, cb);
        });
    if (review_failure != nullptr) *review_failure = answer.error;
    if (answer.ok()) {
      const nlohmann::json& info = answer.object.is_object()
                                       ? answer.object.value("status", nlohmann::json::object())
                                             .value("userInfo", nlohmann::json::object())
                                       : nlohmann::json::object();
      ApiIdentity identity;
      identity.source = "SelfSubjectReview";
      if (info.contains("username") && info["username"].is_string()) {
        identity.username = info["username"].get<std::string>();
      }
      if (info.contains("groups") && info["groups"].is_array()) {
        for (const auto& g : info["groups"]) {
          if (g.is_string()) identity.groups.push_back(g.get<std::string>());
        }
      }
      if (!identity.username.empty()) return identity;
      why = "SelfSubjectReview answered without a username";
    } else if (answer.error->IsNotFound() || answer.error->IsForbidden()) {
      why = std::string(kReviewNotServed) + " (" + answer.error->ToString() + ")";
      not_served = true;
    } else {
      why = "SelfSubjectReview: " + answer.error->ToString();
    }
  }
  if (credentials.tls.client_cert_pem.empty()) {
    // Not served and nothing else to read: kUnimplemented (IsReviewNotServed).
    return base::Status::Error(
        not_served ? base::StatusCode::kUnimplemented : base::StatusCode::kUnknown,
        why + std::string(kNoCertificate));
  }
  auto identity = IdentityOfClientCertificate(credentials.tls.client_cert_pem);
  if (!identity.ok()) return base::Status::Error(why + "; " + identity.status().message());
  identity->source = "client certificate (" + why + ")";
  return identity;
}

}  // namespace volumemanager
