#include "cairn/kvstore/s3/aws_credential_provider.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>

namespace cairn::s3 {

AwsCredentialProvider::AwsCredentialProvider(std::string description, FetchFn fetch, ClockFn clock)
    : description_(std::move(description)),
      fetch_(std::move(fetch)),
      clock_(clock ? std::move(clock) : ClockFn([] { return WallClock::now(); })) {}

std::shared_ptr<AwsCredentialProvider> AwsCredentialProvider::Fixed(AwsCredentials credentials) {
  std::string source = credentials.anonymous() ? std::string("no credentials (anonymous)")
                                               : credentials.source;
  bool anonymous = credentials.anonymous();
  auto p = std::make_shared<AwsCredentialProvider>(
      source, [c = std::move(credentials)]() -> Result<ExpiringAwsCredentials> {
        return ExpiringAwsCredentials{c, std::nullopt};
      });
  p->anonymous_ = anonymous;
  return p;
}

AwsCredentialProvider::State AwsCredentialProvider::StateLocked(WallClock::time_point now) const {
  if (!cached_) return State::kMissingOrExpired;
  if (!cached_->expiration) return State::kFresh;
  if (now >= *cached_->expiration) return State::kMissingOrExpired;
  if (now < refresh_at_ || now < retry_at_) return State::kFresh;
  return State::kRefreshDue;
}

Result<AwsCredentials> AwsCredentialProvider::Get() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (StateLocked(clock_()) == State::kFresh) return cached_->credentials;
  }
  // Due or expired: one caller fetches. While it does, callers holding still
  // valid credentials use them rather than wait.
  std::unique_lock<std::mutex> fetching(fetch_mu_, std::try_to_lock);
  if (!fetching.owns_lock()) {
    uint64_t attempts_before;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (StateLocked(clock_()) != State::kMissingOrExpired) return cached_->credentials;
      attempts_before = fetches_ + failures_;
    }
    fetching.lock();
    std::lock_guard<std::mutex> lock(mu_);
    // The fetch this caller waited for failed: its error, not another fetch
    // per waiting caller.
    if (fetches_ + failures_ != attempts_before && StateLocked(clock_()) == State::kMissingOrExpired &&
        !last_error_.ok()) {
      return last_error_;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);  // another caller may have fetched meanwhile
    if (StateLocked(clock_()) == State::kFresh) return cached_->credentials;
  }
  const WallClock::time_point start = clock_();
  Result<ExpiringAwsCredentials> got = fetch_();
  std::lock_guard<std::mutex> lock(mu_);
  const WallClock::time_point now = clock_();
  if (got.ok() && got->expiration && *got->expiration <= now) {
    got = DataLossError("AWS credentials from " + description_ + " arrived already expired");
  }
  if (!got.ok()) {
    ++failures_;
    if (cached_ && cached_->expiration && now < *cached_->expiration) {
      // Still valid: keep them, try again later (but before they expire).
      retry_at_ = std::min<WallClock::time_point>(now + kRetryAfterFailure, *cached_->expiration);
      return cached_->credentials;
    }
    std::string context = "getting AWS credentials from " + description_;
    if (cached_ && cached_->expiration) {
      std::time_t t = WallClock::to_time_t(*cached_->expiration);
      std::tm tm{};
      gmtime_r(&t, &tm);
      char buf[32];
      std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
      context += " (the previous ones expired at " + std::string(buf) + ")";
    }
    last_error_ = got.status().Annotate(context);
    return last_error_;
  }
  ++fetches_;
  last_error_ = Status::OK();
  cached_ = std::move(*got);
  retry_at_ = WallClock::time_point();
  if (cached_->expiration) {
    auto lifetime = *cached_->expiration - start;
    auto margin = std::min<WallClock::duration>(kRefreshMargin, lifetime / 2);
    refresh_at_ = *cached_->expiration - margin;
  }
  return cached_->credentials;
}

std::optional<AwsCredentials> AwsCredentialProvider::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cached_) return std::nullopt;
  return cached_->credentials;
}

uint64_t AwsCredentialProvider::fetches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fetches_;
}

uint64_t AwsCredentialProvider::failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

Result<WallClock::time_point> ParseAwsTimestamp(std::string_view text, std::string_view where) {
  auto bad = [&] {
    return InvalidArgumentError(std::string(where) + ": `" + std::string(text.substr(0, 64)) +
                                "` is not a timestamp like 2026-12-04T10:18:32Z");
  };
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() < 19) return bad();
  auto digits = [&](size_t at, size_t n, int* out) {
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, month, day, hour, minute, second;
  if (!digits(0, 4, &year) || text[4] != '-' || !digits(5, 2, &month) || text[7] != '-' ||
      !digits(8, 2, &day) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
      !digits(11, 2, &hour) || text[13] != ':' || !digits(14, 2, &minute) || text[16] != ':' ||
      !digits(17, 2, &second)) {
    return bad();
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > kDays[month - 1] || hour > 23 ||
      minute > 59 || second > 60) {
    return bad();
  }
  size_t i = 19;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == start) return bad();  // fractions are ignored (they only make it later)
  }
  int offset_minutes = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i + 6 == text.size() && (text[i] == '+' || text[i] == '-') && text[i + 3] == ':') {
    int oh, om;
    if (!digits(i + 1, 2, &oh) || !digits(i + 4, 2, &om) || oh > 23 || om > 59) return bad();
    offset_minutes = (text[i] == '-' ? -1 : 1) * (oh * 60 + om);
    i += 6;
  } else {
    return bad();
  }
  if (i != text.size()) return bad();
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  std::time_t t = timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return bad();
  return WallClock::from_time_t(t) - std::chrono::minutes(offset_minutes);
}

Result<ExpiringAwsCredentials> ParseAwsCredentialsJson(std::string_view json, std::string_view where) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return DataLossError(std::string(where) + ": the answer is not a JSON object (" +
                         std::to_string(json.size()) + " bytes)");
  }
  if (auto code = j.find("Code"); code != j.end()) {
    if (!code->is_string() || code->get<std::string>() != "Success") {
      std::string message;
      if (auto m = j.find("Message"); m != j.end() && m->is_string()) message = m->get<std::string>();
      return FailedPreconditionError(std::string(where) + ": Code is " +
                                     code->dump().substr(0, 100) +
                                     (message.empty() ? "" : ": " + message.substr(0, 300)));
    }
  }
  auto field = [&](const char* name) -> Result<std::string> {
    auto it = j.find(name);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
      return DataLossError(std::string(where) + ": `" + name +
                           "` is missing or not a non-empty string");
    }
    return it->get<std::string>();
  };
  ExpiringAwsCredentials out;
  CAIRN_ASSIGN_OR_RETURN(out.credentials.access_key_id, field("AccessKeyId"));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.secret_access_key, field("SecretAccessKey"));
  CAIRN_ASSIGN_OR_RETURN(out.credentials.session_token, field("Token"));
  CAIRN_ASSIGN_OR_RETURN(std::string expiration, field("Expiration"));
  Result<WallClock::time_point> t = ParseAwsTimestamp(expiration, std::string(where) + ": `Expiration`");
  if (!t.ok()) return DataLossError(std::string(t.status().message()));
  out.expiration = *t;
  out.credentials.source = std::string(where);
  return out;
}

}  // namespace cairn::s3
