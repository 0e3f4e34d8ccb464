// SqliteDefinitions (internal): SqliteCoordinator's DefinitionStore (gnomon/definition_store.h)
// over the `jobs` table and the jobs version counter: PutJob and DeleteJob compare the expected
// version and bump the jobs version in one transaction on the write connection; the reads are one
// statement on a read connection. WaitJobsChange is the DefinitionStore's polling default.
//
// Thread safety: safe to call from many threads at once (writes hold the store's write mutex for
// their transaction; reads use a read connection of the store).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_DEFINITIONS_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_DEFINITIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon::coord {

class SqliteDefinitions {
 public:
  // `store` must outlive this object.
  explicit SqliteDefinitions(SqliteStore& store) : store_(store) {}
  SqliteDefinitions(const SqliteDefinitions&) = delete;
  SqliteDefinitions& operator=(const SqliteDefinitions&) = delete;

  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version);
  Status DeleteJob(const std::string& job_id, int64_t expected_version);
  Result<StoredJob> GetJob(const std::string& job_id);
  Result<std::vector<StoredJob>> ListJobs();
  Result<int64_t> JobsVersion();

 private:
  SqliteStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_DEFINITIONS_H_
