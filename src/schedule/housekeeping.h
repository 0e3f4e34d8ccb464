// Housekeeping: the node's periodic upkeep, on the pool's control lane. A pass (every
// housekeeping_interval) measures the clock skew to the backend, heartbeats into the live set
// and reads it back (sharded ownership ranks it), resolves lost runs (expired leases of any node,
// per the job's on_lost: a rerun is started here), hands failed claims, failed catch-up reads
// and unwritten skip records to the MisfireHandler, prunes a slice of the jobs' history, and fires
// the children of ended runs that have none yet (ChildFirer::Sweep). The state poll (every
// state_poll_interval) re-reads pause states when the backend's JobsVersion changed, and renews
// every lease held here at once (the change may be an operator's cancel).
//
// The heartbeat and the live set come first and apart from the rest: they are sent every
// interval even while an earlier pass's other work (lost runs, pruning a million jobs' history,
// the children sweep) runs past the interval, so a busy node is not taken for dead (its
// heartbeat lives 3 intervals). A heartbeat still waiting on the backend from the last interval
// is not sent beside it.
//
// One pass at a time: a pass due while one runs (a slow backend) is skipped, the next comes an
// interval later. Not coalesced like the state poll (OnePassAtATime): a pass right after a slow
// one (a backend outage) would retry the outage's failed claims sooner; that once let an older
// fire be claimed on time after a newer one, which RetryFailedClaimsLocked now prevents itself,
// but the skipping is what every chaos and CI run since has exercised.
//
// Threads: pool workers (control lane), submitted by the TimerLoop's ticks.
//
// Thread safety: thread-safe. Lock order: pass_mu_ is outermost: it is held for a whole pass,
// backend calls included, and JobTable::mu() and LeaseKeeper::mu_ are taken under it, one at a
// time. The observer is called with it held. beat_mu_ is held only around the heartbeat and
// the live-set read, never with pass_mu_.
#ifndef GNOMON_SRC_SCHEDULE_HOUSEKEEPING_H_
#define GNOMON_SRC_SCHEDULE_HOUSEKEEPING_H_

#include "src/schedule/job_table.h"

namespace gnomon::internal {

class ChildFirer;
class ClaimDispatcher;
class LeaseKeeper;
class MisfireHandler;

class Housekeeping {
 public:
  Housekeeping(EngineContext& ctx, JobTable& table, LeaseKeeper& lease, ClaimDispatcher& dispatch,
               MisfireHandler& misfire)
      : ctx_(ctx), table_(table), lease_(lease), dispatch_(dispatch), misfire_(misfire) {}
  Housekeeping(const Housekeeping&) = delete;
  Housekeeping& operator=(const Housekeeping&) = delete;

  // The pass sweeps for children of ended runs (ChildFirer::Sweep). REQUIRES: before Start.
  void Wire(ChildFirer& children) { children_ = &children; }

  // One housekeeping pass (skipped while another runs).
  void Pass() GNOMON_EXCLUDES(pass_mu_);
  // One state poll (a poll asked for during a pass makes that pass go once more).
  void PollStates();
  // Hands the failed claims and catch-up reads to the MisfireHandler now, as a pass does: the
  // backend's routes moved (ClaimStore::AddRoutesListener), so a part that failed them may
  // answer. Not serialized with a pass (each hand-over is under the job table's lock).
  void RetryFailed();
  // At start, before the start-up catch-up reads every job's state (pause state included): the
  // backend's jobs version then. The state poll reads the pause states again only once the
  // version moved on from it (or a catch-up's read failed), not a second time at start.
  // REQUIRES: before the first state poll.
  void SeedJobsVersion(int64_t version) { jobs_version_ = version; }

 private:
  void BeatLocked() GNOMON_REQUIRES(beat_mu_);
  void PassLocked() GNOMON_REQUIRES(pass_mu_);
  void ResolveLostRuns();
  void PollStatesPass();

  EngineContext& ctx_;
  JobTable& table_;
  LeaseKeeper& lease_;
  ClaimDispatcher& dispatch_;
  MisfireHandler& misfire_;
  ChildFirer* children_ = nullptr;
  Mutex beat_mu_;  // held by the heartbeat under way
  Mutex pass_mu_;  // held by the pass under way (its part after the heartbeat)
  OnePassAtATime state_polls_;
  int64_t jobs_version_ = -1;  // used by one state poll pass at a time (state_polls_)
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_HOUSEKEEPING_H_
