package pgcp

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/wal"
)

// cutRunAt makes the batch of tp that holds offset start a row, so that
// a removal of the batches below offset (DeleteRecords, prune,
// retention) drops whole rows: a run row that holds offset after its
// first batch becomes two rows (wal.CutRun), the batches before it under
// their last offset, the rest under the run's own. The partition's row
// must be locked by the caller (every writer of its batches takes that
// lock first). Nothing to cut (no row holds offset, or it starts a row):
// no write.
func cutRunAt(ctx context.Context, tx pgx.Tx, tp wal.TopicIDPartition, offset int64) error {
	id, part := [16]byte(tp.TopicID), tp.Partition
	var fileID int64
	head, run, err := scanBatch(tx.QueryRow(ctx, `SELECT `+batchColumns+`, b.file_id FROM batches b JOIN files f ON f.file_id = b.file_id
		WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset >= $3 ORDER BY b.last_offset LIMIT 1`, id, part, offset), &fileID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	cut, ok, err := wal.CutRun(head, run, offset)
	if err != nil || !ok {
		return err
	}
	var rows batchRows
	rows.add(tp, fileID, cut.Before, cut.BeforeRun)
	var b pgx.Batch
	b.Queue(`UPDATE batches SET base_offset = $4, byte_offset = $5, byte_size = $6, batch_max_timestamp = $7,
			crc = $8, partition_leader_epoch = $9, producer_id = $10, producer_epoch = $11, base_sequence = $12, run = $13
		WHERE topic_id = $1 AND partition = $2 AND last_offset = $3`,
		id, part, head.LastOffset, cut.From.BaseOffset, cut.From.ByteOffset, cut.From.Size, cut.From.MaxTimestamp,
		int64(cut.From.Binding.CRC), cut.From.Binding.PartitionLeaderEpoch, cut.From.Binding.ProducerID,
		cut.From.Binding.ProducerEpoch, cut.From.Binding.BaseSequence, cut.FromRun)
	queueBatchInsert(&b, &rows)
	return tx.SendBatch(ctx, &b).Close()
}
