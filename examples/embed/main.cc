// A C++ service that embeds gnomon: two jobs with in-process handlers on one shared backend (a
// SQLite file, Redis or etcd). Start three copies on the same backend and every fire runs once,
// on one of them.
//
//   settlement_service <db-path | redis://host:port | etcd://host:port> <node-id> [ledger-file]
//
// GNOMON_EXAMPLE_FAST=1 makes both jobs fire every second (for the tests); each run appends
// "<job> <run id> <fencing token> <node>" to the ledger file.
#include <gnomon/composite_executor.h>
#include <gnomon/etcd_coordinator.h>
#include <gnomon/in_process_executor.h>
#include <gnomon/redis_coordinator.h>
#include <gnomon/scheduler.h>
#include <gnomon/sqlite_coordinator.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

namespace {

std::mutex ledger_mu;

gnomon::Status Record(const std::string& ledger, const gnomon::RunContext& ctx) {
  std::lock_guard<std::mutex> lock(ledger_mu);
  std::ofstream out(ledger, std::ios::app);
  out << ctx.job_id << " " << ctx.run_id << " " << ctx.fencing_token << " " << ctx.node_id << "\n";
  return out ? gnomon::Status::Ok() : gnomon::InternalError("cannot write " + ledger);
}

// The coordinator for a backend argument: a redis:// or etcd:// URL, or else a SQLite file path.
gnomon::Result<std::unique_ptr<gnomon::Coordinator>> OpenBackend(const std::string& backend) {
  if (backend.starts_with("redis://") || backend.starts_with("rediss://")) {
    auto options = gnomon::ParseRedisUrl(backend);
    if (!options.ok()) return options.status();
    auto redis = gnomon::RedisCoordinator::Open(*options);
    if (!redis.ok()) return redis.status();
    return std::unique_ptr<gnomon::Coordinator>(std::move(*redis));
  }
  if (backend.starts_with("etcd://")) {
    auto options = gnomon::ParseEtcdUrl(backend);
    if (!options.ok()) return options.status();
    auto etcd = gnomon::EtcdCoordinator::Open(*options);
    if (!etcd.ok()) return etcd.status();
    return std::unique_ptr<gnomon::Coordinator>(std::move(*etcd));
  }
  auto db = gnomon::SqliteCoordinator::Open(backend, gnomon::SystemClock::Get());
  if (!db.ok()) return db.status();
  return std::unique_ptr<gnomon::Coordinator>(std::move(*db));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: settlement_service <db-path | redis://host:port | etcd://host:port> "
                 "<node-id> [ledger-file]\n";
    return 2;
  }
  const std::string ledger = argc > 3 ? argv[3] : "ledger.txt";
  const bool fast = std::getenv("GNOMON_EXAMPLE_FAST") != nullptr;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto backend = OpenBackend(argv[1]);
  if (!backend.ok()) {
    std::cerr << backend.status().ToString() << "\n";
    return 1;
  }
  gnomon::InProcessExecutor handlers;
  gnomon::CompositeExecutor executor({nullptr, nullptr, &handlers});
  gnomon::SchedulerOptions options;
  options.node_id = argv[2];
  options.shutdown_grace = std::chrono::seconds(5);
  gnomon::Scheduler scheduler(options, **backend, executor, gnomon::SystemClock::Get());

  gnomon::JobSpec settlement;
  settlement.id = "monthly-settlement";
  settlement.schedule = fast ? "* * * * * *" : "0 0 2 1 * *";
  settlement.timezone = "Asia/Shanghai";
  settlement.in_process = true;
  gnomon::JobSpec rates;
  rates.id = "exchange-rate-sync";
  rates.schedule = fast ? "* * * * * *" : "0 */5 * * * *";
  rates.in_process = true;
  rates.retries = 2;
  rates.retry_backoff = std::chrono::seconds(1);

  (void)handlers.Register(settlement.id, [&](const gnomon::RunContext& ctx) {
    // Pays out exactly once per month: the fencing token lets the ledger reject stale writers.
    return Record(ledger, ctx);
  });
  (void)handlers.Register(rates.id,
                          [&](const gnomon::RunContext& ctx) { return Record(ledger, ctx); });
  for (const gnomon::JobSpec& job : {settlement, rates}) {
    if (gnomon::Status s = scheduler.AddJob(job); !s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 2;
    }
  }
  if (gnomon::Status s = scheduler.Start(); !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 1;
  }
  std::cout << "node " << argv[2] << " scheduling on " << argv[1] << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  scheduler.Stop();
  return 0;
}
