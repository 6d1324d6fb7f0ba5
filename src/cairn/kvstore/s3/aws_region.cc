#include "cairn/kvstore/s3/aws_region.h"

#include <map>
#include <mutex>

#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/s3/aws_shared_file.h"

namespace cairn::s3 {
namespace {

// A region goes into host names and the signature's scope: letters, digits
// and '-' only ("us-east-1", "eu-central-2", "auto" for R2).
Result<std::string> CheckRegion(std::string region, const std::string& source) {
  bool ok = !region.empty() && region.size() <= 64;
  for (char c : region) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (ok) return region;
  return InvalidArgumentError(source + ": region `" + region.substr(0, 80) +
                              "` is not a region name (a-z, 0-9 and '-')");
}

}  // namespace

Result<std::string> ConfiguredAwsRegion() {
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {  // 1
    std::string region = http::EnvString(name);
    if (!region.empty()) return CheckRegion(std::move(region), name);
  }
  const std::string path = AwsSharedFilePath("AWS_CONFIG_FILE", "config");  // 2
  if (path.empty()) return std::string();
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadAwsSharedFile(path, "AWS config file"));
  if (!text) return std::string();
  CAIRN_ASSIGN_OR_RETURN(auto values, AwsFileProfile(*text, "AWS config file", path, AwsProfileName()));
  if (!values) return std::string();
  auto it = values->find("region");
  if (it == values->end()) return std::string();
  return CheckRegion(it->second, "AWS config file " + path + " [" + AwsProfileName() + "]");
}

Result<std::string> DiscoverBucketRegion(http::HttpClient& client, const http::RetryPolicy& retry,
                                         const std::string& endpoint, const std::string& bucket) {
  static std::mutex mu;
  static auto* known = new std::map<std::string, std::string>();
  const std::string cache_key = endpoint + '\0' + bucket;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known->find(cache_key); it != known->end()) return it->second;
  }
  http::HttpCall call;  // 3
  call.request.method = "HEAD";
  if (!endpoint.empty()) {
    call.request.url = endpoint + "/" + bucket;
  } else if (bucket.find('.') != std::string::npos) {
    call.request.url = "https://s3.us-east-1.amazonaws.com/" + bucket;
  } else {
    call.request.url = "https://" + bucket + ".s3.amazonaws.com/";
  }
  call.operation = "finding the region of S3 bucket `" + bucket + "`";
  call.retry = retry;
  call.max_response_bytes = 1 << 20;
  Result<http::HttpResponse> r = client.Execute(call);
  const std::string hint = " (set AWS_REGION to the bucket's region to skip this request)";
  if (!r.ok()) return Status(r.status().code(), std::string(r.status().message()) + hint);
  std::optional<std::string> region = r->Header("x-amz-bucket-region");
  if (!region || region->empty()) {  // 4
    if (!endpoint.empty()) {
      region = "us-east-1";
    } else if (r->status == 404) {
      return NotFoundError(call.operation + ": HEAD " + call.request.url +
                           " answered HTTP 404: the bucket does not exist");
    } else {
      return FailedPreconditionError(call.operation + ": HEAD " + call.request.url + " answered HTTP " +
                                     std::to_string(r->status) + " without x-amz-bucket-region" + hint);
    }
  }
  CAIRN_ASSIGN_OR_RETURN(std::string checked,
                         CheckRegion(*region, call.operation + ": the answer of HEAD " + call.request.url));
  std::lock_guard<std::mutex> lock(mu);
  (*known)[cache_key] = checked;
  return checked;
}

}  // namespace cairn::s3
