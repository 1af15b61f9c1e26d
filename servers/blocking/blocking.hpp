// server-blocking: a thread per connection, the oldest model, and where it
// falls over. An acceptor thread hands each accepted connection to a thread
// of a bounded pool; that thread does blocking reads (SO_RCVTIMEO bounds
// them: --idle-timeout) and blocking writes until the connection ends, then
// waits for the next one. --threads threads start up front; the pool grows
// on demand up to --max-connections; at the limit the acceptor stops
// accepting and new connections wait in the listen backlog. A thread beyond
// --threads that waits --spare-thread-timeout for a connection ends.
//
// What it costs: a thread (a 256 KiB stack reservation, a kernel task) per
// open connection, a context switch per request when connections outnumber
// cores, and one idle thread per idle keep-alive connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/accept_gate.hpp"
#include "runtime/log.hpp"
#include "runtime/server.hpp"

namespace sm::blocking {

class Server {
  public:
    explicit Server(const runtime::WorkerContext& ctx);
    ~Server();

    void run();  // the acceptor; returns after shutdown

  private:
    struct Worker;
    bool spawn_worker();
    // Joins the threads whose loops ended; true while threads beyond
    // --threads are alive (more may end).
    bool join_ended();
    bool wait_for_idle_thread();
    void worker_loop(Worker& w);
    void serve(Worker& w, int fd);
    void stop_connections(int how, bool only_idle);

    const runtime::ServerOptions& opts_;
    runtime::Listener& listener_;
    const runtime::StopSignal& stop_;
    runtime::AcceptGate gate_;

    std::mutex mutex_;
    std::condition_variable work_;                  // a connection is queued, or exit
    std::condition_variable idle_;                  // a thread became idle, or exited
    std::deque<int> handed_;                        // accepted, not yet taken by a thread
    std::vector<std::unique_ptr<Worker>> workers_;  // under mutex_
    std::size_t idle_count_ = 0;                    // threads waiting for a connection
    std::size_t ended_ = 0;                         // threads in workers_ whose loop returned
    const std::chrono::milliseconds spare_timeout_;
    bool exit_ = false;                             // threads return once nothing is queued
    std::atomic<bool> stopping_{false};
    bool spawn_failed_ = false;
    runtime::RateLimitedLog pool_log_;
};

}  // namespace sm::blocking
