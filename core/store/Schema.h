#pragma once
// The store's schema. docs/trace-format.md documents every table and column;
// change both together and bump kSchemaVersion (with a migration) when a
// released layout changes.

namespace pipescope {

// PRAGMA user_version of stores this build writes. Newer files are refused;
// older ones are read as they are (Store::load() fills what they lack).
//   1: the first released layout.
//   2: memory_events.total_allocated and total_reserved.
//   3: threads (the names traces give CPU threads).
inline constexpr int kSchemaVersion = 3;
// application_id marks a SQLite file as a pipescope store ("PSCP").
inline constexpr int kApplicationId = 0x50534350;

inline constexpr const char* kSchemaSql = R"SQL(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE strings (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE sources (
  id            INTEGER PRIMARY KEY,
  path          TEXT NOT NULL,
  format        TEXT NOT NULL,       -- kineto | nsys | capture | simulated
  rank          INTEGER,             -- rank this source describes (NULL: several, see ranks.source_id)
  time_base_ns  INTEGER NOT NULL DEFAULT 0, -- absolute time of the source's zero, when known
  clock_offset_ns INTEGER NOT NULL DEFAULT 0, -- added to every time of this source to align ranks
  alignment     TEXT NOT NULL DEFAULT 'none', -- none | time_base | collectives
  details       TEXT                 -- JSON: format-specific facts (schema version, tool version, ...)
);

CREATE TABLE ranks (
  rank        INTEGER PRIMARY KEY,   -- global rank
  world_size  INTEGER,
  host        TEXT,
  pid         INTEGER,
  device      INTEGER,               -- the rank's main GPU (gpus.device on that host)
  source_id   INTEGER REFERENCES sources(id)
);

CREATE TABLE gpus (
  id            INTEGER PRIMARY KEY,
  rank          INTEGER NOT NULL,
  device        INTEGER NOT NULL,    -- device ordinal as the trace names it
  name          TEXT,
  uuid          TEXT,
  memory_bytes  INTEGER,
  sm_count      INTEGER,
  compute_capability TEXT,
  UNIQUE (rank, device)
);

CREATE TABLE streams (
  id        INTEGER PRIMARY KEY,
  rank      INTEGER NOT NULL,
  device    INTEGER NOT NULL,
  stream    INTEGER NOT NULL,        -- the trace's own stream id (Kineto tid, CUDA stream id)
  name      TEXT,
  UNIQUE (rank, device, stream)
);

CREATE TABLE cpu_ranges (
  id          INTEGER PRIMARY KEY,
  rank        INTEGER NOT NULL,
  tid         INTEGER NOT NULL,
  kind        INTEGER NOT NULL,      -- 0 annotation, 1 nvtx, 2 cpu_op, 3 runtime, 4 driver, 5 gpu_annotation, 6 other
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  name_id     INTEGER NOT NULL REFERENCES strings(id),
  domain_id   INTEGER,               -- NVTX domain (strings.id)
  depth       INTEGER NOT NULL DEFAULT 0, -- nesting depth on its thread, 0 = outermost
  parent_id   INTEGER,               -- enclosing range on the same thread
  correlation INTEGER                -- launch correlation id (runtime/driver calls)
);

CREATE TABLE activities (
  id          INTEGER PRIMARY KEY,
  rank        INTEGER NOT NULL,
  stream_id   INTEGER NOT NULL REFERENCES streams(id),
  kind        INTEGER NOT NULL,      -- 0 kernel, 1 memcpy, 2 memset, 3 sync
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  name_id     INTEGER NOT NULL REFERENCES strings(id),
  correlation INTEGER,               -- launch correlation id as recorded
  launch_id   INTEGER,               -- cpu_ranges.id of the runtime/driver call that launched it
  launch_ns   INTEGER,               -- start of that call (copied so readers need no join)
  bytes       INTEGER,               -- memcpy/memset size
  copy_kind   INTEGER,               -- memcpy direction (CUPTI numbering)
  grid        TEXT,                  -- "x,y,z" for kernels, when known
  block       TEXT
);

CREATE TABLE nccl_ops (
  id            INTEGER PRIMARY KEY,
  rank          INTEGER NOT NULL,
  activity_id   INTEGER,             -- the kernel that ran it, when known
  kind          TEXT NOT NULL,       -- AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, Send, Recv, SendRecv, ...
  is_p2p        INTEGER NOT NULL,
  in_nelems     INTEGER,
  out_nelems    INTEGER,
  bytes         INTEGER,
  dtype         TEXT,
  group_name    TEXT,                -- process group name (e.g. "0", "1") or communicator id
  group_desc    TEXT,                -- process group description (e.g. "default_pg", "pp")
  group_ranks   TEXT,                -- JSON array of global ranks in the group, when known
  group_size    INTEGER,
  peer          INTEGER,             -- global rank of the peer for point-to-point, when known
  seq           INTEGER,             -- collective sequence number in its group, when known
  start_ns      INTEGER,
  end_ns        INTEGER,
  stream_id     INTEGER
);

CREATE TABLE process_groups (
  rank        INTEGER NOT NULL,      -- the rank that reported it
  name        TEXT NOT NULL,
  desc        TEXT,
  ranks       TEXT,                  -- JSON array of global ranks
  size        INTEGER,
  PRIMARY KEY (rank, name)
) WITHOUT ROWID;

CREATE TABLE threads (
  rank        INTEGER NOT NULL,
  tid         INTEGER NOT NULL,      -- as cpu_ranges.tid
  name        TEXT NOT NULL,         -- as the trace names the thread (Kineto's thread_name metadata) (schema 3)
  PRIMARY KEY (rank, tid)
) WITHOUT ROWID;

CREATE TABLE memory_events (
  id          INTEGER PRIMARY KEY,
  rank        INTEGER NOT NULL,
  device      INTEGER NOT NULL,
  ts_ns       INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,      -- positive: allocation, negative: free
  address     INTEGER,
  total_allocated INTEGER,           -- the allocator's bytes in use after this event, when the trace says (schema 2)
  total_reserved  INTEGER            -- the allocator's bytes reserved from the device after it (schema 2)
);

CREATE TABLE diagnostics (
  id          INTEGER PRIMARY KEY,
  source_id   INTEGER,
  severity    TEXT NOT NULL,         -- info | warning | error
  kind        TEXT NOT NULL,         -- short machine-readable key, e.g. "missing_field:ts"
  count       INTEGER NOT NULL,
  example     TEXT,                  -- one example message
  UNIQUE (source_id, kind)
);

CREATE TABLE gpu_summary (
  rank          INTEGER NOT NULL,
  device        INTEGER NOT NULL,
  kernels       INTEGER NOT NULL,
  memcpys       INTEGER NOT NULL,
  memsets       INTEGER NOT NULL,
  syncs         INTEGER NOT NULL,
  kernel_first_ns INTEGER,
  kernel_last_ns  INTEGER,
  kernel_busy_ns  INTEGER NOT NULL,  -- union of kernel intervals over all streams of the GPU
  gpu_first_ns  INTEGER,             -- same over kernels, memcpy and memset
  gpu_last_ns   INTEGER,
  gpu_busy_ns   INTEGER NOT NULL,
  PRIMARY KEY (rank, device)
) WITHOUT ROWID;

CREATE TABLE cache (
  key    TEXT PRIMARY KEY,           -- e.g. "analysis/v1/<options hash>"
  value  TEXT NOT NULL
) WITHOUT ROWID;
)SQL";

// The condition of cpu_ranges_by_time, the ranges readers look up by time:
// annotations, NVTX and GPU-side annotations. CPU ops and runtime calls, most
// of the table, are reached by id (launch_id, parent_id). A query repeats it
// word for word, or SQLite does not use the index. (Spelled with OR: SQLite
// builds a partial index whose condition is an IN list several times slower.)
inline constexpr const char* kCpuRangeKindsByTime = "(kind = 0 OR kind = 1 OR kind = 5)";

// Built after bulk loading, so inserts stay fast. Stores written by earlier
// builds index every CPU range; readers use either.
inline constexpr const char* kIndexSql = R"SQL(
CREATE INDEX activities_by_stream_time ON activities(rank, stream_id, start_ns);
CREATE INDEX activities_by_time ON activities(rank, start_ns);
CREATE INDEX cpu_ranges_by_time ON cpu_ranges(rank, tid, start_ns, end_ns) WHERE (kind = 0 OR kind = 1 OR kind = 5);
CREATE INDEX nccl_ops_by_time ON nccl_ops(rank, start_ns);
CREATE INDEX nccl_ops_by_activity ON nccl_ops(activity_id);
CREATE INDEX memory_events_by_time ON memory_events(rank, device, ts_ns);
)SQL";

} // namespace pipescope
