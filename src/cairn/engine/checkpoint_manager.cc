// Implements the CheckpointManager of checkpoint_manager.h; Save follows the
// numbered save protocol at the top of that header.
#include "cairn/engine/checkpoint_manager.h"

#include <algorithm>
#include <charconv>

#include "cairn/events.h"
#include "cairn/engine/checkpoint_manager_points.h"

namespace cairn::engine {
namespace {

Status CheckOptions(const ManagerOptions& o) {
  if (o.save_interval_steps < 1) {
    return InvalidArgumentError("save_interval_steps must be >= 1, not " + std::to_string(o.save_interval_steps));
  }
  CAIRN_RETURN_IF_ERROR(CheckRetentionPolicy(o.retention));
  if (o.item_name.empty() || o.item_name.find('/') != std::string::npos || o.item_name == "." ||
      o.item_name == ".." || orbax::IsTmpName(o.item_name)) {
    return InvalidArgumentError("item name `" + o.item_name + "` must be one plain path component");
  }
  if (o.step_format.prefix.find('/') != std::string::npos) {
    return InvalidArgumentError("step prefix `" + o.step_format.prefix + "` must not contain '/'");
  }
  if (o.step_format.fixed_length && (*o.step_format.fixed_length < 1 || *o.step_format.fixed_length > 18)) {
    return InvalidArgumentError("step_format_fixed_length must be in [1, 18]");
  }
  return Status::OK();
}

// "<step> <name>\n" per step: what the primary broadcasts.
std::string EncodeSteps(const std::map<int64_t, std::string>& steps) {
  std::string out;
  for (const auto& [step, name] : steps) out += std::to_string(step) + " " + name + "\n";
  return out;
}

Result<std::map<int64_t, std::string>> DecodeSteps(std::string_view text) {
  std::map<int64_t, std::string> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t sp = line.find(' ');
    int64_t step = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + std::min(sp, line.size()), step);
    if (sp == std::string_view::npos || ec != std::errc() || ptr != line.data() + sp) {
      return InternalError("malformed step list from the primary process: `" + std::string(line) + "`");
    }
    out.emplace(step, std::string(line.substr(sp + 1)));
  }
  return out;
}

}  // namespace

CheckpointManager::CheckpointManager(orbax::Location root, ManagerOptions options, Coordinator& coordinator,
                                     ManagerHooks hooks)
    : root_(std::move(root)), options_(std::move(options)), coordinator_(coordinator), hooks_(std::move(hooks)) {}

Result<std::unique_ptr<CheckpointManager>> CheckpointManager::Open(const orbax::Location& root,
                                                                   const ManagerOptions& options,
                                                                   Coordinator& coordinator, ManagerHooks hooks) {
  CAIRN_RETURN_IF_ERROR(CheckOptions(options).Annotate("checkpoint manager of " + root.Path()));
  if (root.prefix.empty()) {
    return InvalidArgumentError("checkpoint manager of " + root.Path() + ": the root must be a directory of its store");
  }
  orbax::Location where = root;
  if (hooks.at_point) where.store = NewPointReportingKvStore(root.store, options.item_name, hooks.at_point);
  std::unique_ptr<CheckpointManager> m(new CheckpointManager(std::move(where), options, coordinator, std::move(hooks)));
  CAIRN_RETURN_IF_ERROR(m->LoadSteps("open"));
  if (coordinator.is_primary()) {
    // Leftovers of interrupted deletions (step 5 of step_retention.h), and
    // temporary directories whose owner is gone (step 6 of step.h: best
    // effort, its failure fails nothing).
    CheckpointManager* raw = m.get();
    m->worker_ = std::thread([raw] {
      if (!orbax::Exists(raw->root_)) return;
      raw->worker_status_ = RemoveDeletingLeftovers(raw->root_);
      orbax::RemoveAbandonedTemporaries(raw->root_).IgnoreError();
    });
  }
  return m;
}

CheckpointManager::~CheckpointManager() { Close().IgnoreError(); }

std::string CheckpointManager::CollectiveName(std::string_view what) const {
  return "cairn/manager/" + root_.Path() + "/" + std::string(what);
}

Status CheckpointManager::LoadSteps(std::string_view why) {
  std::string listed;
  Status local;
  if (coordinator_.is_primary()) {
    std::map<int64_t, std::string> found;
    if (orbax::Exists(root_)) {
      auto steps = ListCommittedSteps(root_, options_.step_format, options_.require_commit_file);
      if (steps.ok()) {
        for (const orbax::StepInfo& s : *steps) found.emplace(s.step, s.location.Name());
      } else {
        local = steps.status();
      }
    }
    listed = EncodeSteps(found);
  }
  const auto timeout = options_.save.timeout;
  CAIRN_RETURN_IF_ERROR(AgreeOnStatus(coordinator_, CollectiveName(std::string(why) + "/listed"), local, timeout)
                            .Annotate("listing the steps of " + root_.Path()));
  CAIRN_ASSIGN_OR_RETURN(std::string all,
                         coordinator_.Broadcast(CollectiveName(std::string(why) + "/steps"), 0, listed, timeout));
  CAIRN_ASSIGN_OR_RETURN(auto steps, DecodeSteps(all));
  std::lock_guard<std::mutex> lock(mu_);
  steps_ = std::move(steps);
  return Status::OK();
}

void CheckpointManager::JoinWorker() {
  if (worker_.joinable()) worker_.join();
}

bool CheckpointManager::ShouldSave(int64_t step) const {
  if (closed_) return false;
  return ShouldSaveStep(step, AllSteps(), options_.save_interval_steps);
}

Result<bool> CheckpointManager::Save(int64_t step, std::vector<SaveLeaf> leaves, bool force,
                                     StepExtras extras) {
  const std::string name = orbax::StepName(step, options_.step_format);
  const orbax::Location final_step = root_.Child(name);
  if (closed_) return FailedPreconditionError("saving step " + final_step.Path() + ": the manager is closed");
  if (step < 0) return InvalidArgumentError("saving step " + final_step.Path() + ": steps are >= 0");
  // Step 1.
  if (!force && !ShouldSave(step)) return false;
  // Step 2.
  CAIRN_RETURN_IF_ERROR(WaitUntilFinished().Annotate("an earlier save of this manager failed"));
  // Step 3.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (steps_.count(step) != 0) {
      return AlreadyExistsError("saving step " + std::to_string(step) + ": " + root_.Child(steps_[step]).Path() +
                                " is already committed");
    }
  }
  // Step 4.
  SaveRequest request;
  request.directory = final_step.Path();
  request.location = final_step;
  request.item_name = extras.item_name.empty() ? options_.item_name : extras.item_name;
  request.leaves = std::move(leaves);
  request.options = options_.save;
  if (extras.progress) request.options.progress = std::move(extras.progress);
  if (extras.item_handlers.count(request.item_name) != 0) {
    return InvalidArgumentError("saving step " + final_step.Path() + ": item `" + request.item_name +
                                "` is the PyTree item and cannot also be an extra item");
  }
  if (extras.score) {
    std::lock_guard<std::mutex> lock(mu_);
    scores_[step] = *extras.score;
  }
  request.extra_files = std::move(extras.files);
  request.extra_item_handlers = std::move(extras.item_handlers);
  request.step_custom_metadata = std::move(extras.custom_metadata);
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<PendingSave> pending,
                         StartSave(request, coordinator_, nullptr, hooks_.save));
  At(kPointSaveStarted);
  // Step 5.
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = step;
  }
  std::shared_ptr<PendingSave> shared(std::move(pending));
  worker_ = std::thread([this, shared, step, name] {
    Status s = shared->Wait();
    if (s.ok()) {
      At(kPointStepCommitted);
      s = AfterCommit(step, name);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.reset();
      scores_.erase(step);
    }
    worker_status_ = s;
  });
  if (!options_.enable_async) CAIRN_RETURN_IF_ERROR(WaitUntilFinished());
  return true;
}

Status CheckpointManager::AfterCommit(int64_t step, const std::string& name) {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.reset();
    steps_[step] = name;
    std::vector<int64_t> all;
    for (const auto& [s, n] : steps_) all.push_back(s);
    for (int64_t s : StepsToRemove(all, options_.retention, scores_)) {
      doomed.push_back(steps_[s]);
      steps_.erase(s);
      scores_.erase(s);
    }
  }
  if (!coordinator_.is_primary()) return Status::OK();
  Status first;
  for (const std::string& d : doomed) {
    Status s = DeleteStep(root_.Child(d), hooks_.at_point).Annotate("retention after step " + std::to_string(step));
    if (s.ok()) EmitEvent(EventLevel::kInfo, "deleted " + root_.Child(d).Path() + " (retention after step " + std::to_string(step) + ")");
    if (first.ok()) first = s;
  }
  return first;
}

void CheckpointManager::SetScores(std::map<int64_t, double> scores) {
  std::lock_guard<std::mutex> lock(mu_);
  scores_ = std::move(scores);
}

Status CheckpointManager::WaitUntilFinished() {
  JoinWorker();
  Status s = std::move(worker_status_);
  worker_status_ = Status::OK();
  return s;
}

std::vector<int64_t> CheckpointManager::AllSteps() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [s, n] : steps_) out.push_back(s);
  if (pending_ && steps_.count(*pending_) == 0) {
    out.insert(std::upper_bound(out.begin(), out.end(), *pending_), *pending_);
  }
  return out;
}

std::optional<int64_t> CheckpointManager::LatestStep() const {
  std::vector<int64_t> all = AllSteps();
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::optional<int64_t> CheckpointManager::PendingStep() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

Result<orbax::Location> CheckpointManager::StepLocation(int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ == step) {
    return FailedPreconditionError("step " + std::to_string(step) + " under " + root_.Path() +
                                   " is still being saved (wait until it is finished)");
  }
  auto it = steps_.find(step);
  if (it == steps_.end()) {
    std::string have;
    for (const auto& [s, n] : steps_) have += (have.empty() ? "" : ", ") + std::to_string(s);
    return NotFoundError("no committed step " + std::to_string(step) + " under " + root_.Path() + " (steps: " +
                         (have.empty() ? "none" : have) + ")");
  }
  return root_.Child(it->second);
}

Status CheckpointManager::Delete(int64_t step) {
  JoinWorker();
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = steps_.find(step);
    if (it == steps_.end()) {
      return NotFoundError("deleting step " + std::to_string(step) + " under " + root_.Path() +
                           ": it is not a committed step");
    }
    name = it->second;
    steps_.erase(it);
  }
  Status local = coordinator_.is_primary() ? DeleteStep(root_.Child(name), hooks_.at_point) : Status::OK();
  return AgreeOnStatus(coordinator_, CollectiveName("deleted/" + name), local, options_.save.timeout);
}

Status CheckpointManager::Reload() {
  JoinWorker();
  return LoadSteps("reload");
}

Status CheckpointManager::Close() {
  Status s = WaitUntilFinished();
  closed_ = true;
  return s;
}

}  // namespace cairn::engine
