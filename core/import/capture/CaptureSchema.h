#pragma once
// The per-rank capture file written by the collectors (libpipescope_cupti,
// libpipescope_nccl) and read by the merge. Header-only and dependency-free:
// the collectors include it without linking anything from core.
// docs/capture.md documents every table; change both together and bump
// kCaptureVersion when the layout changes.

namespace pipescope::capture {

// PRAGMA user_version of capture files this build writes. The merge refuses newer ones.
inline constexpr int kCaptureVersion = 1;
// application_id marks a SQLite file as a pipescope capture file ("PSCC").
inline constexpr int kCaptureApplicationId = 0x50534343;
// File name suffix of capture files in a capture directory.
inline constexpr const char* kCaptureSuffix = ".pscap";

// Kinds in gpu_activities.kind; the numbering matches the store's activities.kind.
enum GpuActivityKind : int { kKernel = 0, kMemcpy = 1, kMemset = 2, kSync = 3 };
// Kinds in api_calls.kind.
enum ApiKind : int { kRuntime = 0, kDriver = 1 };
// Kinds in nvtx_ranges.kind.
enum NvtxKind : int { kPushPop = 0, kStartEnd = 1, kMark = 2 };

// All times are int64 nanoseconds on the host's CLOCK_REALTIME (ns since the
// Unix epoch), for GPU activities too: CUPTI's own timestamps are on that clock
// on Linux (checked at start-up; a timestamp callback is used where they are
// not). Strings (kernel names, NVTX messages, API names) are
// interned in `strings`.
inline constexpr const char* kCaptureSchemaSql = R"SQL(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS strings (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS devices (
  id            INTEGER PRIMARY KEY,  -- CUDA device ordinal as CUPTI reports it
  name          TEXT,
  uuid          TEXT,
  memory_bytes  INTEGER,
  sm_count      INTEGER,
  cc_major      INTEGER,
  cc_minor      INTEGER
);
CREATE TABLE IF NOT EXISTS contexts (
  id      INTEGER PRIMARY KEY,        -- CUPTI context id
  device  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS gpu_activities (
  kind        INTEGER NOT NULL,       -- 0 kernel, 1 memcpy, 2 memset, 3 sync
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  device      INTEGER,                -- NULL for sync records (see contexts)
  context     INTEGER,
  stream      INTEGER,                -- NULL for context-wide synchronization
  correlation INTEGER,
  name_id     INTEGER NOT NULL,
  bytes       INTEGER,
  copy_kind   INTEGER,                -- CUpti_ActivityMemcpyKind
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  graph_id    INTEGER
);
CREATE TABLE IF NOT EXISTS api_calls (
  kind        INTEGER NOT NULL,       -- 0 runtime, 1 driver
  cbid        INTEGER NOT NULL,
  name_id     INTEGER NOT NULL,
  tid         INTEGER NOT NULL,
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  correlation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS nvtx_ranges (
  kind        INTEGER NOT NULL,       -- 0 push/pop, 1 start/end, 2 mark
  tid         INTEGER NOT NULL,
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER,                -- NULL when the range never closed
  name_id     INTEGER NOT NULL,
  domain_id   INTEGER                 -- NULL for the default domain
);
CREATE TABLE IF NOT EXISTS memory_events (
  device      INTEGER NOT NULL,
  ts_ns       INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,       -- positive: allocation, negative: release
  address     INTEGER,
  memory_kind INTEGER                 -- CUpti_ActivityMemoryKind
);
CREATE TABLE IF NOT EXISTS nccl_comms (
  comm_hash   INTEGER NOT NULL,       -- NCCL's communicator id (uint64 stored as int64)
  name        TEXT,
  nranks      INTEGER NOT NULL,
  rank        INTEGER NOT NULL,       -- this process's rank in the communicator
  nnodes      INTEGER,
  init_ns     INTEGER NOT NULL,
  PRIMARY KEY (comm_hash, rank)
);
CREATE TABLE IF NOT EXISTS nccl_ops (
  comm_hash   INTEGER NOT NULL,
  func        TEXT NOT NULL,          -- AllReduce, Send, Recv, ...
  is_p2p      INTEGER NOT NULL,
  count       INTEGER,                -- elements
  dtype       TEXT,                   -- ncclFloat32, ...
  bytes       INTEGER,
  peer        INTEGER,                -- peer's rank in the communicator (p2p)
  root        INTEGER,
  seq         INTEGER,                -- collectives: NCCL's sequence number; p2p: per (comm, func, peer) counter
  algo        TEXT,
  proto       TEXT,
  nchannels   INTEGER,
  start_ns    INTEGER NOT NULL,       -- host time NCCL started the operation's event (enqueue)
  end_ns      INTEGER NOT NULL        -- host time NCCL stopped it (enqueued and launched)
);
CREATE TABLE IF NOT EXISTS windows (
  start_ns    INTEGER NOT NULL,       -- capture windows (when recording was on)
  end_ns      INTEGER,
  reason      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dropped (
  source      TEXT PRIMARY KEY,       -- cupti_buffers, writer_queue, nccl_events, ...
  count       INTEGER NOT NULL
) WITHOUT ROWID;
)SQL";

} // namespace pipescope::capture
