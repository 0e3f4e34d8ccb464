#include "src/job/job_graph.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

namespace gnomon {
namespace {

// An edge from a job to a job it fires: `key` of job `owner` names it (the parent's on_* key,
// or the child's `after`).
struct Edge {
  const char* key;
  const JobSpec* owner;
  const std::string* to;
};

// "jobs.toml:12: job \"a\": " for a job of a file, "job \"a\": " for one of the API.
std::string Where(const JobSpec& job) {
  const bool file = !job.source.empty() && job.source != "api";
  return (file ? job.source + ": " : std::string()) + "job \"" + job.id + "\": ";
}

// The jobs' names of other jobs, each with the key that names it, in key order.
std::vector<std::pair<const char*, const std::string*>> Names(const JobSpec& job) {
  std::vector<std::pair<const char*, const std::string*>> out;
  if (!job.dependencies) return out;
  const DependencySpec& d = *job.dependencies;
  for (const std::string& n : d.on_success) out.emplace_back("on_success", &n);
  for (const std::string& n : d.on_failure) out.emplace_back("on_failure", &n);
  for (const std::string& n : d.on_complete) out.emplace_back("on_complete", &n);
  for (const std::string& n : d.after) out.emplace_back("after", &n);
  return out;
}

}  // namespace

Status CheckJobGraph(const std::vector<const JobSpec*>& jobs) {
  std::map<std::string_view, const JobSpec*> by_id;
  for (const JobSpec* j : jobs) by_id.emplace(j->id, j);
  // Every name is defined; a join's parents are not sharded (a fire of theirs is one record).
  std::map<std::string_view, std::vector<Edge>> out;  // by the id the edge leaves
  for (const JobSpec* j : jobs) {
    for (const auto& [key, name] : Names(*j)) {
      auto it = by_id.find(*name);
      if (it == by_id.end()) {
        return InvalidArgumentError(Where(*j) + key + ": \"" + *name + "\" is not defined");
      }
      if (std::string_view(key) == "after") {
        if (it->second->shards > 1) {
          return InvalidArgumentError(Where(*j) + "after: \"" + *name +
                                      "\" has shards > 1 (a join waits for one fire a job)");
        }
        out[*name].push_back(Edge{key, j, &j->id});
      } else {
        out[j->id].push_back(Edge{key, j, name});
      }
    }
  }
  // Depth-first, iteratively (a chain may be long): 0 = unseen, 1 = on the path, 2 = done.
  std::map<std::string_view, int> state;
  static const std::vector<Edge> kNone;
  auto edges = [&](const std::string& id) -> const std::vector<Edge>& {
    auto it = out.find(id);
    return it == out.end() ? kNone : it->second;
  };
  struct Frame {
    const JobSpec* job;
    const std::vector<Edge>* edges;
    size_t next = 0;
  };
  for (const JobSpec* root : jobs) {
    if (state[root->id] != 0) continue;
    std::vector<Frame> path;
    path.push_back(Frame{root, &edges(root->id)});
    state[root->id] = 1;
    while (!path.empty()) {
      Frame& top = path.back();
      if (top.next == top.edges->size()) {
        state[top.job->id] = 2;
        path.pop_back();
        continue;
      }
      const std::string& child = *(*top.edges)[top.next++].to;
      const int s = state[child];
      if (s == 2) continue;
      if (s == 1) {
        // The cycle: from the child's frame on the path back to the child, named by the key of
        // its first edge (explored last from that frame: next - 1).
        auto from = std::find_if(path.begin(), path.end(),
                                 [&](const Frame& f) { return f.job->id == child; });
        std::string cycle;
        for (auto it = from; it != path.end(); ++it) cycle += it->job->id + " -> ";
        cycle += child;
        const Edge& first = (*from->edges)[from->next - 1];
        return InvalidArgumentError(Where(*first.owner) + first.key + ": a cycle: " + cycle);
      }
      state[child] = 1;
      const JobSpec* next = by_id.at(child);
      path.push_back(Frame{next, &edges(next->id)});
    }
  }
  return Status::Ok();
}

std::vector<std::string> ParentsOf(const std::vector<const JobSpec*>& jobs, const std::string& id) {
  std::vector<std::string> out;
  for (const JobSpec* j : jobs) {
    if (j->id == id) {
      for (const std::string& p : DependenciesOf(*j).after) out.push_back(p);
      continue;
    }
    for (const auto& [key, name] : Names(*j)) {
      if (*name == id && std::string_view(key) != "after") out.push_back(j->id);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> JoinsOf(const std::vector<const JobSpec*>& jobs, const std::string& id) {
  std::vector<std::string> out;
  for (const JobSpec* j : jobs) {
    const std::vector<std::string>& after = DependenciesOf(*j).after;
    if (std::find(after.begin(), after.end(), id) != after.end()) out.push_back(j->id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> DependentsOf(const std::vector<const JobSpec*>& jobs,
                                      const std::string& id) {
  std::vector<std::string> out;
  for (const JobSpec* j : jobs) {
    if (j->id == id) continue;
    for (const auto& [key, name] : Names(*j)) {
      if (*name == id) {
        out.push_back(j->id);
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gnomon
