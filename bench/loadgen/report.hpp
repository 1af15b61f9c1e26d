// The results of a run as a wrk-like text summary and as JSON (schema in
// bench/loadgen/README.md).
#pragma once

#include <string>

#include "config.hpp"
#include "engine.hpp"

namespace sm::loadgen {

// "Running 10s test @ URL" and the load's shape, printed before the run.
std::string describe_run(const Config& config);
std::string text_report(const Config& config, const Outcome& outcome);
std::string json_report(const Config& config, const Outcome& outcome);
// --hlog: HdrHistogram's interval log of the measured window (hdr.hpp).
std::string hlog_report(const Config& config, const Outcome& outcome);
// --hgrm: HdrHistogram's percentile distribution of the latency (corrected
// with --rate), in milliseconds.
std::string hgrm_report(const Config& config, const Outcome& outcome);
// The progress line (no newline): "[3s/10s] 123456 responses, 41234 req/s, 0 errors";
// with -n "[3s] 123456/1000000 responses, ...".
std::string progress_line(const Config& config, const ProgressSample& sample);

}  // namespace sm::loadgen
