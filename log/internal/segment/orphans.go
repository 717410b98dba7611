package segment

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// CreateOverOrphans is Create for a base offset where no live segment can
// be: at or above the log end offset (a roll, a new empty log). Index
// files found there without a .log (.index, .timeindex, .txnindex) are
// orphans, left by a crash or by hand; they cannot hold live data, since
// every offset they could describe is beyond the log's end. Create would
// refuse them, and a log that cannot roll refuses every write, so they
// are removed first and the directory fsynced before the new .log is
// created: an orphan that came back after a crash would otherwise be read
// as the new segment's index. A .log at baseOffset still makes it fail,
// as Create does. It returns the paths removed. beforeDirSync (if not
// nil) runs before that directory fsync: the log syncs the data of the
// segments it rolled there (an fsync of the directory makes every entry
// in it durable, the last segment's too).
func CreateOverOrphans(fs vfs.FS, dir string, baseOffset int64, createdMs int64, opts Options, beforeDirSync func() error) (*Segment, []string, error) {
	if baseOffset < 0 {
		return nil, nil, invalidArgf("negative base offset %d", baseOffset)
	}
	logPath := fs.PathJoin(dir, LogFileName(baseOffset))
	if _, err := fs.Stat(logPath); err == nil {
		return nil, nil, invalidArgf("create %s: file exists", logPath)
	} else if !isNotExist(err) {
		return nil, nil, ioErr("stat", logPath, err)
	}
	var removed []string
	for _, name := range []string{IndexFileName(baseOffset), TimeIndexFileName(baseOffset), TxnIndexFileName(baseOffset)} {
		p := fs.PathJoin(dir, name)
		if _, err := fs.Stat(p); isNotExist(err) {
			continue
		} else if err != nil {
			return nil, removed, ioErr("stat", p, err)
		}
		if err := fs.Remove(p); err != nil {
			return nil, removed, ioErr("remove", p, err)
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		if beforeDirSync != nil {
			if err := beforeDirSync(); err != nil {
				return nil, removed, err
			}
		}
		if err := syncDir(fs, dir); err != nil {
			return nil, removed, err
		}
	}
	s, err := Create(fs, dir, baseOffset, createdMs, opts)
	return s, removed, err
}
