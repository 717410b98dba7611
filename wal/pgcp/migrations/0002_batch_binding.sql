-- Version 2: each batch row keeps its binding (wal.BatchBinding), the
-- header fields that tie the row to the bytes committed for it: the
-- batch's CRC-32C field (unsigned, in a bigint), its partition leader
-- epoch and its producer id, epoch and base sequence. Rows committed
-- before this version have all five NULL and are read with an unknown
-- binding; CommitFile sets all five.
--
-- Adding nullable columns without a default changes only the catalog.
-- The check is NOT VALID so that adding it does not scan the table under
-- its exclusive lock: the rows it would scan are the old ones, all NULL,
-- and every row inserted or updated from now on is checked.
ALTER TABLE batches
    ADD COLUMN crc                    bigint,
    ADD COLUMN partition_leader_epoch integer,
    ADD COLUMN producer_id            bigint,
    ADD COLUMN producer_epoch         smallint,
    ADD COLUMN base_sequence          integer;
ALTER TABLE batches ADD CONSTRAINT batches_binding CHECK (
    num_nulls(crc, partition_leader_epoch, producer_id, producer_epoch, base_sequence) IN (0, 5)
    AND (crc IS NULL OR crc BETWEEN 0 AND 4294967295)) NOT VALID;
