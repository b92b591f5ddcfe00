-- A small Nsight Systems export in the 3.x layout (metadata in META_DATA_EXPORT),
-- written by hand so every number the tests expect can be read off below.
-- Column names and meanings follow Nsight Systems' SQLite schema reference.
--
-- Three processes, ids packed as nsys does: globalPid = (vm << 48) | (pid << 24),
-- globalTid = globalPid | tid.
--   pid 200 (threads 201, 202, 203): MPI rank 0, GPU 0
--   pid 100 (thread 101):            MPI rank 1, GPU 1
--   pid 300 (thread 301):            a launcher with NVTX only, not an MPI rank

CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES
  ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems'),
  ('EXPORT_PRODUCT_VERSION', '2023.4.1.97'),
  ('EXPORT_SCHEMA_VERSION', '3.11.1'),
  ('EXPORT_SCHEMA_VERSION_MAJOR', '3'),
  ('EXPORT_SCHEMA_VERSION_MINOR', '11'),
  ('EXPORT_SCHEMA_VERSION_MICRO', '1');

CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES
  (0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', 'CUDA runtime'),
  (1, 'TRACE_PROCESS_EVENT_CUDA_DRIVER', 'CUDA driver'),
  (26, 'TRACE_PROCESS_EVENT_CUDA_API', 'CUDA API');

CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES
  (34, 'NvtxMark', 'NvtxMark'),
  (59, 'NvtxPushPopRange', 'NvtxPushPopRange'),
  (60, 'NvtxStartEndRange', 'NvtxStartEndRange'),
  (75, 'NvtxDomainCreate', 'NvtxDomainCreate');

CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES
  (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
  (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
  (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),
  (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');

CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES
  (1, 'void gemm_kernel<float>(float const*, float*)'),
  (2, 'gemm_kernel'),
  (3, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm *, unsigned long, ncclWork *)'),
  (4, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
  (5, 'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)'),
  (6, 'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t'),
  (10, 'cudaLaunchKernel_v7000'),
  (11, 'cuLaunchKernel'),
  (12, 'cudaMemsetAsync_v3020'),
  (13, 'cudaStreamSynchronize_v3020'),
  (20, 'forward');

CREATE TABLE TARGET_INFO_GPU (
  vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
  l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER,
  pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER,
  computeMajor INTEGER, computeMinor INTEGER);
INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, totalMemory, smCount, uuid, cuDevice, computeMajor, computeMinor) VALUES
  (281474976710656, 0, 'NVIDIA H100 80GB HBM3', '0000:18:00.0', 85029158912, 132, 'aaaa', 0, 9, 0),
  (281474976710656, 1, 'NVIDIA H100 80GB HBM3', '0000:2a:00.0', 85029158912, 132, 'bbbb', 1, 9, 0);

CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '2023-11-14T22:13:20', '2023-11-14T14:13:20');

CREATE TABLE TARGET_INFO_NVTX_CUDA_STREAM (
  name TEXT NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, processId INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL);
INSERT INTO TARGET_INFO_NVTX_CUDA_STREAM VALUES ('comm', 0, 1, 200, 0, 1, 13);

CREATE TABLE MPI_RANKS (globalTid INTEGER NOT NULL, rank INTEGER NOT NULL);
INSERT INTO MPI_RANKS VALUES
  ((1 << 48) | (200 << 24) | 201, 0),
  ((1 << 48) | (100 << 24) | 101, 1);

-- start is nullable here (it is NOT NULL in real exports) to hold one bad row.
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
  start INTEGER, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
  (start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName,
   registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ,
   staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) VALUES
  -- pid 200, rank 0
  (1000, 2000, 0, 1, 7,  11, (1 << 48) | (200 << 24), 1, 2, 32, 120, 2, 1, 256, 1, 1, 0, 0, 0, 0, 1),
  (2500, 4000, 0, 1, 13, 12, (1 << 48) | (200 << 24), 3, 4, 32, 4, 1, 1, 512, 1, 1, 0, 0, 0, 0, 2),
  (5000, 4000, 0, 1, 7,  13, (1 << 48) | (200 << 24), 1, 2, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3),   -- ends before it starts
  (6000, 6500, 5, 1, 7,  14, (1 << 48) | (200 << 24), 1, 2, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4),   -- device 5 is not in TARGET_INFO_GPU
  (NULL, 6600, 0, 1, 7,  17, (1 << 48) | (200 << 24), 1, 2, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 5),   -- no start
  -- pid 100, rank 1: the same correlation ids as rank 0, which must not mix
  (1100, 2100, 1, 1, 7,  11, (1 << 48) | (100 << 24), 1, 2, 32, 120, 2, 1, 256, 1, 1, 0, 0, 0, 0, 1),
  (2600, 3900, 1, 1, 7,  12, (1 << 48) | (100 << 24), 5, 6, 32, 2, 1, 1, 128, 1, 1, 0, 0, 0, 0, 2);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind) VALUES
  (500, 800, 1, 1, 7, 10, (1 << 48) | (100 << 24), 1048576, 1, 0, 2);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid, value, bytes, memKind) VALUES
  (7100, 7200, 0, 1, 7, 15, (1 << 48) | (200 << 24), 0, 4096, 2);

CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, streamId, correlationId, globalPid, syncType, eventId) VALUES
  (4100, 4200, 0, 1, 7, 16, (1 << 48) | (200 << 24), 3, 0),                  -- stream sync on stream 7
  (4000, 4300, 1, 1, 4294967295, 20, (1 << 48) | (100 << 24), 4, 0);         -- context sync: no stream

CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
  start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) VALUES
  (900,  950,  0,  (1 << 48) | (200 << 24) | 201, 11, 10, 0),
  (900,  950,  26, (1 << 48) | (200 << 24) | 201, 11, 10, 0),   -- another event class repeating the call above
  (2400, 2450, 0,  (1 << 48) | (200 << 24) | 201, 12, 10, 0),
  (5900, 5950, 1,  (1 << 48) | (200 << 24) | 201, 14, 11, 0),   -- a driver call
  (7000, 7010, 0,  (1 << 48) | (200 << 24) | 201, 15, 12, 0),
  (4050, 4250, 0,  (1 << 48) | (200 << 24) | 201, 16, 13, 0),
  (1000, 1050, 0,  (1 << 48) | (100 << 24) | 101, 11, 10, 0),
  (2500, 2550, 0,  (1 << 48) | (100 << 24) | 101, 12, 10, 0);

CREATE TABLE NVTX_EVENTS (
  start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
  color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER,
  uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, textId, domainId) VALUES
  (0,    NULL,  75, NULL, 'pipeline',     (1 << 48) | (200 << 24) | 201, NULL, NULL, 1),    -- domain 1 is named "pipeline"
  (0,    10000, 59, NULL, 'step 1',       (1 << 48) | (200 << 24) | 201, NULL, NULL, 0),
  (100,  5000,  59, NULL, NULL,           (1 << 48) | (200 << 24) | 201, NULL, 20,   1),    -- "forward", registered string, domain "pipeline"
  (300,  NULL,  34, NULL, 'checkpoint',   (1 << 48) | (200 << 24) | 201, NULL, NULL, 0),    -- a mark, not a range
  (200,  3000,  60, 1,    'microbatch 0', (1 << 48) | (200 << 24) | 202, (1 << 48) | (200 << 24) | 203, NULL, 0),
  (9000, NULL,  59, NULL, 'tail',         (1 << 48) | (200 << 24) | 201, NULL, NULL, 0),    -- still open when the capture stopped
  (0,    9000,  59, NULL, 'step 1',       (1 << 48) | (100 << 24) | 101, NULL, NULL, 0),
  (0,    100,   59, NULL, 'launcher',     (1 << 48) | (300 << 24) | 301, NULL, NULL, 0);
