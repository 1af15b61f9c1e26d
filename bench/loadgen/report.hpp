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

}  // namespace sm::loadgen
