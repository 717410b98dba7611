package tierstate

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
)

// The seal lineage (tag 105, tierlog's own) is the sealing leader's
// leader-epoch entries over its records below the seal: which epoch
// wrote each offset of the sealed classic prefix. Its last entry's epoch
// is the seal epoch, the epoch of the sealed record at S-1.
//
// The operator's recovery compares a replica's or a remote copy's epochs
// with it: after an unclean election a log, or a remote segment copied
// before the election, may hold the same offsets in a lineage the
// election discarded. Inkless's rules compare offsets only and cannot
// tell. An epoch at one offset tells a whole prefix: a lineage's epochs
// never fall, and two logs holding one offset in one epoch hold the same
// records up to it (Kafka's log matching through the epoch fetch).
//
// Payload: 12 bytes an entry, int32 epoch then int64 start offset, big
// endian, epochs and starts strictly increasing, every start below the
// seal. An empty payload is the unknown lineage (a record that clears
// it). Offsets below the first entry's start have no known epoch, and
// the checks skip them.
const sealLineageEntryBytes = 4 + 8

// MaxSealLineageEntries bounds tag 105. A proposal holding more keeps its
// latest entries: the records nearest the seal are the ones the
// operator's recovery compares, and the rest only weaken its checks to
// Inkless's.
const MaxSealLineageEntries = 64

// encodeSealLineage is the payload (and the State's field: a string keeps
// the State comparable).
func encodeSealLineage(es []epochcache.Entry) string {
	b := make([]byte, 0, len(es)*sealLineageEntryBytes)
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return string(b)
}

// decodeSealLineage reads a payload whose length is a multiple of the
// entry size (the caller checked it); nil for an empty one.
func decodeSealLineage(p string) []epochcache.Entry {
	var es []epochcache.Entry
	for ; len(p) >= sealLineageEntryBytes; p = p[sealLineageEntryBytes:] {
		es = append(es, epochcache.Entry{
			Epoch:       int32(binary.BigEndian.Uint32([]byte(p[:4]))),
			StartOffset: int64(binary.BigEndian.Uint64([]byte(p[4:sealLineageEntryBytes]))),
		})
	}
	return es
}

// checkSealLineage checks a lineage's entries against each other and the
// seal: at most MaxSealLineageEntries, epochs and starts non-negative and
// strictly increasing, every start below the seal.
func checkSealLineage(es []epochcache.Entry, seal int64) error {
	if len(es) > MaxSealLineageEntries {
		return fmt.Errorf("%d entries, at most %d", len(es), MaxSealLineageEntries)
	}
	for i, e := range es {
		switch {
		case e.Epoch < 0 || e.StartOffset < 0:
			return fmt.Errorf("entry %s", e)
		case i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset <= es[i-1].StartOffset):
			return fmt.Errorf("entry %s follows %s: epochs and starts must increase", e, es[i-1])
		case e.StartOffset >= seal:
			return fmt.Errorf("entry %s at or past the seal %d", e, seal)
		}
	}
	return nil
}

// clipSealLineage returns the entries starting below seal, the latest
// MaxSealLineageEntries of them.
func clipSealLineage(es []epochcache.Entry, seal int64) []epochcache.Entry {
	n := len(es)
	for n > 0 && es[n-1].StartOffset >= seal {
		n--
	}
	return es[max(0, n-MaxSealLineageEntries):n]
}

// sealLineageEpochAt is the epoch of offset in the lineage, false below
// its first entry (or for an empty lineage).
func sealLineageEpochAt(es []epochcache.Entry, offset int64) (int32, bool) {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].StartOffset <= offset {
			return es[i].Epoch, true
		}
	}
	return base.UndefinedEpoch, false
}

// lineageAtSeal is the lineage a new seal takes when the leader's record
// at seal-1 is known to be of epoch (-1: unknown): lineageForSeal with
// that one fact.
func lineageAtSeal(es []epochcache.Entry, seal int64, epoch int32) []epochcache.Entry {
	if epoch < 0 || seal <= 0 {
		return clipSealLineage(es, seal)
	}
	return lineageForSeal(es, []epochcache.Entry{{Epoch: epoch, StartOffset: seal - 1}}, seal)
}

// lineageForSeal is the lineage a new (or lowered) seal takes, from the
// committed lineage es and the leader's entries leader (nil: unknown):
// the leader's records below the seal are the ones it commits, so its
// entries below the seal, unless es agrees with them at seal-1 and
// reaches lower (log matching: the two hold the same records up to
// there); es below the seal when the leader's are unknown.
func lineageForSeal(es, leader []epochcache.Entry, seal int64) []epochcache.Entry {
	c, g := clipSealLineage(es, seal), clipSealLineage(leader, seal)
	if len(g) == 0 {
		return c
	}
	ge, _ := sealLineageEpochAt(g, seal-1)
	if ce, ok := sealLineageEpochAt(c, seal-1); ok && ce == ge && c[0].StartOffset < g[0].StartOffset {
		return c
	}
	return g
}

// formatSealLineage prints "0@0,3@5", or "none".
func formatSealLineage(es []epochcache.Entry) string {
	if len(es) == 0 {
		return "none"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}
