-- Version 3: a batches row may hold a run, contiguous batches of one
-- partition in one object committed together (wal.JoinRun), as Inkless's
-- commit_file_v2 coalesces them (github.com/aiven/inkless/pull/671). Such
-- a row keeps the run's whole coordinates (base_offset of its first
-- batch, last_offset of its last, the byte range over all of them, the
-- largest batch_max_timestamp, the first batch's binding) and in run each
-- batch's offset count, size, max timestamp and binding, so that each
-- batch is still checked against its own coordinates and binding when it
-- is read (wal.SplitRun). A row of one batch, and every row written
-- before this version, has run NULL and is read as before.
--
-- A run always has a binding. As in version 2, the nullable column
-- changes only the catalog and the check is NOT VALID: the old rows are
-- all NULL in run.
ALTER TABLE batches ADD COLUMN run bytea;
ALTER TABLE batches ADD CONSTRAINT batches_run CHECK (run IS NULL OR crc IS NOT NULL) NOT VALID;
