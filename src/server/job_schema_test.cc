// The job schema (src/job/job_schema.h) against what is written apart from it: the OpenAPI
// document's JobSpec (src/server/openapi.json, which the lint reads) and docs/configuration.md's
// key table; and the JSON and TOML readers, which must read the same definition the same way.
#include "src/job/job_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "src/server/job_json.h"
#include "src/server/jobs_file.h"
#include "src/server/openapi_document.h"

namespace gnomon::server {
namespace {

using nlohmann::json;

// The job's FireRulesSpec to set keys of (created when unset).
inline FireRulesSpec& Rules(JobSpec& j) {
  return j.fire_rules ? *j.fire_rules : j.fire_rules.emplace();
}

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(GNOMON_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(JobSchemaTest, TheOpenApiFileHoldsTheSchemasJobSpec) {
  const json file = json::parse(OpenApiSource());
  const json want = JobSpecSchema();
  EXPECT_EQ(file["components"]["schemas"]["JobSpec"], want)
      << "src/server/openapi.json's components.schemas.JobSpec must be:\n"
      << want.dump(1);
  // What is served is the schema's, whatever the file says.
  EXPECT_EQ(json::parse(OpenApiDocument("1.2.3"))["components"]["schemas"]["JobSpec"], want);
  EXPECT_EQ(json::parse(OpenApiDocument("1.2.3"))["info"]["version"], "1.2.3");
}

// The key table of docs/configuration.md "Jobs files": | `key` | type | default | meaning |.
struct DocRow {
  std::string key, type, default_text;
};
std::vector<DocRow> DocKeyTable() {
  std::istringstream in(ReadSource("docs/configuration.md"));
  std::vector<DocRow> rows;
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) in_section = line == "## Jobs files";
    if (!in_section) continue;
    if (line == "| key | type | default | meaning |") {
      in_table = true;
      continue;
    }
    if (!in_table || line.starts_with("|---")) continue;
    if (!line.starts_with("| `")) break;
    std::vector<std::string> cells;
    std::string cell;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') {
        cells.push_back(cell.substr(cell.find_first_not_of(' ') == std::string::npos
                                        ? cell.size()
                                        : cell.find_first_not_of(' ')));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    for (std::string& c : cells) {
      while (!c.empty() && c.back() == ' ') c.pop_back();
    }
    if (cells.size() >= 3)
      rows.push_back({cells[0].substr(1, cells[0].size() - 2), cells[1], cells[2]});
  }
  return rows;
}

TEST(JobSchemaTest, DocsKeyTableMatchesTheSchema) {
  const std::vector<DocRow> rows = DocKeyTable();
  ASSERT_EQ(rows.size(), JobKeys().size()) << "docs/configuration.md \"Jobs files\" key table";
  const JobSpec defaults;
  for (size_t i = 0; i < rows.size(); ++i) {
    const JobKey& key = JobKeys()[i];
    SCOPED_TRACE(std::string(key.name));
    EXPECT_EQ(rows[i].key, key.name) << "row " << i + 1 << " (same order as the schema)";
    EXPECT_EQ(rows[i].type, key.type);
    const json value = key.write(defaults);
    if (key.name == "id") {
      EXPECT_EQ(rows[i].default_text, "required");
    } else if (value.is_null()) {
      EXPECT_EQ(rows[i].default_text, "") << "an executor has no default";
    } else {
      EXPECT_NE(rows[i].default_text.find("`" + value.dump() + "`"), std::string::npos)
          << "the default column should show `" << value.dump() << "`";
    }
  }
}

// Every key set: written as JSON, read back, written again: the same.
TEST(JobSchemaTest, EveryKeyRoundTripsThroughJson) {
  JobSpec j;
  j.id = "all";
  j.schedule = "0 3 * * *";
  j.timezone = "Europe/Berlin";
  Rules(j).start_at = *Instant::ParseRfc3339("2027-03-01T00:00:00+01:00");
  Rules(j).end_at = *Instant::ParseRfc3339("2027-06-30T23:59:59Z");
  Rules(j).max_runs = 10;
  Rules(j).exclude = {"2027-04-05", "2027-05-01/2027-05-03", "* * * * 0,6"};
  Rules(j).jitter = std::chrono::minutes(5);
  Rules(j).record_excluded = true;
  j.argv = {"/bin/echo", "hi"};
  j.timeout = std::chrono::minutes(2);
  j.retries = 3;
  j.retry_backoff = std::chrono::seconds(5);
  j.overlap = OverlapPolicy::kReplace;
  j.misfire = MisfirePolicy::kAll;
  j.catchup_window = std::chrono::hours(2);
  j.on_lost = LostPolicy::kRerun;
  j.shards = 4;
  j.max_consecutive_failures = 7;
  j.enabled = false;
  j.description = "d";
  j.params = R"({"a":1})";
  j.env = {{"K", "V"}};
  j.kill_grace = std::chrono::seconds(3);
  j.history_keep = 9;
  j.history_max_age = std::chrono::hours(48);
  j.queue = "q";
  j.run_as = "nobody";
  j.inherit_env = {"PATH"};
  j.memory_max = 1 << 20;
  j.cpu_max = std::chrono::seconds(30);
  j.pids_max = 10;
  j.open_files = 100;
  DependencySpec deps;
  deps.after = {"extract-eu", "extract-us"};
  deps.join_timeout = std::chrono::minutes(10);
  SetDependencies(j, deps);
  const json written = WriteJobKeys(j);
  EXPECT_EQ(written.size(), JobKeys().size() - 2) << "all but command and http";
  EXPECT_EQ(written["start_at"], "2027-02-28T23:00:00.000Z");
  Result<JobSpec> read = JobSpecFromJson(written, JobSpec{});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(WriteJobKeys(*read), written);
  EXPECT_TRUE(ValidateJobSpec(*read).ok());
}

// The children a job names (a sharded job names none, so they are apart from the test above).
TEST(JobSchemaTest, ChildrenRoundTripThroughJson) {
  JobSpec j;
  j.id = "parent";
  j.command = "true";
  SetDependencies(j, DependencySpec{{"a", "b"}, {"c"}, {"d"}, {}, Duration(0)});
  const json written = WriteJobKeys(j);
  EXPECT_EQ(written["on_success"], json({"a", "b"}));
  EXPECT_EQ(written["on_failure"], json({"c"}));
  EXPECT_EQ(written["on_complete"], json({"d"}));
  EXPECT_FALSE(written.contains("schedule") && !written["schedule"].get<std::string>().empty());
  Result<JobSpec> read = JobSpecFromJson(written, JobSpec{});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(DependenciesOf(*read), DependenciesOf(j));
  EXPECT_TRUE(ValidateJobSpec(*read).ok()) << "no schedule: a child only";
  // A job that names none keeps nothing on the heap.
  Result<JobSpec> plain = JobSpecFromJson(
      json{{"id", "p"}, {"command", "true"}, {"on_success", json::array()}}, JobSpec{});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->dependencies);
}

// A jobs file and a JSON body that say the same read the same (TOML values go through the JSON
// reader), and a bad value's error names the key in both.
TEST(JobSchemaTest, TomlAndJsonReadTheSameDefinition) {
  const std::string toml = R"([[job]]
id = "same"
schedule = "*/5 * * * *"
http = { url = "http://127.0.0.1:9/x", method = "GET", headers = { X-Team = "fin" } }
timeout = "90s"
retries = 2
overlap = "allow"
params = { day = 2026-12-01, n = 3 }
env = { A = "1" }
kill_grace = "3s"
start_at = 2027-03-01T00:00:00+08:00
exclude = ["2027-04-05", "2027-05-01/2027-05-03"]
jitter = "90s"
)";
  Result<std::vector<JobSpec>> from_toml = SpecsOf(ParseJobsFile(toml, "jobs.toml", JobSpec{}));
  ASSERT_TRUE(from_toml.ok()) << from_toml.status().ToString();
  const json body = json::parse(R"({"id":"same","schedule":"*/5 * * * *",
      "http":{"url":"http://127.0.0.1:9/x","method":"GET","headers":{"X-Team":"fin"}},
      "timeout":"90s","retries":2,"overlap":"allow","params":{"day":"2026-12-01","n":3},
      "env":{"A":"1"},"kill_grace":"3s","start_at":"2027-02-28T16:00:00Z",
      "exclude":["2027-04-05","2027-05-01/2027-05-03"],"jitter":"90s"})");
  Result<JobSpec> from_json = JobSpecFromJson(body, JobSpec{});
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EXPECT_EQ(WriteJobKeys((*from_toml)[0]), WriteJobKeys(*from_json));

  Result<std::vector<JobSpec>> bad = SpecsOf(ParseJobsFile(
      "[[job]]\nid = \"b\"\nschedule = \"@daily\"\ncommand = \"true\"\nretries = \"x\"\n",
      "jobs.toml", JobSpec{}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("jobs.toml:5"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("retries: expected an integer"), std::string::npos)
      << bad.status().ToString();
  EXPECT_EQ(JobSpecFromJson(json{{"retries", "x"}}, JobSpec{}).status().message(),
            "retries: expected an integer, got string");
}

TEST(JobSchemaTest, RangesComeFromTheSchema) {
  JobSpec j;
  j.id = "r";
  j.schedule = "@daily";
  j.command = "true";
  ASSERT_TRUE(ValidateJobSpec(j).ok());
  for (const JobKey& key : JobKeys()) {
    if (key.min > key.max) continue;
    SCOPED_TRACE(std::string(key.name));
    JobSpec over = j;
    const json big =
        key.type == "duration" ? json(FormatDuration(Duration(key.max + 1))) : json(key.max + 1);
    ASSERT_TRUE(key.read(JsonKeyValue(big), over).ok());
    Status s = ValidateJobSpec(over);
    EXPECT_NE(s.message().find(std::string(key.name) + ": "), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("is out of range"), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace gnomon::server
