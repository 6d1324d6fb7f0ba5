#include "cairn/kvstore/s3/aws_credentials.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/s3/aws_credential_process.h"
#include "cairn/kvstore/s3/aws_instance_metadata.h"
#include "cairn/kvstore/s3/aws_shared_file.h"
#include "cairn/kvstore/s3/aws_web_identity.h"

namespace cairn::s3 {

Result<AwsCredentials> ParseAwsCredentialsFile(std::string_view text, std::string_view path,
                                               std::string_view profile, bool profile_required,
                                               std::string_view what) {
  CAIRN_ASSIGN_OR_RETURN(auto values, AwsFileProfile(text, what, path, profile));
  if (!values) {
    if (profile_required) {
      return InvalidArgumentError(std::string(what) + " " + std::string(path) + " has no profile `" +
                                  std::string(profile) + "` (AWS_PROFILE)");
    }
    return AwsCredentials{};
  }
  AwsCredentials out;
  auto take = [&](const char* name, std::string* to) {
    if (auto it = values->find(name); it != values->end()) *to = it->second;
  };
  take("aws_access_key_id", &out.access_key_id);
  take("aws_secret_access_key", &out.secret_access_key);
  take("aws_session_token", &out.session_token);
  if (out.access_key_id.empty() != out.secret_access_key.empty()) {
    return InvalidArgumentError(std::string(what) + " " + std::string(path) + ", profile `" +
                                std::string(profile) +
                                "`: aws_access_key_id and aws_secret_access_key must both be set");
  }
  out.source = std::string(path) + " [" + std::string(profile) + "]";
  return out;
}

namespace {

// One shared file's text and the values of the profile in it.
struct SharedFileProfile {
  std::string path;
  std::optional<std::string> text;  // nullopt: absent or unreadable
  std::optional<std::map<std::string, std::string>> values;  // nullopt: no such profile
};

Result<SharedFileProfile> ReadProfile(const char* env_var, std::string_view name, std::string_view what,
                                      const std::string& profile) {
  SharedFileProfile out;
  out.path = AwsSharedFilePath(env_var, name);
  if (out.path.empty()) return out;
  CAIRN_ASSIGN_OR_RETURN(out.text, ReadAwsSharedFile(out.path, what));
  if (out.text) {
    CAIRN_ASSIGN_OR_RETURN(out.values, AwsFileProfile(*out.text, what, out.path, profile));
  }
  return out;
}

std::string Value(const SharedFileProfile& f, const char* key) {
  if (!f.values) return "";
  auto it = f.values->find(key);
  return it == f.values->end() ? "" : it->second;
}

}  // namespace

Result<AwsFixedOrProcess> LoadAwsCredentials() {
  AwsFixedOrProcess out;
  std::string id = http::EnvString("AWS_ACCESS_KEY_ID");  // 1
  std::string secret = http::EnvString("AWS_SECRET_ACCESS_KEY");
  if (!id.empty() || !secret.empty()) {
    if (id.empty() || secret.empty()) {
      return InvalidArgumentError(
          "AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set (only " +
          std::string(id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") + " is)");
    }
    out.keys = AwsCredentials{id, secret, http::EnvString("AWS_SESSION_TOKEN"), "environment"};
    return out;
  }
  const bool required = !http::EnvString("AWS_PROFILE").empty();
  const std::string profile = AwsProfileName();
  CAIRN_ASSIGN_OR_RETURN(SharedFileProfile credentials,
                         ReadProfile("AWS_SHARED_CREDENTIALS_FILE", "credentials", "AWS credentials file", profile));
  CAIRN_ASSIGN_OR_RETURN(SharedFileProfile config,
                         ReadProfile("AWS_CONFIG_FILE", "config", "AWS config file", profile));
  if (required && !credentials.values && !config.values) {
    return InvalidArgumentError("AWS_PROFILE is `" + profile + "` but neither the credentials file " +
                                (credentials.path.empty() ? "(no HOME)" : credentials.path) +
                                " nor the config file " + (config.path.empty() ? "(no HOME)" : config.path) +
                                " has that profile");
  }
  if (credentials.values) {  // 2a
    CAIRN_ASSIGN_OR_RETURN(out.keys, ParseAwsCredentialsFile(*credentials.text, credentials.path, profile,
                                                             /*profile_required=*/false));
    if (!out.keys.anonymous()) return out;
  }
  for (const SharedFileProfile* f : {&credentials, &config}) {  // 2b
    if (std::string process = Value(*f, "credential_process"); !process.empty()) {
      out.process = std::move(process);
      out.process_where = f->path + " [" + profile + "]";
      return out;
    }
  }
  if (config.values) {  // 2c
    CAIRN_ASSIGN_OR_RETURN(out.keys, ParseAwsCredentialsFile(*config.text, config.path, profile,
                                                             /*profile_required=*/false, "AWS config file"));
  }
  return out;
}

Result<std::shared_ptr<AwsCredentialProvider>> AwsCredentialProviderFromEnvironment(
    bool emulator, const std::string& region) {
  // 1, 2a, 2c: read at every open (cheap, never expire).
  CAIRN_ASSIGN_OR_RETURN(AwsFixedOrProcess profile, LoadAwsCredentials());
  if (!profile.keys.anonymous()) return AwsCredentialProvider::Fixed(std::move(profile.keys));

  WebIdentityConfig web;
  web.token_file = http::EnvString("AWS_WEB_IDENTITY_TOKEN_FILE");
  web.role_arn = http::EnvString("AWS_ROLE_ARN");
  web.session_name = http::EnvString("AWS_ROLE_SESSION_NAME");
  if (!web.token_file.empty()) web.sts_endpoint = StsEndpointFromEnvironment(region);
  CAIRN_ASSIGN_OR_RETURN(std::string container, ContainerCredentialsUrlFromEnvironment());
  std::string imds = http::EnvString("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string disabled = http::EnvString("AWS_EC2_METADATA_DISABLED");
  for (char& c : disabled) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool imds_disabled = disabled == "true";

  // 3 to 5 are shared by the stores opened under the same environment.
  const std::string key = profile.process + '\0' + profile.process_where + '\0' + web.token_file + '\0' + web.role_arn + '\0' + web.session_name + '\0' +
                          web.sts_endpoint + '\0' + container + '\0' + imds + '\0' +
                          (imds_disabled ? "d" : "") + (emulator ? "e" : "");
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::shared_ptr<AwsCredentialProvider>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  CAIRN_ASSIGN_OR_RETURN(http::RetryPolicy retry, http::RetryPolicyFromEnvironment());
  std::shared_ptr<http::HttpClient> client = http::HttpClient::Default();
  std::shared_ptr<AwsCredentialProvider> found;
  if (!profile.process.empty()) {  // 2b
    found = CredentialProcessProvider(profile.process, profile.process_where);
  } else if (!web.token_file.empty()) {  // 3
    if (web.role_arn.empty()) {
      return InvalidArgumentError("AWS_WEB_IDENTITY_TOKEN_FILE is set (`" + web.token_file +
                                  "`) but AWS_ROLE_ARN is not");
    }
    found = WebIdentityProvider(std::move(web), client, retry);
  } else if (!container.empty()) {  // 4
    found = ContainerCredentialsProvider(container, client, retry);
  } else if (!imds_disabled && !imds.empty() && ProbeInstanceMetadata(imds)) {  // 5, named
    found = InstanceMetadataProvider(imds, client, retry);
  } else if (!imds_disabled && imds.empty() && !emulator && ProbeInstanceMetadata(kDefaultImdsEndpoint)) {
    found = InstanceMetadataProvider(kDefaultImdsEndpoint, client, retry);  // 5, found
  } else {
    found = AwsCredentialProvider::Fixed(AwsCredentials{});  // 6
  }
  (*cache)[key] = found;
  return found;
}

}  // namespace cairn::s3
