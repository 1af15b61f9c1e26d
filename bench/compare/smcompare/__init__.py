"""bench/compare: start servers one after another, load each with loadgen, report side by side."""
