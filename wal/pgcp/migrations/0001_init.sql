-- The control plane's schema, version 1. Offsets are Kafka's (inclusive
-- base and last offsets, high_watermark exclusive); times are Unix
-- milliseconds from the control plane's clock (Options.Now).

-- One row per partition: W (log_start_offset), HW, S, X (-1 = never
-- reported) and the bytes of its live batches.
CREATE TABLE logs (
    topic_id                    uuid    NOT NULL,
    partition                   integer NOT NULL CHECK (partition >= 0),
    topic_name                  text    NOT NULL,
    log_start_offset            bigint  NOT NULL CHECK (log_start_offset >= 0),
    high_watermark              bigint  NOT NULL CHECK (high_watermark >= log_start_offset),
    diskless_start_offset       bigint  NOT NULL CHECK (diskless_start_offset >= 0),
    cross_tier_log_start_offset bigint  NOT NULL DEFAULT -1 CHECK (cross_tier_log_start_offset >= -1),
    byte_size                   bigint  NOT NULL DEFAULT 0 CHECK (byte_size >= 0),
    PRIMARY KEY (topic_id, partition)
);

-- One row per object: committed (reason 1) or an expired reservation
-- (reason 2, an orphan: never committed). state 1 = live, 2 = marked for
-- deletion at marked_for_deletion_at. digest and the result_* arrays
-- (one element per batch of the commit) answer a retried commit.
CREATE TABLE files (
    file_id                bigserial PRIMARY KEY,
    object_key             text     NOT NULL UNIQUE CHECK (length(object_key) BETWEEN 1 AND 1024),
    reason                 smallint NOT NULL CHECK (reason IN (1, 2)),
    state                  smallint NOT NULL CHECK (state IN (1, 2)),
    uploader_broker_id     integer  NOT NULL DEFAULT -1,
    broker_epoch           bigint   NOT NULL DEFAULT -1,
    size                   bigint   NOT NULL DEFAULT 0 CHECK (size >= 0),
    committed_at           bigint   NOT NULL,
    marked_for_deletion_at bigint,
    digest                 bytea,
    result_status          smallint[],
    result_base_offset     bigint[],
    result_append_time     bigint[],
    result_log_start       bigint[],
    result_detail          text[],
    CHECK ((state = 2) = (marked_for_deletion_at IS NOT NULL))
);
CREATE INDEX files_marked ON files (marked_for_deletion_at, object_key) WHERE state = 2;

-- One row per accepted batch, keyed by its partition and last offset.
-- No foreign keys: each would run a trigger query per inserted row (a
-- commit of 1,000 batches measured 100 ms with them, 16 ms without). The
-- calls keep them true instead: batches are inserted only under their
-- partition's row lock, in the transaction that read the row; a
-- partition's row goes only after its batches (DeleteTopics); a files
-- row goes only when no batch names it (DeleteFiles checks).
CREATE TABLE batches (
    topic_id             uuid     NOT NULL,
    partition            integer  NOT NULL,
    last_offset          bigint   NOT NULL,
    base_offset          bigint   NOT NULL CHECK (base_offset >= 0 AND base_offset <= last_offset),
    file_id              bigint   NOT NULL,
    byte_offset          bigint   NOT NULL CHECK (byte_offset >= 0),
    byte_size            bigint   NOT NULL CHECK (byte_size > 0),
    timestamp_type       smallint NOT NULL CHECK (timestamp_type IN (0, 1)),
    batch_max_timestamp  bigint   NOT NULL,
    log_append_timestamp bigint   NOT NULL,
    PRIMARY KEY (topic_id, partition, last_offset)
);
CREATE INDEX batches_by_file ON batches (file_id);

-- One row per (partition, producer): its latest epoch and that epoch's
-- last batches, oldest first (at most five, Kafka's
-- ProducerStateEntry.NUM_BATCHES_TO_RETAIN), as parallel arrays.
CREATE TABLE producer_state (
    topic_id         uuid     NOT NULL,
    partition        integer  NOT NULL,
    producer_id      bigint   NOT NULL CHECK (producer_id >= 0),
    producer_epoch   smallint NOT NULL CHECK (producer_epoch >= 0),
    base_sequences   integer[] NOT NULL,
    last_sequences   integer[] NOT NULL,
    assigned_offsets bigint[]  NOT NULL,
    timestamps       bigint[]  NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id),
    FOREIGN KEY (topic_id, partition) REFERENCES logs (topic_id, partition)
);

-- Keys reserved before their upload and not yet committed.
CREATE TABLE reservations (
    object_key  text   PRIMARY KEY,
    reserved_at bigint NOT NULL
);
CREATE INDEX reservations_by_time ON reservations (reserved_at, object_key);

-- Keys of expired reservations, kept after the orphan's files row is
-- gone, so that a commit or reservation of such a key fails for good.
CREATE TABLE reaped_keys (
    object_key text   PRIMARY KEY,
    reaped_at  bigint NOT NULL
);

-- The FIFO tables churn: vacuum them early (Inkless measured multi-hour
-- vacuums of a large batches table at the default scale factor).
ALTER TABLE batches SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 10000);
ALTER TABLE producer_state SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 10000);
