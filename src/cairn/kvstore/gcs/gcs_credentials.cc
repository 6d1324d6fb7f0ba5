#include "cairn/kvstore/gcs/gcs_credentials.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "cairn/kvstore/gcs/gcs_jwt.h"
#include "cairn/kvstore/http/environment.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpClient;
using http::HttpResponse;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kDefaultTokenUri[] = "https://oauth2.googleapis.com/token";
constexpr char kMetadataTokenPath[] = "/computeMetadata/v1/instance/service-accounts/default/token";
constexpr uint64_t kMaxCredentialsFile = 1 << 20;

// A string field of `j`, or InvalidArgument naming the field and the file.
Result<std::string> Field(const nlohmann::json& j, const char* name, const std::string& path,
                          bool required = true) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
    if (!required && it == j.end()) return std::string();
    return InvalidArgumentError("GCS credentials file `" + path + "`: `" + name +
                                "` is missing or not a non-empty string");
  }
  return it->get<std::string>();
}

// POSTs a form (or GETs, for the metadata server) and reads the token out of
// the JSON answer: {"access_token": ..., "expires_in": seconds}.
class TokenEndpoint {
 public:
  TokenEndpoint(std::shared_ptr<HttpClient> http, http::RetryPolicy retry)
      : http_(std::move(http)), retry_(retry) {}

  Result<std::pair<std::string, std::chrono::seconds>> Request(std::string method, std::string url,
                                                               std::string form,
                                                               std::vector<std::string> headers,
                                                               std::string operation) const {
    HttpCall call;
    call.request.method = std::move(method);
    call.request.url = std::move(url);
    call.request.headers = std::move(headers);
    auto body = std::make_shared<std::string>(std::move(form));
    call.request.body = AsBytes(*body);
    call.keep_alive = body;
    call.operation = std::move(operation);
    call.retry = retry_;
    call.max_response_bytes = 1 << 20;
    CAIRN_ASSIGN_OR_RETURN(HttpResponse r, http_->Execute(call));
    if (r.status != 200) {
      // Refused (400 invalid_grant, 401, ...): the credentials are at fault.
      // Transient statuses came back as Unavailable after the retry budget.
      return FailedPreconditionError(std::string(http::HttpStatusError(call, r).message()));
    }
    auto j = nlohmann::json::parse(r.body.as_string_view(), nullptr, /*allow_exceptions=*/false);
    std::string where = call.operation + " (" + call.request.method + " " + call.request.url + ")";
    if (!j.is_object() || !j.contains("access_token") || !j["access_token"].is_string() ||
        j["access_token"].get<std::string>().empty()) {
      return FailedPreconditionError(where + ": the answer has no `access_token`");
    }
    std::string token = j["access_token"].get<std::string>();
    for (char c : token) {
      if (c < 33 || c > 126) {
        return FailedPreconditionError(where + ": the `access_token` has unprintable characters");
      }
    }
    int64_t lifetime = 3600;
    if (j.contains("expires_in")) {
      if (!j["expires_in"].is_number_integer() || j["expires_in"].get<int64_t>() <= 0) {
        return FailedPreconditionError(where + ": `expires_in` is not a positive integer");
      }
      lifetime = std::min<int64_t>(j["expires_in"].get<int64_t>(), 7 * 24 * 3600);
    }
    return std::make_pair(std::move(token), std::chrono::seconds(lifetime));
  }

 private:
  std::shared_ptr<HttpClient> http_;
  http::RetryPolicy retry_;
};

class Anonymous : public GcsCredentials {
 public:
  Anonymous() : GcsCredentials("anonymous access") {}
  Result<Token> Fetch() override { return Token{"", std::chrono::hours(24 * 365)}; }
};

class FixedToken : public GcsCredentials {
 public:
  FixedToken(std::string token, std::string description)
      : GcsCredentials(std::move(description)), token_(std::move(token)) {}
  Result<Token> Fetch() override { return Token{token_, std::chrono::hours(24 * 365)}; }

 private:
  std::string token_;
};

class ServiceAccount : public GcsCredentials {
 public:
  ServiceAccount(ServiceAccountKey key, std::string path, TokenEndpoint endpoint)
      : GcsCredentials("service account `" + key.client_email + "` from credentials file `" + path +
                       "`"),
        key_(std::move(key)),
        path_(std::move(path)),
        endpoint_(std::move(endpoint)) {}

  Result<Token> Fetch() override {
    int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    std::string where = "credentials file `" + path_ + "`";
    CAIRN_ASSIGN_OR_RETURN(std::string jwt, SignServiceAccountJwt(key_, kGcsScope, now, where));
    CAIRN_ASSIGN_OR_RETURN(
        auto token,
        endpoint_.Request("POST", key_.token_uri,
                          http::FormEncode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                                      {"assertion", jwt}}),
                          {"content-type: application/x-www-form-urlencoded"},
                          "fetching a GCS access token for " + description()));
    return Token{std::move(token.first), token.second};
  }

 private:
  ServiceAccountKey key_;
  std::string path_;
  TokenEndpoint endpoint_;
};

class AuthorizedUser : public GcsCredentials {
 public:
  AuthorizedUser(std::string client_id, std::string client_secret, std::string refresh_token,
                 std::string token_uri, std::string path, TokenEndpoint endpoint)
      : GcsCredentials("authorized user (client `" + client_id + "`) from credentials file `" + path +
                       "`"),
        client_id_(std::move(client_id)),
        client_secret_(std::move(client_secret)),
        refresh_token_(std::move(refresh_token)),
        token_uri_(std::move(token_uri)),
        endpoint_(std::move(endpoint)) {}

  Result<Token> Fetch() override {
    CAIRN_ASSIGN_OR_RETURN(
        auto token, endpoint_.Request("POST", token_uri_,
                                      http::FormEncode({{"grant_type", "refresh_token"},
                                                  {"client_id", client_id_},
                                                  {"client_secret", client_secret_},
                                                  {"refresh_token", refresh_token_}}),
                                      {"content-type: application/x-www-form-urlencoded"},
                                      "fetching a GCS access token for " + description()));
    return Token{std::move(token.first), token.second};
  }

 private:
  std::string client_id_, client_secret_, refresh_token_, token_uri_;
  TokenEndpoint endpoint_;
};

class MetadataServer : public GcsCredentials {
 public:
  MetadataServer(std::string root, TokenEndpoint endpoint)
      : GcsCredentials("the GCE metadata server at " + root),
        url_(root + kMetadataTokenPath),
        endpoint_(std::move(endpoint)) {}

  Result<Token> Fetch() override {
    CAIRN_ASSIGN_OR_RETURN(auto token,
                           endpoint_.Request("GET", url_, "", {"metadata-flavor: Google"},
                                             "fetching a GCS access token from " + description()));
    return Token{std::move(token.first), token.second};
  }

 private:
  std::string url_;
  TokenEndpoint endpoint_;
};

std::string MetadataRoot(std::string host) {
  while (!host.empty() && host.back() == '/') host.pop_back();
  return host.find("://") == std::string::npos ? "http://" + host : host;
}

// Whether the metadata server at `root` answers: an HTTP response (not a
// refused or silent connection, nor a 5xx) within a second, one attempt;
// with `require_flavor`, one carrying `Metadata-Flavor: Google` (how
// metadata.google.internal is told from a resolver's catch-all host).
// Callers cache the answer (GcsCredentialsFromEnvironment, per environment).
bool ProbeMetadataServer(const std::string& root, bool require_flavor) {
  http::HttpClientOptions o;
  o.max_in_flight = 1;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.attempt_timeout = std::chrono::milliseconds(1000);
  HttpClient probe(o);
  HttpCall call;
  call.request.url = root + "/";
  call.request.headers = {"metadata-flavor: Google"};
  call.operation = "probing for the GCE metadata server";
  call.retry.max_attempts = 1;
  call.max_response_bytes = 1 << 16;
  Result<HttpResponse> r = probe.Execute(std::move(call));
  if (!r.ok()) return false;
  return !require_flavor || r->Header("metadata-flavor").value_or("") == "Google";
}

bool FileExists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

}  // namespace

Result<std::string> GcsCredentials::AuthorizationHeader() {
  std::lock_guard<std::mutex> lock(mu_);
  if (have_ && Clock::now() < refresh_at_) return header_;
  CAIRN_ASSIGN_OR_RETURN(Token token, Fetch());
  ++fetches_;
  header_ = token.value.empty() ? std::string() : "authorization: Bearer " + token.value;
  auto margin = std::min<std::chrono::seconds>(std::chrono::minutes(5), token.lifetime / 2);
  refresh_at_ = Clock::now() + token.lifetime - margin;
  have_ = true;
  return header_;
}

uint64_t GcsCredentials::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

std::shared_ptr<GcsCredentials> AnonymousGcsCredentials() { return std::make_shared<Anonymous>(); }

std::shared_ptr<GcsCredentials> FixedTokenGcsCredentials(std::string token, std::string description) {
  return std::make_shared<FixedToken>(std::move(token), std::move(description));
}

Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromJson(std::string_view json, std::string path,
                                                               std::shared_ptr<HttpClient> http,
                                                               http::RetryPolicy retry) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return InvalidArgumentError("GCS credentials file `" + path + "` is not a JSON object");
  }
  CAIRN_ASSIGN_OR_RETURN(std::string type, Field(j, "type", path));
  TokenEndpoint endpoint(std::move(http), retry);
  if (type == "service_account") {
    ServiceAccountKey key;
    CAIRN_ASSIGN_OR_RETURN(key.client_email, Field(j, "client_email", path));
    CAIRN_ASSIGN_OR_RETURN(key.private_key, Field(j, "private_key", path));
    CAIRN_ASSIGN_OR_RETURN(key.private_key_id, Field(j, "private_key_id", path, false));
    CAIRN_ASSIGN_OR_RETURN(key.token_uri, Field(j, "token_uri", path, false));
    if (key.token_uri.empty()) key.token_uri = kDefaultTokenUri;
    if (key.private_key.find("-----BEGIN") == std::string::npos) {
      return InvalidArgumentError("GCS credentials file `" + path +
                                  "`: `private_key` is not a PEM key (no -----BEGIN line)");
    }
    return std::shared_ptr<GcsCredentials>(
        std::make_shared<ServiceAccount>(std::move(key), std::move(path), std::move(endpoint)));
  }
  if (type == "authorized_user") {
    CAIRN_ASSIGN_OR_RETURN(std::string id, Field(j, "client_id", path));
    CAIRN_ASSIGN_OR_RETURN(std::string secret, Field(j, "client_secret", path));
    CAIRN_ASSIGN_OR_RETURN(std::string refresh, Field(j, "refresh_token", path));
    CAIRN_ASSIGN_OR_RETURN(std::string uri, Field(j, "token_uri", path, false));
    if (uri.empty()) uri = kDefaultTokenUri;
    return std::shared_ptr<GcsCredentials>(std::make_shared<AuthorizedUser>(
        std::move(id), std::move(secret), std::move(refresh), std::move(uri), std::move(path),
        std::move(endpoint)));
  }
  return InvalidArgumentError("GCS credentials file `" + path + "`: unsupported type `" +
                              type.substr(0, 100) +
                              "` (cairn reads service_account and authorized_user)");
}

Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromFile(const std::string& path,
                                                               std::shared_ptr<HttpClient> http,
                                                               http::RetryPolicy retry) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return NotFoundError("GCS credentials file `" + path + "` cannot be opened: " +
                         std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() <= kMaxCredentialsFile) {
    text.append(buf, n);
  }
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return UnavailableError("GCS credentials file `" + path + "`: read error");
  if (text.size() > kMaxCredentialsFile) {
    return InvalidArgumentError("GCS credentials file `" + path + "` is larger than 1 MiB");
  }
  return GcsCredentialsFromJson(text, path, std::move(http), retry);
}

std::shared_ptr<GcsCredentials> MetadataServerCredentials(std::string root,
                                                          std::shared_ptr<HttpClient> http,
                                                          http::RetryPolicy retry) {
  return std::make_shared<MetadataServer>(MetadataRoot(std::move(root)),
                                          TokenEndpoint(std::move(http), retry));
}

Result<std::shared_ptr<GcsCredentials>> GcsCredentialsFromEnvironment(bool emulator) {
  const std::string testing_token = http::EnvString("GOOGLE_AUTH_TOKEN_FOR_TESTING");
  const std::string file = http::EnvString("GOOGLE_APPLICATION_CREDENTIALS");
  std::string metadata = http::EnvString("GCE_METADATA_HOST");
  if (metadata.empty()) metadata = http::EnvString("GCE_METADATA_ROOT");
  std::string gcloud_dir = http::EnvString("CLOUDSDK_CONFIG");
  if (gcloud_dir.empty() && !http::EnvString("HOME").empty()) {
    gcloud_dir = http::EnvString("HOME") + "/.config/gcloud";
  }
  const std::string key = testing_token + '\0' + file + '\0' + metadata + '\0' + gcloud_dir + '\0' +
                          (emulator ? "e" : "");
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_ptr<GcsCredentials>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  CAIRN_ASSIGN_OR_RETURN(http::RetryPolicy retry, http::RetryPolicyFromEnvironment());
  std::shared_ptr<HttpClient> client = HttpClient::Default();
  std::shared_ptr<GcsCredentials> found;
  if (!testing_token.empty()) {
    found = FixedTokenGcsCredentials(testing_token, "GOOGLE_AUTH_TOKEN_FOR_TESTING");
  } else if (!file.empty()) {
    Result<std::shared_ptr<GcsCredentials>> c = GcsCredentialsFromFile(file, client, retry);
    if (!c.ok()) return c.status().Annotate("GOOGLE_APPLICATION_CREDENTIALS");
    found = *c;
  } else if (std::string adc = gcloud_dir + "/application_default_credentials.json";
             !emulator && !gcloud_dir.empty() && FileExists(adc)) {
    CAIRN_ASSIGN_OR_RETURN(found, GcsCredentialsFromFile(adc, client, retry));
  } else if (!metadata.empty()) {
    // As TensorStore, google-auth and gcsfs: a named metadata server that
    // does not answer is no source; the next one (anonymous) is used.
    if (ProbeMetadataServer(MetadataRoot(metadata), /*require_flavor=*/false)) {
      found = MetadataServerCredentials(metadata, client, retry);
    } else {
      found = AnonymousGcsCredentials();
    }
  } else if (!emulator && ProbeMetadataServer("http://metadata.google.internal", /*require_flavor=*/true)) {
    found = MetadataServerCredentials("metadata.google.internal", client, retry);
  } else {
    found = AnonymousGcsCredentials();
  }
  (*cache)[key] = found;
  return found;
}

Status AddGcsAuthorization(GcsCredentials* credentials, HttpCall& call) {
  if (credentials == nullptr) return Status::OK();
  Result<std::string> header = credentials->AuthorizationHeader();
  if (!header.ok()) return header.status().Annotate(call.operation);
  if (!header->empty()) call.request.headers.push_back(std::move(*header));
  return Status::OK();
}

}  // namespace cairn::gcs
