-- A small Nsight Systems export in the older 2.x layout: metadata in
-- EXPORT_META_DATA, no enum tables, fewer columns per table. One process
-- (pid 4242, thread 4243), one GPU.

CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT);
INSERT INTO EXPORT_META_DATA VALUES
  ('EXPORT_SCHEMA_VERSION', '2.7.1'),
  ('EXPORT_PRODUCT_VERSION', '2021.5.1.117');

CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES
  (1, 'void axpy<double>(double, double const*, double*)'),
  (2, 'axpy'),
  (3, 'cudaLaunchKernel_v7000'),
  (4, 'cudaMemcpy_v3020');

CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, smCount INTEGER,
  computeMajor INTEGER, computeMinor INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (0, 'Tesla V100-SXM2-16GB', 16945512448, 80, 7, 0);

CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1630000000123456789);

CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,
  contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT,
  demangledName INT NOT NULL, shortName INT NOT NULL, gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL,
  blockX INT NOT NULL, blockY INT NOT NULL, blockZ INT NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
  (2000, 3000, 0, 1, 7, 5, (4242 << 24), 1, 2, 64, 1, 1, 128, 1, 1),
  (3500, 4700, 0, 1, 7, 6, (4242 << 24), 1, 2, 64, 1, 1, 128, 1, 1);

CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,
  contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT,
  bytes INT NOT NULL, copyKind INT NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (5000, 5600, 0, 1, 7, 7, (4242 << 24), 8192, 2);

CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT NOT NULL,
  globalTid INT, correlationId INT, nameId INT NOT NULL, returnValue INT NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
  (1900, 1950, 0, (4242 << 24) | 4243, 5, 3, 0),
  (3400, 3450, 0, (4242 << 24) | 4243, 6, 3, 0),
  (4900, 5700, 0, (4242 << 24) | 4243, 7, 4, 0);

CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT,
  color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT);
INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES
  (1000, 6000, 59, 'iteration', (4242 << 24) | 4243);
