// The jobs a set of definitions fire one another by (on_success, on_failure, on_complete, and the
// joins of `after`; docs/semantics.md "Dependencies"), checked as a whole: every job named is
// defined, and no job fires itself again through its children.
#ifndef GNOMON_SRC_JOB_JOB_GRAPH_H_
#define GNOMON_SRC_JOB_JOB_GRAPH_H_

#include <string>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon {

// InvalidArgument naming the first job whose key names a job not in `jobs`
// (job "a": on_success: "b" is not defined), a sharded job in an `after`, or the path of a cycle
// (job "a": on_success: a cycle: a -> b -> a), found from the first job of `jobs` on it. Ids
// are unique in `jobs`.
Status CheckJobGraph(const std::vector<const JobSpec*>& jobs);

// The jobs whose runs fire `id`: those naming it in on_success, on_failure or on_complete, and
// those its `after` lists; sorted, each once.
std::vector<std::string> ParentsOf(const std::vector<const JobSpec*>& jobs, const std::string& id);
// The jobs that join `id`'s fires (their `after` lists it), sorted.
std::vector<std::string> JoinsOf(const std::vector<const JobSpec*>& jobs, const std::string& id);
// The jobs that name `id` in any key (on_*, after): a definition that breaks when `id` goes.
std::vector<std::string> DependentsOf(const std::vector<const JobSpec*>& jobs,
                                      const std::string& id);

}  // namespace gnomon

#endif  // GNOMON_SRC_JOB_JOB_GRAPH_H_
