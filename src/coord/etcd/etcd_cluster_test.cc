// EtcdCoordinator against a three-member etcd cluster on loopback (ctest label "integration"):
// coordinators on every member keep claiming fires from several threads while the test kills
// one member (SIGKILL) and freezes another (SIGSTOP: quorum lost), then thaws it (SIGCONT). It
// asserts on the recorded results, not on timing: no fire is claimed twice, fencing tokens
// strictly increase per job, and claims resume once quorum is back. Real time is used (the
// cluster's elections are real). Skips when /usr/bin/etcd is missing.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gnomon/etcd_coordinator.h"
#include "src/coord/etcd/etcd_test_util.h"

namespace gnomon::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

struct ClaimRecord {
  std::string job;
  int64_t fire_index = 0;
  int64_t token = 0;
  int thread = 0;
  int phase = 0;
};

TEST(EtcdClusterTest, ClaimsStayUniqueAndFencedThroughMemberLossAndQuorumLoss) {
  if (!HaveEtcd()) GTEST_SKIP() << kEtcdBinary << " is not installed";
  TempDir dir;
  std::vector<std::unique_ptr<EtcdMember>> members;
  std::string initial;
  for (int i = 0; i < 3; ++i) {
    members.push_back(std::make_unique<EtcdMember>("m" + std::to_string(i), dir.path()));
    initial += (i ? "," : "") + members.back()->name() + "=" + members.back()->peer_url();
  }
  for (auto& m : members) ASSERT_TRUE(m->Spawn(initial));
  for (auto& m : members) ASSERT_TRUE(m->WaitHealthy()) << m->name() << " is not healthy";

  // One coordinator per member, each listing every endpoint starting with its own.
  std::vector<std::unique_ptr<EtcdCoordinator>> coords;
  for (int i = 0; i < 3; ++i) {
    EtcdOptions o;
    o.endpoints.clear();
    for (int k = 0; k < 3; ++k) {
      o.endpoints.emplace_back("127.0.0.1", members[(i + k) % 3]->client_port());
    }
    o.prefix = "cluster-test/";
    o.connect_timeout = milliseconds(500);
    o.io_timeout = seconds(1);
    o.reconnect_backoff_min = milliseconds(100);
    o.reconnect_backoff_max = seconds(1);
    Result<std::unique_ptr<EtcdCoordinator>> c = EtcdCoordinator::Open(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coords.push_back(std::move(*c));
  }

  const std::vector<std::string> jobs = {"alpha", "beta", "gamma"};
  const Instant base = SystemClock::Get().Now() - std::chrono::hours(1);
  constexpr int kThreads = 6;
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::atomic<int64_t> claimed{0};
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  std::vector<ClaimRecord> records;
  std::vector<std::jthread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Coordinator& c = *coords[t % 3];
      // Every thread walks the same fires in the same order, so they race on each one.
      for (int64_t i = 0; !stop.load(); ++i) {
        for (const std::string& job : jobs) {
          ClaimRequest req;
          req.fire.job_id = job;
          req.fire.scheduled_at = base + milliseconds(100 * i);
          req.node_id = "node-" + std::to_string(t);
          req.overlap = OverlapPolicy::kAllow;
          req.lease_ttl = seconds(30);
          Result<ClaimOutcome> out = c.Claim(req);
          if (!out.ok()) {
            errors.fetch_add(1);
            continue;
          }
          if (out->result != R::kClaimed) continue;
          {
            std::lock_guard<std::mutex> lock(mu);
            records.push_back({job, i, out->claim->fencing_token, t, phase.load()});
          }
          claimed.fetch_add(1);
          RunRecord r;
          r.run_id = out->claim->fire.RunId();
          r.job_id = job;
          r.scheduled_at = req.fire.scheduled_at;
          r.attempt = 1;
          r.fencing_token = out->claim->fencing_token;
          r.node_id = req.node_id;
          r.outcome = RunOutcome::kSucceeded;
          (void)c.Report(*out->claim, r, true);  // may fail while quorum is lost: fine
        }
      }
    });
  }

  auto wait_for_claims = [&](int64_t more, Duration limit) {
    const int64_t target = claimed.load() + more;
    const Duration deadline = SystemClock::Get().SteadyNow() + limit;
    while (claimed.load() < target && SystemClock::Get().SteadyNow() < deadline) {
      RealWait(milliseconds(50));
    }
    return claimed.load() >= target;
  };

  // Phase 0: healthy cluster.
  EXPECT_TRUE(wait_for_claims(100, seconds(30))) << "no progress on a healthy cluster";
  // Phase 1: one member killed; the other two keep quorum.
  phase = 1;
  members[1]->Kill();
  EXPECT_TRUE(wait_for_claims(100, seconds(30))) << "no progress with 2 of 3 members";
  // Phase 2: another member frozen: no quorum, claims must fail (never double).
  phase = 2;
  members[2]->Signal(SIGSTOP);
  RealWait(seconds(3));
  const int64_t errors_without_quorum = errors.load();
  // Phase 3: thawed: quorum is back and claims resume.
  phase = 3;
  members[2]->Signal(SIGCONT);
  const bool resumed = wait_for_claims(100, seconds(60));
  stop = true;
  threads.clear();  // joins
  EXPECT_TRUE(resumed) << "claims did not resume after quorum came back";
  EXPECT_GT(errors_without_quorum, 0) << "no call failed while quorum was lost";

  // At most one successful claim per fire, across all threads and coordinators.
  std::map<std::pair<std::string, int64_t>, int> per_fire;
  std::map<std::string, std::set<int64_t>> tokens;
  std::map<std::pair<int, std::string>, int64_t> last_token_of_thread;
  int in_phase[4] = {0, 0, 0, 0};
  for (const ClaimRecord& r : records) {
    EXPECT_EQ(++per_fire[std::make_pair(r.job, r.fire_index)], 1)
        << r.job << " fire " << r.fire_index << " claimed twice";
    EXPECT_TRUE(tokens[r.job].insert(r.token).second) << r.job << " token " << r.token << " reused";
    // A thread's claims are sequential in time, so its tokens of one job must increase.
    int64_t& last = last_token_of_thread[{r.thread, r.job}];
    EXPECT_GT(r.token, last) << "token went backwards for " << r.job;
    last = r.token;
    ++in_phase[r.phase];
  }
  EXPECT_GT(in_phase[1], 0);
  EXPECT_GT(in_phase[3], 0);
  // The history agrees: each claimed fire has one record, with the winner's token.
  int checked = 0;
  for (size_t k = 0; k < records.size(); k += std::max<size_t>(1, records.size() / 50)) {
    const ClaimRecord& r = records[k];
    FireKey f;
    f.job_id = r.job;
    f.scheduled_at = base + milliseconds(100 * r.fire_index);
    Result<std::vector<RunRecord>> runs = coords[0]->GetRun(f.RunId());
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].fencing_token, r.token);
    ++checked;
  }
  EXPECT_GT(checked, 0);
  std::cout << "claims: " << records.size() << " (per phase " << in_phase[0] << "/" << in_phase[1]
            << "/" << in_phase[2] << "/" << in_phase[3] << "), failed calls: " << errors.load()
            << "\n";
}

}  // namespace
}  // namespace gnomon::testing
