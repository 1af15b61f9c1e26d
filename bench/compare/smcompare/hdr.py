"""HdrHistogram's interval logs (.hlog), read, added and written: how the
results of several load agents become one, exactly.

loadgen --hlog writes HdrHistogram's log format (version 1.3: the
`#[StartTime: ...]`, `#[BaseTime: ...]` header, then one line per interval,
`[Tag=T,]start,length,max,BASE64`), each interval's histogram in HdrHistogram's
V2 compressed encoding. Histograms of one layout add up exactly, count by
count, so the agents' logs merged interval by interval give the histogram
one agent seeing all the load would have recorded: its percentiles are the
run's, not an average or a maximum of the agents' percentiles (which are
not percentiles of anything).

The layout arithmetic, getValueAtPercentile and the percentile spectrum are
those of bench/loadgen/histogram.cpp (HdrHistogram's own), so a merged row
reads the same as one agent's.

    merge_agents([("c1", text1), ("c2", text2)])  # loadgen stdout of --json - --hlog -

returns loadgen's JSON shape (what clients.parse_loadgen reads) for the
whole, with "agents" (each one's figures) and "problems" (why the whole is
not to be trusted: an agent that failed, started late or whose log does not
add up to its JSON), and the merged log's text.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import time
import zlib
from dataclasses import dataclass, field

V2_COOKIE = 0x1C849313             # V2 encoding, 8-byte words
V2_COMPRESSED_COOKIE = 0x1C849314  # ... compressed with zlib
_HEADER = struct.Struct(">iiiiqqd")    # cookie, payload length, index offset, digits, lowest, highest, ratio
_COMPRESSED = struct.Struct(">ii")     # cookie, compressed length
PERCENTILES = (("50", 50.0), ("75", 75.0), ("90", 90.0), ("99", 99.0), ("99.9", 99.9), ("99.99", 99.99))
# The tag of each series: a closed loop writes one series, untagged; an open loop (--rate) the latency
# from each request's intended send time ("corrected") and from its real one ("uncorrected").
CORRECTED, UNCORRECTED, UNTAGGED = "corrected", "uncorrected", ""


class HdrError(ValueError):
    """A log or a histogram that cannot be read, or histograms that cannot be added."""


@dataclass(frozen=True)
class Layout:
    """HdrHistogram's log-linear bucket layout."""
    lowest: int
    highest: int
    digits: int

    def __post_init__(self) -> None:
        if self.lowest < 1 or self.highest < 2 * self.lowest or not 0 <= self.digits <= 5:
            raise HdrError(f"not a histogram layout: lowest {self.lowest}, highest {self.highest}, "
                           f"digits {self.digits}")
        scm = math.ceil(math.log2(2 * 10 ** self.digits))
        half_mag = max(scm, 1) - 1
        unit = int(math.floor(math.log2(self.lowest)))
        count = 1 << (half_mag + 1)
        untrackable, buckets = count << unit, 1
        while untrackable <= self.highest:
            untrackable <<= 1
            buckets += 1
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "half_mag", half_mag)
        object.__setattr__(self, "sub_count", count)
        object.__setattr__(self, "half", count // 2)
        object.__setattr__(self, "mask", (count - 1) << unit)
        object.__setattr__(self, "length", (buckets + 1) * (count // 2))

    def index_of(self, v: int) -> int:
        bucket = (v | self.mask).bit_length() - self.unit - (self.half_mag + 1)
        sub = v >> (bucket + self.unit)
        return ((bucket + 1) << self.half_mag) + sub - self.half

    def value_from_index(self, i: int) -> int:
        bucket = (i >> self.half_mag) - 1
        sub = (i & (self.half - 1)) + self.half
        if bucket < 0:
            sub -= self.half
            bucket = 0
        return sub << (bucket + self.unit)

    def size_of_range(self, v: int) -> int:
        bucket = (v | self.mask).bit_length() - self.unit - (self.half_mag + 1)
        sub = v >> (bucket + self.unit)
        return 1 << (self.unit + (bucket + 1 if sub >= self.sub_count else bucket))

    def lowest_equivalent(self, v: int) -> int:
        return self.value_from_index(self.index_of(min(max(v, 0), self.highest)))

    def highest_equivalent(self, v: int) -> int:
        low = self.lowest_equivalent(v)
        return low + self.size_of_range(low) - 1

    def median_equivalent(self, v: int) -> int:
        low = self.lowest_equivalent(v)
        return low + (self.size_of_range(low) >> 1)


# loadgen's: 1 us to 60 s in nanoseconds, 3 significant digits (bench/loadgen/histogram.hpp).
LOADGEN = Layout(1_000, 60_000_000_000, 3)


@dataclass
class Histogram:
    layout: Layout = LOADGEN
    counts: dict[int, int] = field(default_factory=dict)  # bucket index -> count, only non-zero ones

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def record(self, value: int, n: int = 1) -> None:
        """For tests and tools: record n values as loadgen does (clamped to the layout)."""
        i = self.layout.index_of(min(max(int(value), 0), self.layout.highest))
        self.counts[i] = self.counts.get(i, 0) + n

    def add(self, other: "Histogram") -> None:
        if other.layout != self.layout:
            raise HdrError(f"histograms of different layouts cannot be added: {self.layout} and {other.layout}")
        for i, n in other.counts.items():
            self.counts[i] = self.counts.get(i, 0) + n

    def max_value(self) -> int:
        """The highest equivalent value of the highest non-empty bucket (0 if empty)."""
        return self.layout.highest_equivalent(self.layout.value_from_index(max(self.counts))) if self.counts else 0

    def min_value(self) -> int:
        return self.layout.value_from_index(min(self.counts)) if self.counts else 0

    def value_at_percentile(self, percentile: float) -> int:
        """HdrHistogram's getValueAtPercentile, as loadgen computes it."""
        total = self.total
        if not total:
            return 0
        p = min(max(percentile, 0.0), 100.0)
        wanted = max(int(p / 100.0 * total + 0.5), 1)
        cumulative = 0
        for i in sorted(self.counts):
            cumulative += self.counts[i]
            if cumulative >= wanted:
                v = self.layout.value_from_index(i)
                return self.layout.lowest_equivalent(v) if p == 0.0 else self.layout.highest_equivalent(v)
        return self.max_value()

    def mean(self) -> float:
        total = self.total
        if not total:
            return 0.0
        lay = self.layout
        return sum(lay.median_equivalent(lay.value_from_index(i)) * n for i, n in self.counts.items()) / total

    def stddev(self) -> float:
        total = self.total
        if not total:
            return 0.0
        m, lay = self.mean(), self.layout
        return math.sqrt(sum((lay.median_equivalent(lay.value_from_index(i)) - m) ** 2 * n
                             for i, n in self.counts.items()) / total)

    def spectrum(self, ticks_per_half_distance: int = 5) -> list[tuple[float, int, int]]:
        """(percentile reached, value, cumulative count) steps, as loadgen's Histogram::spectrum."""
        total = self.total
        steps: list[tuple[float, int, int]] = []
        if not total:
            return steps
        ticks = max(ticks_per_half_distance, 1)
        level, cumulative = 0.0, 0
        for i in sorted(self.counts):
            cumulative += self.counts[i]
            reached = 100.0 * cumulative / total
            if reached < level and cumulative != total:
                continue
            steps.append((reached, self.layout.highest_equivalent(self.layout.value_from_index(i)), cumulative))
            if cumulative == total:
                break
            while level <= reached and level < 100.0:
                half_distance = 2.0 ** (math.floor(math.log2(100.0 / (100.0 - level))) + 1)
                nxt = level + 100.0 / (ticks * half_distance)
                if nxt <= level:
                    break
                level = nxt
        return steps

    # --- HdrHistogram's V2 encoding ---------------------------------------------------------------

    def encode(self) -> str:
        """The V2 compressed encoding, base64 (what a log line carries)."""
        lay = self.layout
        payload = bytearray()
        if self.counts:
            limit = max(self.counts) + 1
            i = 0
            while i < limit:
                n = self.counts.get(i, 0)
                if n:
                    payload += _zigzag(n)
                    i += 1
                    continue
                zeros = 1
                while i + zeros < limit and not self.counts.get(i + zeros, 0):
                    zeros += 1
                payload += _zigzag(-zeros if zeros > 1 else 0)
                i += zeros
        raw = _HEADER.pack(V2_COOKIE, len(payload), 0, lay.digits, lay.lowest, lay.highest, 1.0) + payload
        packed = zlib.compress(raw)
        return base64.b64encode(_COMPRESSED.pack(V2_COMPRESSED_COOKIE, len(packed)) + packed).decode()

    @classmethod
    def decode(cls, text: str) -> "Histogram":
        """A histogram from the base64 of its V2 compressed encoding (HdrHistogram's Java, C and
        loadgen's)."""
        try:
            data = base64.b64decode(text.strip(), validate=True)
            cookie, length = _COMPRESSED.unpack_from(data)
            if cookie & ~0xF0 != V2_COMPRESSED_COOKIE & ~0xF0:
                raise HdrError(f"not a V2 compressed histogram (cookie {cookie:#x})")
            raw = zlib.decompress(data[_COMPRESSED.size:_COMPRESSED.size + length])
            cookie, plen, offset, digits, lowest, highest, _ratio = _HEADER.unpack_from(raw)
        except (ValueError, struct.error, zlib.error) as e:
            raise HdrError(f"not a readable histogram: {e}") from None
        if cookie & ~0xF0 != V2_COOKIE & ~0xF0:
            raise HdrError(f"not a V2 histogram encoding (cookie {cookie:#x})")
        if offset:
            raise HdrError("histograms with a normalizing index offset are not supported")
        h = cls(Layout(lowest, highest, digits))
        pos, end, i = _HEADER.size, _HEADER.size + plen, 0
        if end > len(raw):
            raise HdrError("a histogram's payload is cut short")
        while pos < end:
            value, pos = _unzigzag(raw, pos)
            if value < 0:
                i -= value
            else:
                if value:
                    if i >= h.layout.length:
                        raise HdrError("a histogram's counts run past its layout")
                    h.counts[i] = value
                i += 1
        return h


def _zigzag(v: int) -> bytes:
    """HdrHistogram's ZigZagEncoding.putLong: LEB128 of the zigzag value, the 9th byte whole."""
    u = ((v << 1) ^ (v >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    for _ in range(8):
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u & 0xFF)
    return bytes(out)


def _unzigzag(buf: bytes, pos: int) -> tuple[int, int]:
    u, shift = 0, 0
    for k in range(9):
        if pos >= len(buf):
            raise HdrError("a histogram's payload is cut short")
        b = buf[pos]
        pos += 1
        if k == 8:
            u |= b << 56
            break
        u |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (u >> 1) ^ -(u & 1), pos


# --- the interval log ------------------------------------------------------------------------------

@dataclass
class Interval:
    tag: str          # "" untagged
    start_s: float    # absolute: seconds since the epoch
    length_s: float
    max_ms: float     # as the line says
    histogram: Histogram


@dataclass
class Log:
    start_time: float | None = None   # the StartTime header, seconds since the epoch
    base_time: float | None = None
    intervals: list[Interval] = field(default_factory=list)

    def tags(self) -> list[str]:
        return sorted({iv.tag for iv in self.intervals})

    def series(self, tag: str) -> list[Interval]:
        return [iv for iv in self.intervals if iv.tag == tag]

    def total(self, tag: str) -> Histogram:
        h = Histogram()
        first = True
        for iv in self.series(tag):
            if first:
                h, first = Histogram(iv.histogram.layout), False
            h.add(iv.histogram)
        return h


def parse_log(text: str, name: str = "log") -> Log:
    """An interval log's text. Timestamps become absolute as HdrHistogram's HistogramLogReader makes
    them: relative to BaseTime when the log has one, else to StartTime when they are small."""
    log = Log()
    rows: list[tuple[str, float, float, float, str, int]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            for key, attr in (("#[StartTime: ", "start_time"), ("#[BaseTime: ", "base_time")):
                if line.startswith(key):
                    try:
                        setattr(log, attr, float(line[len(key):].split()[0].rstrip("],")))
                    except (ValueError, IndexError):
                        raise HdrError(f"{name}:{n}: unreadable header: {line[:80]}") from None
            continue
        if line.startswith('"StartTimestamp"'):
            continue
        tag = ""
        if line.startswith("Tag="):
            tag, _, line = line[4:].partition(",")
        parts = line.split(",")
        if len(parts) != 4:
            raise HdrError(f"{name}:{n}: not an interval line: {line[:80]}")
        try:
            start, length, mx = float(parts[0]), float(parts[1]), float(parts[2])
        except ValueError:
            raise HdrError(f"{name}:{n}: not an interval line: {line[:80]}") from None
        rows.append((tag, start, length, mx, parts[3], n))
    year = 365 * 24 * 3600.0
    for tag, start, length, mx, enc, n in rows:
        if log.base_time is not None:
            start += log.base_time
        elif log.start_time is not None and start < log.start_time - year:
            start += log.start_time
        try:
            h = Histogram.decode(enc)
        except HdrError as e:
            raise HdrError(f"{name}:{n}: {e}") from None
        log.intervals.append(Interval(tag, start, length, mx, h))
    return log


def format_log(log: Log, comment: str = "") -> str:
    """The log's text in HdrHistogram's format 1.3, timestamps relative to its BaseTime (StartTime
    when it has none, else the first interval's start)."""
    base = log.base_time if log.base_time is not None else (
        log.start_time if log.start_time is not None else min((iv.start_s for iv in log.intervals), default=0.0))
    start = log.start_time if log.start_time is not None else base
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(start))
    out = [f"#[{comment}]"] if comment else []
    out += ["#[Histogram log format version 1.3]",
            f"#[StartTime: {start:.3f} (seconds since epoch), {stamp}]",
            f"#[BaseTime: {base:.3f} (seconds since epoch)]",
            '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
    for iv in sorted(log.intervals, key=lambda iv: (iv.start_s, iv.tag)):
        out.append(f"{'Tag=' + iv.tag + ',' if iv.tag else ''}{iv.start_s - base:.3f},{iv.length_s:.3f},"
                   f"{iv.max_ms:.3f},{iv.histogram.encode()}")
    return "\n".join(out) + "\n"


def merge_logs(logs: list[Log]) -> Log:
    """The logs added interval by interval: intervals of one tag that start at the same instant (to the
    millisecond the format keeps) become one, their histograms added and the larger max kept."""
    merged: dict[tuple[str, float], Interval] = {}
    for log in logs:
        for iv in log.intervals:
            key = (iv.tag, round(iv.start_s, 3))
            have = merged.get(key)
            if have is None:
                h = Histogram(iv.histogram.layout)
                h.add(iv.histogram)
                merged[key] = Interval(iv.tag, iv.start_s, iv.length_s, iv.max_ms, h)
            else:
                have.histogram.add(iv.histogram)
                have.length_s = max(have.length_s, iv.length_s)
                have.max_ms = max(have.max_ms, iv.max_ms)
    starts = [t for lg in logs for t in (lg.start_time,) if t is not None]
    bases = [t for lg in logs for t in (lg.base_time,) if t is not None]
    return Log(min(starts) if starts else None, min(bases) if bases else None,
               sorted(merged.values(), key=lambda iv: (iv.start_s, iv.tag)))


# --- several agents' results as one ----------------------------------------------------------------

def split_output(text: str, name: str = "agent") -> tuple[dict, str]:
    """(loadgen's JSON document, the interval log's text) from one stdout of `loadgen --json - --hlog -`
    (the JSON first, then the log). Lines before the document (a collector's, or loadgen's errors
    mixed in by `kubectl logs`) are skipped."""
    start = text.find("{")
    while start > 0 and text[start - 1] != "\n":
        start = text.find("{", start + 1)
    if start < 0:
        raise HdrError(f"{name}: no loadgen JSON in its output")
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError as e:
        raise HdrError(f"{name}: loadgen's JSON cannot be read: {e}") from None
    if not isinstance(doc, dict) or doc.get("tool") != "loadgen":
        raise HdrError(f"{name}: not loadgen's JSON")
    return doc, text[end:]


def latency_json(h: Histogram, corrected: bool, min_us: float | None, max_us: float | None,
                 saturated: int) -> dict:
    """loadgen's "latency" object (bench/loadgen/report.cpp) of a histogram; min and max exact from the
    agents' own (a log keeps only each interval's max, to the microsecond)."""
    j: dict = {"corrected": corrected, "count": h.total,
               "min_us": min_us if min_us is not None else h.min_value() / 1e3,
               "max_us": max_us if max_us is not None else h.max_value() / 1e3,
               "mean_us": h.mean() / 1e3, "stdev_us": h.stddev() / 1e3, "saturated": saturated,
               "percentiles_us": {}, "spectrum": []}
    if h.total:
        j["percentiles_us"] = {k: h.value_at_percentile(p) / 1e3 for k, p in PERCENTILES}
        j["spectrum"] = [{"percentile": p, "value_us": v / 1e3, "count": c} for p, v, c in h.spectrum()]
    return j


def _sum(docs: list[dict], *path: str) -> int | float:
    total: int | float = 0
    for d in docs:
        v = d
        for k in path:
            v = (v or {}).get(k)
        total += v or 0
    return total


def late_limit_s(warmup_s: float) -> float:
    """How late an agent may start after the agreed instant before it is behind schedule: its load must
    begin before the agreed measured window does (loadgen then shortens its warm-up and keeps the
    window); later, its window is not the others' and its connections were cold."""
    return warmup_s


@dataclass
class Merged:
    doc: dict      # loadgen's JSON shape for the whole, with "agents" and "problems"
    log: Log       # the merged interval log

    @property
    def problems(self) -> list[str]:
        return self.doc["problems"]


def merge_agents(outputs: list[tuple[str, str | None]], failures: dict[str, str] | None = None) -> Merged:
    """One result from several agents' stdout (name, text; None: it gave none). failures: a problem per
    agent found by whoever ran it (an exit code, a timeout)."""
    failures = dict(failures or {})
    docs: list[tuple[str, dict, Log]] = []
    problems: list[str] = []
    for name, text in outputs:
        if name in failures:
            problems.append(f"{name}: {failures[name]}")
        if text is None:
            if name not in failures:
                problems.append(f"{name}: no output")
            continue
        try:
            doc, rest = split_output(text, name)
            log = parse_log(rest, name)
        except HdrError as e:
            if name not in failures:
                problems.append(str(e))
            continue
        docs.append((name, doc, log))
        if doc.get("ended") != "completed":
            problems.append(f"{name}: loadgen ended {doc.get('ended')}: {doc.get('message')}")
        if not log.intervals:
            problems.append(f"{name}: its output has no interval log (loadgen --hlog -)")
    agents = []
    rate = bool(docs) and all((d.get("config") or {}).get("rate") for _, d, _ in docs)
    series = [(CORRECTED, "latency"), (UNCORRECTED, "latency_uncorrected")] if rate else [(UNTAGGED, "latency")]
    for name, doc, log in docs:
        start = doc.get("start_at") or {}
        cfg = doc.get("config") or {}
        late = late_limit_s(cfg.get("warmup_s") or 0.0)
        cpu = doc.get("client_cpu") or {}
        agents.append({"name": name, "requests": doc.get("requests"), "requests_per_s": doc.get("requests_per_s"),
                       "duration_s": doc.get("duration_s"), "errors": sum((doc.get("errors") or {}).values()),
                       "ended": doc.get("ended"), "message": doc.get("message"),
                       "connections": cfg.get("connections"), "threads": cfg.get("threads"), "rate": cfg.get("rate"),
                       "client_cpu": {"user_s": cpu.get("user_s"), "sys_s": cpu.get("sys_s"),
                                      "us_per_request": cpu.get("us_per_request")},
                       "window_start_s": doc.get("window_start_s"),
                       "start_at_s": start.get("requested_s"), "skew_s": start.get("skew_s")})
        if start.get("skew_s") is not None and start["skew_s"] > late:
            problems.append(f"{name}: started {start['skew_s']:.3f} s after the agreed instant, behind schedule "
                            f"(after its {late:g} s warm-up: the measured window had begun)")
        for tag, key in series:
            have = sum(iv.histogram.total for iv in log.series(tag))
            want = (doc.get(key) or {}).get("count")
            if want is not None and have != want:
                problems.append(f"{name}: its log's {tag or 'untagged'} intervals hold {have} responses, "
                                f"its JSON {want}")
    windows = [a["window_start_s"] for a in agents if a["window_start_s"] is not None]
    if len(windows) > 1 and max(windows) - min(windows) > 0.001:
        first = min(agents, key=lambda a: a["window_start_s"] or math.inf)
        last = max(agents, key=lambda a: a["window_start_s"] or -math.inf)
        problems.append(f"{last['name']}: its measured window began {last['window_start_s'] - first['window_start_s']:.3f}"
                        f" s after {first['name']}'s: the agents were not given one --start-at")
    merged_log = merge_logs([lg for _, _, lg in docs])
    ds = [d for _, d, _ in docs]
    out: dict = {"tool": "loadgen", "schema": 1, "merged": True, "agents": agents, "problems": problems}
    if ds:
        cfg = dict(ds[0].get("config") or {})
        cfg["connections"] = _sum(ds, "config", "connections")
        cfg["threads"] = _sum(ds, "config", "threads")
        cfg["rate"] = _sum(ds, "config", "rate") if rate else None
        out["config"] = cfg
    bad = [(n, d) for n, d, _ in docs if d.get("ended") != "completed"]
    out["ended"] = "completed" if not bad and not problems and len(docs) == len(outputs) else \
        (bad[0][1].get("ended") if bad else "failed")
    out["message"] = "; ".join(problems) or None
    out["duration_s"] = max((d.get("duration_s") or 0 for d in ds), default=0.0)
    for k in ("sent", "requests", "bytes_read"):
        out[k] = _sum(ds, k)
    out["requests_per_s"] = _sum(ds, "requests_per_s")
    out["bytes_per_s"] = _sum(ds, "bytes_per_s")
    classes = sorted({k for d in ds for k in (d.get("status") or {})})
    out["status"] = {k: _sum(ds, "status", k) for k in classes}
    errs = sorted({k for d in ds for k in (d.get("errors") or {})})
    out["errors"] = {k: _sum(ds, "errors", k) for k in errs}
    out["error_messages"] = {}
    for n, d in ((n, d) for n, d, _ in docs):
        for k, msg in (d.get("error_messages") or {}).items():
            out["error_messages"].setdefault(k, f"{n}: {msg}")
    out["connections"] = {k: _sum(ds, "connections", k) for k in ("opened", "reconnects", "open_at_end")}
    out["warmup"] = {"requests": _sum(ds, "warmup", "requests"), "errors": _sum(ds, "warmup", "errors")}
    user, sys_ = _sum(ds, "client_cpu", "user_s"), _sum(ds, "client_cpu", "sys_s")
    out["client_cpu"] = {"user_s": user, "sys_s": sys_,
                         "us_per_request": (user + sys_) * 1e6 / out["requests"] if out["requests"] else None}
    out["urls"] = []
    for tag, key in series:
        parts = [d.get(key) or {} for d in ds]
        mins = [p["min_us"] for p in parts if p.get("count")]
        maxs = [p["max_us"] for p in parts if p.get("count")]
        out[key] = latency_json(merged_log.total(tag), tag == CORRECTED, min(mins) if mins else None,
                                max(maxs) if maxs else None, int(sum(p.get("saturated") or 0 for p in parts)))
    if not rate:
        out["latency_uncorrected"] = None
    return Merged(out, merged_log)
