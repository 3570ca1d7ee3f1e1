#!/usr/bin/env python3
"""Per-request CPU breakdown of a gateway profile, by what the time was spent on.

    target/release/bench soak --target gateway --concurrency 64 --seconds 22 &   # prints the PIDs
    perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p PID -o perf.data -- sleep 10
    perf script -i perf.data --no-inline -F comm,tid,ip,sym,dso \
        | bench/profile.py --frequency 499 --requests N

Each sample is given to one bucket: its stack is read from the leaf towards the root and the
first frame that names a bucket wins, after skipping the frames that only say *how* (allocation,
copies, hashing, std/core plumbing), so that a `memcpy` under the record writer is the record's.
A sample whose leaf is in the kernel goes to a kernel bucket named by the kind of kernel work
(network, scheduling, epoll, memory), except a file write, which is its writer's (the access log,
the journal, SQLite).
With `--requests N` (the requests answered while perf recorded) each bucket is also given in
microseconds of CPU per request (samples / frequency / N). The software clock (`cpu-clock`)
works on VMs without hardware counters; DWARF call graphs because Rust's std has no frame
pointers.
"""

import argparse
import collections
import re
import sys

WASM = "plugin: wasm code and its runtime (fibers, epochs, libcalls)"

# (bucket, pattern on a user-space frame's symbol), first match wins for a frame. The module
# names of builds before the flow/surfaces split (e.g. e8cf2fa: `server::handlers`, `api`,
# `plugins::bindings`) map to the same buckets, so that two builds can be compared.
BUCKETS = [
    ("plugin: instantiate + teardown", r"Pre<.*>::instantiate|InstancePre|instantiate_pre|Store<.*>::new|StoreInner|StoreOpaque|drop_in_place<wasmtime::runtime::(store|module::registry|component::instance)|drop_in_place<gateway::plugins::wit::bindings|wasmtime::runtime::vm::instance|wasmtime::runtime::vm::component::ComponentInstance|instance::allocator|pooling|decommit|pagemap|MemoryImageSlot|vm::cow|FiberStack|stack_pool|component::instance::Instantiator|ModuleRegistry|module_artifacts|lookup_vmdef|Component::store_in|cranelift_bforest"),
    ("plugin: WIT lift/lower (copies in and out)", r"wasmtime::runtime::component::func::typed|component::func::host|typed::lower|typed::lift|::lift_|::lower_|Lower>::|Lift>::|canonical_abi|ResourceTable|realloc|gateway::plugins::wit|gateway::plugins::bindings"),
    ("plugin: host imports (http, sink, log)", r"gateway::plugins::imports|gateway::plugins::sandbox::.*(PluginState|LogStream)"),
    (WASM, r"^wasm\[|wasm-function|trampoline|wasmtime::runtime::func::|wasmtime::runtime::component::func::|wasmtime::runtime::fiber|wasmtime_fiber|wasmtime::runtime::vm::libcalls|wasmtime::runtime::vm::traphandlers"),
    ("JSON (parse, serialize)", r"serde_json|serde::de|serde::ser|serde_path_to_error|gateway::surfaces::json"),
    ("limits, quota, scopes", r"gateway::limits|gateway::flow::quota|redis::"),
    ("routing, failover", r"gateway::routing|gateway::flow::failover"),
    ("metrics", r"gateway::metrics|prometheus"),
    ("traces", r"gateway::traces|opentelemetry"),
    ("record: journal", r"gateway::store::journal"),
    ("record: writer (SQLite / PostgreSQL)", r"gateway::store::writer|rusqlite|sqlite3|libsqlite|tokio_postgres|postgres_protocol|deadpool"),
    ("record: draft, save", r"gateway::flow::record|gateway::server::record"),
    ("access log, logging", r"tracing_subscriber|tracing_core|tracing::|gateway::server::access|log::"),
    ("provider-key redaction", r"gateway::redact"),
    ("auth, key check", r"gateway::auth|gateway::keys|gateway::store::key_cache|handlers::authenticate|sha2"),
    ("surfaces: parse, render", r"gateway::surfaces|gateway::api::"),
    ("upstream HTTP client (reqwest, hyper client)", r"reqwest|hyper_util::client|hyper::client|gateway::plugins::sandbox|gateway::plugins::upstream|tower"),
    ("HTTP server (hyper, h1/h2 detection)", r"hyper::proto|hyper::server|hyper_util::server|h2::|gateway::server"),
    ("flow (admit, call, stream; bodies)", r"gateway::flow|gateway::http::|gateway::server::(handlers|stream|body)"),
    ("tokio runtime (scheduler, timers, I/O driver)", r"tokio::"),
]

# Frames that only say how: skipped when looking for the bucket. A `drop_in_place` of a
# wasmtime or gateway type is kept: dropping a store is the instance's teardown.
GENERIC = re.compile(
    r"^(__memcpy|__memmove|__memset|memcpy|memmove|memset|malloc|free|realloc|calloc|_int_|cfree|"
    r"__libc_|__GI_|_dl_|__rust_|alloc::|core::(?!ptr::drop_in_place<(wasmtime|gateway))|std::|"
    r"hashbrown|bytes::|http::|<alloc::|<core::|<std::|<&|<bytes::|<http::|__pthread|pthread_|"
    r"syscall|<tokio::time::timeout|tokio::runtime::task::|tokio::net::|tokio::runtime::io::|"
    r"tokio::sync::|<tokio::sync|<tokio::net|<hyper_util::rt::tokio|hyper_util::rt::tokio)"
)

KERNEL = [
    ("kernel: network (TCP on loopback)", r"tcp_|sock_|inet_|ip_|__dev_queue|net_rx|netif_|skb|__sys_sendto|__sys_recvfrom|sendmsg|recvmsg|loopback|__napi|do_softirq"),
    ("kernel: scheduling, wakeups", r"schedule|futex|try_to_wake_up|finish_task_switch|raw_spin|ttwu|enqueue_task|dequeue_task|psi_|update_curr|__switch_to"),
    ("kernel: epoll", r"epoll|ep_poll|ep_send"),
    ("kernel: memory (faults, mmap, madvise)", r"page_fault|handle_mm_fault|do_anonymous|clear_page|madvise|mmap|munmap|zap_|tlb|mprotect|pagemap"),
    ("kernel: files", r"vfs_|ext4|fsync|filemap|generic_perform_write|xfs_"),
]


def user_bucket(frames):
    """The bucket of the first user-space frame that names one, or None."""
    for symbol, dso in frames:
        if "kernel" in dso or GENERIC.match(symbol):
            continue
        if symbol == "[unknown]":
            # wasmtime's JIT code: perf finds no symbol for it (no perf map is written).
            if re.search(r"perf-\d+\.map", dso):
                return WASM
            continue
        for name, pattern in BUCKETS:
            if re.search(pattern, symbol):
                return name
    return None


def bucket_of(frames):
    """frames: [(symbol, dso)] from leaf to root."""
    if frames and "kernel" in frames[0][1]:
        kind = "kernel: other"
        for symbol, dso in frames:
            if "kernel" not in dso:
                break
            match = next((name for name, pattern in KERNEL if re.search(pattern, symbol)), None)
            if match:
                kind = match
                break
        # A write to a file is the cost of whoever writes it (the access log, the journal,
        # SQLite); the network and the scheduler are the cost of the hops themselves.
        if kind in ("kernel: files", "kernel: other"):
            return user_bucket(frames) or kind
        return kind
    return user_bucket(frames) or (
        "libc (allocation, copies) outside the above"
        if any("libc" in dso for _, dso in frames)
        else "other"
    )


def samples(lines):
    """Yields (comm, frames) per sample of `perf script -F comm,tid,ip,sym,dso` output."""
    comm, frames = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            comm = line.split()[0]
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            frames.append((m.group(1), m.group(2)))
    if comm is not None:
        yield comm, frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=float, help="requests answered during the recording")
    parser.add_argument("--frequency", type=float, default=1999, help="perf record -F (Hz)")
    args = parser.parse_args()
    counts = collections.Counter()
    threads = collections.Counter()
    total = 0
    for comm, frames in samples(sys.stdin):
        counts[bucket_of(frames)] += 1
        threads[re.sub(r"[-_]?\d+$", "", comm)] += 1
        total += 1
    if total == 0:
        sys.exit("no samples")
    per_request = args.requests and 1e6 / args.frequency / args.requests
    print("| what | share of the gateway's CPU |" + (" µs per request |" if per_request else ""))
    print("| --- | ---: |" + (" ---: |" if per_request else ""))
    for name, n in counts.most_common():
        row = f"| {name} | {100 * n / total:.1f}% |"
        if per_request:
            row += f" {n * per_request:.1f} |"
        print(row)
    row = f"| **all** ({total} samples) | 100% |"
    if per_request:
        row += f" {total * per_request:.1f} |"
    print(row)
    print()
    print("threads: " + ", ".join(f"{t} {100 * n / total:.1f}%" for t, n in threads.most_common()))


if __name__ == "__main__":
    main()
